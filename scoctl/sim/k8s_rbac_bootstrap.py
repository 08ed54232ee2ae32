"""The RBAC objects a new cluster has before anyone applies anything (the simulated Kubernetes
API creates them at start, as kube-apiserver's RBAC post-start hook does).

Following ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go`` (`ClusterRoles`,
`ClusterRoleBindings`), reduced to the roles a user of this emulator meets:

* ``cluster-admin`` (everything, bound to ``system:masters``);
* ``system:discovery`` (the discovery and OpenAPI paths, bound to ``system:authenticated``),
  ``system:public-info-viewer`` (``/healthz`` ``/livez`` ``/readyz`` ``/version``, bound to
  ``system:authenticated`` and ``system:unauthenticated``), ``system:basic-user`` (create
  SelfSubjectAccessReviews, SelfSubjectRulesReviews and SelfSubjectReviews, bound to
  ``system:authenticated``), ``system:monitoring``;
* the user-facing ``admin``, ``edit`` and ``view``: upstream these are aggregated ClusterRoles
  (``aggregationRule`` over ``rbac.authorization.k8s.io/aggregate-to-<role>``) whose rules the
  clusterrole-aggregation controller fills from ``system:aggregate-to-admin/edit/view``; here
  they are stored with the rules filled in (the resources of the groups this emulator serves,
  and those upstream lists beside them);
* the node-bootstrap roles of the certificates API: ``system:node-bootstrapper`` and
  ``system:certificates.k8s.io:certificatesigningrequests:nodeclient`` / ``selfnodeclient``;
* and, as a kubeadm cluster has them (``cmd/kubeadm/app/phases/bootstraptoken/node/
  tlsbootstrap.go``, ``phases/uploadconfig``, ``phases/kubelet``), ``kubeadm:get-nodes`` and
  the kube-system Roles ``kubeadm:nodes-kubeadm-config`` and ``kubeadm:kubelet-config`` that
  ``configs/kubernetes/bootstrap-bindings.yaml`` binds scoctl's bootstrap-token group to.

Every object carries the label ``kubernetes.io/bootstrapping: rbac-defaults`` and the
annotation ``rbac.authorization.kubernetes.io/autoupdate: "true"``, as upstream's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Obj = dict[str, Any]

RBAC = "rbac.authorization.k8s.io"
READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
READ_WRITE = [*READ, *WRITE]
CERTS = "certificates.k8s.io"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
ANNOTATIONS = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _rule(verbs: Sequence[str], groups: Sequence[str], resources: Sequence[str]) -> Obj:
    return {"verbs": list(verbs), "apiGroups": list(groups), "resources": list(resources)}


def _urls(verbs: Sequence[str], urls: Sequence[str]) -> Obj:
    return {"verbs": list(verbs), "nonResourceURLs": list(urls)}


def _meta(name: str, namespace: str = "", labels: Obj | None = None) -> Obj:
    meta: Obj = {"name": name, "labels": {**LABELS, **(labels or {})},
                 "annotations": dict(ANNOTATIONS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _cluster_role(name: str, rules: Sequence[Obj], *, aggregate_to: str = "") -> Obj:
    role: Obj = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole", "metadata": _meta(name),
                 "rules": list(rules)}
    if aggregate_to:
        role["aggregationRule"] = {"clusterRoleSelectors": [
            {"matchLabels": {f"{RBAC}/aggregate-to-{aggregate_to}": "true"}}]}
    return role


def _binding(kind: str, name: str, role_kind: str, role: str, subjects: Sequence[Obj],
             namespace: str = "") -> Obj:
    return {"apiVersion": f"{RBAC}/v1", "kind": kind, "metadata": _meta(name, namespace),
            "roleRef": {"apiGroup": RBAC, "kind": role_kind, "name": role},
            "subjects": list(subjects)}


def _group(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "Group", "name": name}


def _user(name: str) -> Obj:
    return {"apiGroup": RBAC, "kind": "User", "name": name}


# system:aggregate-to-view (policy.go): read the non-escalating resources of a namespace
_VIEW = [
    _rule(READ, [""], ["pods", "replicationcontrollers", "replicationcontrollers/scale",
                       "serviceaccounts", "services", "services/status", "endpoints",
                       "persistentvolumeclaims", "persistentvolumeclaims/status",
                       "configmaps"]),
    _rule(READ, [""], ["limitranges", "resourcequotas", "bindings", "events", "pods/status",
                       "resourcequotas/status", "namespaces/status",
                       "replicationcontrollers/status", "pods/log"]),
    _rule(READ, [""], ["namespaces"]),
    _rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(READ, ["apps"], ["controllerrevisions", "statefulsets", "statefulsets/scale",
                           "statefulsets/status", "daemonsets", "daemonsets/status",
                           "deployments", "deployments/scale", "deployments/status",
                           "replicasets", "replicasets/scale", "replicasets/status"]),
    _rule(READ, ["autoscaling"], ["horizontalpodautoscalers",
                                  "horizontalpodautoscalers/status"]),
    _rule(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
]
# system:aggregate-to-edit: write those, read Secrets, evict pods, impersonate ServiceAccounts
_EDIT = [
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(WRITE, [""], ["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(WRITE, [""], ["replicationcontrollers", "replicationcontrollers/scale",
                        "serviceaccounts", "services", "services/proxy",
                        "persistentvolumeclaims", "configmaps", "secrets", "events"]),
    _rule(["create"], [""], ["serviceaccounts/token"]),
    _rule(WRITE, ["apps"], ["statefulsets", "statefulsets/scale", "daemonsets", "deployments",
                            "deployments/scale", "deployments/rollback", "replicasets",
                            "replicasets/scale"]),
    _rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(WRITE, ["batch"], ["jobs", "cronjobs"]),
    _rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(WRITE, ["networking.k8s.io"], ["networkpolicies", "ingresses"]),
    _rule(READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets",
                       "services/proxy"]),
]
# system:aggregate-to-admin: edit plus the namespace's own RBAC and local access reviews
_ADMIN = [
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(READ_WRITE, [RBAC], ["rolebindings", "roles"]),
]
_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                   "/openapi/*", "/readyz", "/version", "/version/"]
PUBLIC_INFO_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")


def cluster_roles() -> list[Obj]:
    """policy.go `ClusterRoles`, the part served here."""
    return [
        _cluster_role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _cluster_role("system:discovery", [_urls(["get"], _DISCOVERY_URLS)]),
        _cluster_role("system:monitoring", [_urls(["get"], [
            "/healthz", "/healthz/*", "/livez", "/livez/*", "/readyz", "/readyz/*",
            "/metrics", "/metrics/slis"])]),
        _cluster_role("system:basic-user", [
            _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews",
                                                         "selfsubjectrulesreviews"]),
            _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])]),
        _cluster_role("system:public-info-viewer", [_urls(["get"], PUBLIC_INFO_URLS)]),
        _cluster_role("admin", [*_VIEW, *_EDIT, *_ADMIN], aggregate_to="admin"),
        _cluster_role("edit", [*_VIEW, *_EDIT], aggregate_to="edit"),
        _cluster_role("view", _VIEW, aggregate_to="view"),
        _cluster_role("system:node-bootstrapper", [
            _rule(["create", "get", "list", "watch"], [CERTS], ["certificatesigningrequests"])]),
        _cluster_role("system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
            _rule(["create"], [CERTS], ["certificatesigningrequests/nodeclient"])]),
        _cluster_role("system:certificates.k8s.io:certificatesigningrequests:selfnodeclient", [
            _rule(["create"], [CERTS], ["certificatesigningrequests/selfnodeclient"])]),
    ]


def cluster_role_bindings() -> list[Obj]:
    """policy.go `ClusterRoleBindings`, the part served here."""
    crb = "ClusterRoleBinding"
    return [
        _binding(crb, "cluster-admin", "ClusterRole", "cluster-admin",
                 [_group("system:masters")]),
        _binding(crb, "system:monitoring", "ClusterRole", "system:monitoring",
                 [_group("system:monitoring")]),
        _binding(crb, "system:discovery", "ClusterRole", "system:discovery",
                 [_group(AUTHENTICATED)]),
        _binding(crb, "system:basic-user", "ClusterRole", "system:basic-user",
                 [_group(AUTHENTICATED)]),
        _binding(crb, "system:public-info-viewer", "ClusterRole", "system:public-info-viewer",
                 [_group(AUTHENTICATED), _group(UNAUTHENTICATED)]),
    ]


def kubeadm_roles() -> list[Obj]:
    """The roles ``kubeadm init`` creates that scoctl's bootstrap-token group is bound to
    (configs/kubernetes/bootstrap-bindings.yaml)."""
    def role(name: str, config_map: str) -> Obj:
        return {"apiVersion": f"{RBAC}/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": "kube-system"},
                "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"],
                           "resourceNames": [config_map]}]}

    return [
        {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
         "metadata": {"name": "kubeadm:get-nodes"},
         "rules": [_rule(["get"], [""], ["nodes"])]},
        role("kubeadm:nodes-kubeadm-config", "kubeadm-config"),
        role("kubeadm:kubelet-config", "kubelet-config"),
    ]


def bootstrap_objects() -> list[Obj]:
    """Every object a new simulated cluster starts with, roles before bindings."""
    return [*cluster_roles(), *kubeadm_roles(), *cluster_role_bindings()]
