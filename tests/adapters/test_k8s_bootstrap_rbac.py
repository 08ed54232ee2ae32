"""configs/kubernetes/bootstrap-bindings.yaml gives scoctl's bootstrap-token group exactly what a
kubeadm cluster gives its own (``system:bootstrappers:kubeadm:default-node-token``), so that a
node scoctl launched can ``kubeadm join`` with its per-launch token (design: Operating)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from scoctl.sim.k8s_auth import User, authorize, policy_of, request_attributes
from scoctl.sim.k8s_emulator import K8sEmulator

REPO = Path(__file__).resolve().parents[2]
KUBEADM_GROUP = "system:bootstrappers:kubeadm:default-node-token"
SCOCTL_GROUP = "system:bootstrappers:scoctl"
CERTS = "certificates.k8s.io"


def role(kind: str, name: str, rules: list[dict[str, Any]], ns: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "rules": rules}


def binding(kind: str, name: str, ref_kind: str, ref: str, group: str,
            ns: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                          "name": group}]}


# The roles a kubeadm cluster has, as upstream defines them:
# plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go `ClusterRoles`
# (system:node-bootstrapper: create/get/list/watch certificatesigningrequests;
# system:certificates.k8s.io:certificatesigningrequests:nodeclient: create
# certificatesigningrequests/nodeclient); cmd/kubeadm/app/phases/bootstraptoken/node/
# tlsbootstrap.go `AllowBootstrapTokensToGetNodes` (kubeadm:get-nodes: get nodes);
# cmd/kubeadm/app/phases/uploadconfig/uploadconfig.go (kubeadm:nodes-kubeadm-config: get the
# kubeadm-config ConfigMap) and phases/kubelet/config.go `createConfigMapRBACRules`
# (kubeadm:kubelet-config: get the kubelet-config ConfigMap), both in kube-system.
KUBEADM_ROLES = [
    role("ClusterRole", "system:node-bootstrapper", [
        {"apiGroups": [CERTS], "resources": ["certificatesigningrequests"],
         "verbs": ["create", "get", "list", "watch"]}]),
    role("ClusterRole", "system:certificates.k8s.io:certificatesigningrequests:nodeclient", [
        {"apiGroups": [CERTS], "resources": ["certificatesigningrequests/nodeclient"],
         "verbs": ["create"]}]),
    role("ClusterRole", "kubeadm:get-nodes", [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]),
    role("Role", "kubeadm:nodes-kubeadm-config", [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubeadm-config"],
         "verbs": ["get"]}], "kube-system"),
    role("Role", "kubeadm:kubelet-config", [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["kubelet-config"],
         "verbs": ["get"]}], "kube-system"),
]
# kubeadm's own bindings of its default node-token group (tlsbootstrap.go
# `AllowBootstrapTokensToPostCSRs` kubeadm:kubelet-bootstrap, `AutoApproveNodeBootstrapTokens`
# kubeadm:node-autoapprove-bootstrap, `AllowBootstrapTokensToGetNodes` kubeadm:get-nodes; the
# two RoleBindings of the ConfigMaps)
KUBEADM_BINDINGS = [
    binding("ClusterRoleBinding", "kubeadm:kubelet-bootstrap", "ClusterRole",
            "system:node-bootstrapper", KUBEADM_GROUP),
    binding("ClusterRoleBinding", "kubeadm:node-autoapprove-bootstrap", "ClusterRole",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient", KUBEADM_GROUP),
    binding("ClusterRoleBinding", "kubeadm:get-nodes", "ClusterRole", "kubeadm:get-nodes",
            KUBEADM_GROUP),
    binding("RoleBinding", "kubeadm:nodes-kubeadm-config", "Role",
            "kubeadm:nodes-kubeadm-config", KUBEADM_GROUP, "kube-system"),
    binding("RoleBinding", "kubeadm:kubelet-config", "Role", "kubeadm:kubelet-config",
            KUBEADM_GROUP, "kube-system"),
]

# what `kubeadm join` and the kubelet's TLS bootstrap call with the token, and neighbours
JOIN_CALLS = [
    ("POST", f"/apis/{CERTS}/v1/certificatesigningrequests"),
    ("GET", f"/apis/{CERTS}/v1/certificatesigningrequests/csr-1"),
    ("GET", f"/apis/{CERTS}/v1/certificatesigningrequests"),
    ("POST", f"/apis/{CERTS}/v1/certificatesigningrequests/csr-1/nodeclient"),
    ("GET", "/api/v1/nodes/node-1"),
    ("GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config"),
    ("GET", "/api/v1/namespaces/kube-system/configmaps/kubelet-config"),
]
REFUSED_CALLS = [
    ("GET", "/api/v1/nodes"),
    ("PATCH", "/api/v1/nodes/node-1"),
    ("DELETE", f"/apis/{CERTS}/v1/certificatesigningrequests/csr-1"),
    ("PUT", f"/apis/{CERTS}/v1/certificatesigningrequests/csr-1/approval"),
    ("GET", "/api/v1/namespaces/kube-system/configmaps/kube-proxy"),
    ("GET", "/api/v1/namespaces/default/configmaps/kubeadm-config"),
    ("GET", "/api/v1/namespaces/kube-system/secrets/bootstrap-token-abcdef"),
    ("GET", "/api/v1/pods"),
]


def shipped() -> list[dict[str, Any]]:
    text = (REPO / "configs" / "kubernetes" / "bootstrap-bindings.yaml").read_text("utf-8")
    return [dict(d) for d in yaml.safe_load_all(text) if d]


def test_the_bindings_load_into_the_api_and_bind_only_the_token_group() -> None:
    """The file is valid RBAC the (emulated) apiserver stores as given: ClusterRoleBindings and
    RoleBindings in kube-system, each naming an existing kubeadm role and the one group. The
    roles are there before it, with upstream's rules, as in a new kubeadm cluster (the
    emulator's bootstrap RBAC, `k8s_rbac_bootstrap`)."""
    emu = K8sEmulator()
    for want in KUBEADM_ROLES:
        meta = want["metadata"]
        assert emu.get(want["kind"], meta.get("namespace"), meta["name"])["rules"] == want["rules"]
    stored = [emu.add(obj) for obj in shipped()]
    bindings = [o for o in stored if o["kind"].endswith("Binding")]
    assert len(bindings) == len(KUBEADM_BINDINGS) == 5
    names = {(r["kind"], r["metadata"]["name"]) for r in KUBEADM_ROLES}
    for b in bindings:
        assert (b["roleRef"]["kind"], b["roleRef"]["name"]) in names
        assert b["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                  "name": SCOCTL_GROUP}]
        if b["kind"] == "RoleBinding":
            assert b["metadata"]["namespace"] == "kube-system"
    assert sorted((b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings) == sorted(
        (b["roleRef"]["kind"], b["roleRef"]["name"]) for b in KUBEADM_BINDINGS)


def test_the_token_group_may_join_exactly_as_kubeadms_default_node_token_group() -> None:
    """rbac.go `Authorize` over kubeadm's roles and both groups' bindings: a bootstrap token of
    scoctl's group (``system:bootstrap:<id>`` in ``system:bootstrappers:scoctl``, as
    plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go authenticates it) may post and
    read its CSR, have it auto-approved (nodeclient), get its Node and read the kubeadm and
    kubelet ConfigMaps — the same answers as kubeadm's own token, and nothing more."""
    policy = policy_of([*KUBEADM_ROLES, *KUBEADM_BINDINGS, *shipped()])
    ours = User("system:bootstrap:abc123", ("system:bootstrappers", SCOCTL_GROUP,
                                            "system:authenticated"))
    kubeadms = User("system:bootstrap:def456", ("system:bootstrappers", KUBEADM_GROUP,
                                                "system:authenticated"))
    other = User("system:bootstrap:0a1b2c", ("system:bootstrappers", "system:authenticated"))
    for method, path in JOIN_CALLS + REFUSED_CALLS:
        attrs = request_attributes(method, path, {})
        want = (method, path) in JOIN_CALLS
        assert authorize(policy, ours, attrs) is want, (method, path)
        assert authorize(policy, kubeadms, attrs) is want, (method, path)
        assert not authorize(policy, other, attrs), (method, path)
    # without the file, scoctl's tokens could not join
    bare = policy_of([*KUBEADM_ROLES, *KUBEADM_BINDINGS])
    assert not any(authorize(bare, ours, request_attributes(m, p, {})) for m, p in JOIN_CALLS)
