"""Authentication and RBAC in the emulator, as kube-apiserver applies them, and scoctl's shipped
role (configs/kubernetes/rbac.yaml) measured against what scoctl calls: every call it makes is
allowed, a missing rule is a 403 scoctl reports as an error, and the role grants nothing unused."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core import kube_events as ke_core
from scoctl.core.jointoken import make_token, secret_manifest
from scoctl.errors import PermanentError
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_auth import (
    SCOCTL,
    Attributes,
    User,
    authorize,
    policy_of,
    request_attributes,
    rule_allows,
    shipped_rbac,
)
from scoctl.sim.k8s_emulator import K8sEmulator

REPO = Path(__file__).resolve().parents[2]


def call(emu: K8sEmulator, path: str, token: str | None, method: str = "GET",
         body: Any = None) -> tuple[int, Any]:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{emu.url}{path}", data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10, context=emu.client_context()) as resp:
            text = resp.read()
            return resp.status, json.loads(text.splitlines()[0]) if text else None
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_shipped_role_is_the_packaged_one() -> None:
    """The simulated region seeds `scoctl/data/rbac.yaml`; operators apply
    `configs/kubernetes/rbac.yaml`: one file."""
    packaged = (REPO / "scoctl" / "data" / "rbac.yaml").read_text(encoding="utf-8")
    assert packaged == (REPO / "configs" / "kubernetes" / "rbac.yaml").read_text(encoding="utf-8")
    kinds = sorted(d["kind"] for d in shipped_rbac())
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"]


def test_requests_without_a_known_bearer_token_get_401(k8s_emulator: K8sEmulator) -> None:
    """staging/src/k8s.io/apiserver/pkg/endpoints/filters/authentication.go
    `WithAuthentication` → `Unauthorized`: no authenticator accepted the request (anonymous
    requests are off) → 401 with a Status of reason Unauthorized."""
    for token in (None, "wrong", ""):
        code, body = call(k8s_emulator, "/api/v1/pods", token)
        assert (code, body["kind"], body["reason"], body["message"]) == (
            401, "Status", "Unauthorized", "Unauthorized")
    assert call(k8s_emulator, "/api/v1/pods", ke.ADMIN_TOKEN)[0] == 200
    # the simulator's control API is not the Kubernetes API: no token
    assert call(k8s_emulator, "/_sim/health", None)[0] == 200


def test_a_denied_request_gets_403_with_upstreams_forbidden_status(
        k8s_emulator: K8sEmulator) -> None:
    """plugin/pkg/auth/authorizer/rbac/rbac.go `Authorize` over the shipped role, and the
    403 of staging/src/k8s.io/apiserver/pkg/endpoints/handlers/responsewriters/errors.go
    `ForbiddenStatus` (`forbiddenMessage` + apierrors.NewForbidden)."""
    token = ke.SCOCTL_TOKEN
    user = "system:serviceaccount:kube-system:scoctl"
    code, body = call(k8s_emulator, "/api/v1/namespaces/default/secrets", token)
    assert (code, body["reason"], body["details"]) == (403, "Forbidden",
                                                       {"group": "", "kind": "secrets"})
    assert body["message"] == (f'secrets is forbidden: User "{user}" cannot list resource '
                               '"secrets" in API group "" in the namespace "default"')
    # the Role grants list but not get of the Secrets in kube-system
    assert call(k8s_emulator, "/api/v1/namespaces/kube-system/secrets", token)[0] == 200
    code, body = call(k8s_emulator, "/api/v1/namespaces/kube-system/secrets/x", token)
    assert body["message"] == (f'secrets "x" is forbidden: User "{user}" cannot get resource '
                               '"secrets" in API group "" in the namespace "kube-system"')
    # a subresource is its own resource; a cluster-scoped one says so
    code, body = call(k8s_emulator, "/api/v1/nodes/n1/status", token, "PATCH", {})
    assert body["message"] == (f'nodes "n1" is forbidden: User "{user}" cannot patch resource '
                               '"nodes/status" in API group "" at the cluster scope')
    code, body = call(k8s_emulator, "/apis/apps/v1/namespaces/default/deployments", token,
                      "POST", ke.make_deployment("d"))
    assert body["message"] == (f'deployments.apps is forbidden: User "{user}" cannot create '
                               'resource "deployments" in API group "apps" in the namespace '
                               '"default"')
    # what the role grants, and discovery for every authenticated user
    assert call(k8s_emulator, "/apis/apps/v1/deployments", token)[0] == 200
    k8s_emulator.add(ke.make_pod("p"))
    code, first = call(k8s_emulator, "/api/v1/pods?watch=true&timeoutSeconds=1", token)
    assert (code, first["type"]) == (200, "ADDED")
    assert call(k8s_emulator, "/version", token)[0] == 200
    assert call(k8s_emulator, "/apis", token)[0] == 200


def test_rbac_rules_match_as_upstream() -> None:
    """pkg/apis/rbac/v1/evaluation_helpers.go `RuleAllows` (verbs, apiGroups, resources with
    ``*`` and ``*/subresource``, resourceNames) and rbac.go `appliesToUser` (User, Group,
    ServiceAccount subjects; a RoleBinding grants only in its namespace)."""
    get_pod = request_attributes("GET", "/api/v1/namespaces/a/pods/p", {})
    assert (get_pod.verb, get_pod.resource, get_pod.namespace, get_pod.name) == (
        "get", "pods", "a", "p")
    watch = request_attributes("GET", "/api/v1/pods", {"watch": "true"})
    assert (watch.verb, watch.namespace) == ("watch", "")
    evict = request_attributes("POST", "/api/v1/namespaces/a/pods/p/eviction", {})
    assert (evict.verb, evict.combined_resource) == ("create", "pods/eviction")
    namespace = request_attributes("GET", "/api/v1/namespaces/a", {})
    assert (namespace.resource, namespace.name, namespace.namespace) == ("namespaces", "a", "a")
    assert request_attributes("DELETE", "/api/v1/namespaces/a/pods", {}).verb == \
        "deletecollection"

    assert rule_allows({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
                       Attributes("list", "", True, "", "v1", "pods"))
    assert not rule_allows({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
                           Attributes("watch", "", True, "", "v1", "pods"))
    assert not rule_allows({"verbs": ["create"], "apiGroups": [""], "resources": ["pods"]},
                           evict)
    assert rule_allows({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*/eviction"]}, evict)
    assert not rule_allows({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]},
                           get_pod)
    named = {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["q"]}
    assert not rule_allows(named, get_pod)
    assert rule_allows({**named, "resourceNames": ["p"]}, get_pod)

    role = {"kind": "ClusterRole", "metadata": {"name": "reader"},
            "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}
    local = {"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "a"},
             "roleRef": {"kind": "ClusterRole", "name": "reader"},
             "subjects": [{"kind": "ServiceAccount", "name": "bot"}]}
    policy = policy_of([role, local])
    bot = User("system:serviceaccount:a:bot", ("system:authenticated",))
    assert authorize(policy, bot, get_pod)
    elsewhere = request_attributes("GET", "/api/v1/namespaces/b/pods/p", {})
    assert not authorize(policy, bot, elsewhere)
    group = {"kind": "ClusterRoleBinding", "metadata": {"name": "g"},
             "roleRef": {"kind": "ClusterRole", "name": "reader"},
             "subjects": [{"kind": "Group", "name": "readers"}]}
    assert authorize(policy_of([role, group]), User("u", ("readers",)), elsewhere)
    assert not authorize(policy_of([role, group]), User("u", ()), elsewhere)
    assert authorize(policy_of([]), User("root", ("system:masters",)), elsewhere)


# --- scoctl's role against scoctl's calls --------------------------------------------------------


MANAGED = {"sco/managed": "true"}


def managed(obj: dict[str, Any]) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {}).update(MANAGED)
    return obj


def every_call(emu: K8sEmulator, cluster: KubernetesCluster) -> None:
    """Each call scoctl's Kubernetes adapter makes (`Cluster` and `BootstrapTokens`), the way
    passes, drains, deletes and the join tokens make them."""
    emu.add(ke.make_namespace("shop"))
    emu.add(ke.make_node("n1", labels=MANAGED))
    dep = emu.add(ke.make_deployment("d", "shop", managed=True))
    rs = emu.add(managed(ke.make_replicaset(dep)))
    emu.add_many(ke.pods_for(rs, 2))
    for pod in ke.pods_for(rs, 2, start=2):
        emu.add(pod)
        emu.bind_pod("shop", pod["metadata"]["name"], "n1")
    emu.add(managed(ke.make_job("j", "shop")))
    emu.add(ke.make_inference_service("llm", "shop", managed=True))
    emu.install_crd(ke.PODGROUP_CRD)
    emu.add(ke.make_pod_group("train", "shop", min_member=4))
    emu.add(managed(ke.make_pod("lone", "shop")))
    cluster.nodes()
    cluster.pods()
    cluster.pods("shop")
    cluster.pods_on_node("n1")
    list(cluster.watch_pods(None, 2.5))
    list(cluster.watch_pods(None, 2.5, namespace="shop"))
    list(cluster.watch_nodes(None, 2.5))
    for namespace in (None, "shop"):
        cluster.deployments(namespace)
        cluster.replicasets(namespace)
        cluster.jobs(namespace)
        cluster.resource_quotas(namespace)
        cluster.volume_claims(namespace)
        cluster.events(namespace, reason="FailedScheduling")
        cluster.inference_services(namespace)
        cluster.pod_groups(namespace)
    cluster.volumes()
    cluster.daemonsets()
    cluster.cordon("n1")
    cluster.uncordon("n1")
    cluster.drain("n1", timeout=10)
    cluster.delete_pod("shop", rs["metadata"]["name"] + "-0", grace_seconds=0)
    for kind, name in (("Pod", "lone"), ("Job", "j"), ("InferenceService", "llm"),
                       ("ReplicaSet", rs["metadata"]["name"]), ("Deployment", "d")):
        cluster.delete_managed(kind, "shop", name)  # type: ignore[arg-type]
    cluster.delete_node("n1")
    # scoctl's own Events (services.kube_events): create, the 409 of a restart, get, patch
    event = ke_core.plan_writes([ke_core.Wanted(ke_core.ObjectRef("Pod", "p", "shop", "u"),
                                                "Nominated", "m")], {}, 0.0)[0]
    assert cluster.create_event("shop", event.body)
    assert not cluster.create_event("shop", event.body)
    assert cluster.read_event("shop", event.name) is not None
    assert cluster.patch_event("shop", event.name, {"count": 2})
    token = make_token("abc123", "0123456789abcdef", datetime(2030, 1, 1, tzinfo=UTC))
    cluster.create_bootstrap_token(secret_manifest(token, launch_id="l-1", workload="web"))
    cluster.bootstrap_tokens()
    cluster.delete_bootstrap_token("bootstrap-token-abc123")


def granted(objects: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(verb, group, resource, scope) every rule of the role grants; scope is ``*`` for the
    ClusterRole (bound cluster-wide) and the namespace of a Role."""
    out = set()
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "Role"):
            continue
        scope = obj["metadata"].get("namespace", "*")
        for rule in obj["rules"]:
            for verb in rule["verbs"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        out.add((verb, group, resource, scope))
    return out


def test_the_shipped_role_allows_every_call_scoctl_makes_and_nothing_else(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """Every call of the adapter passes RBAC (rbac.go) under the shipped role, and every
    (verb, group, resource) the role grants was used by one of them: the role is exactly
    what scoctl calls."""
    every_call(k8s_emulator, k8s_cluster)
    used = {(verb, group, resource, ns) for (user, verb, group, resource, ns)
            in k8s_emulator.authorized if user == SCOCTL.name}
    assert {(v, g, r, ns) for v, g, r, ns in used if ns and ns != "kube-system"} <= {
        (v, g, r, ns) for v, g, r, _ in granted(shipped_rbac()) for ns in ("shop", "default")}
    rules = granted(shipped_rbac())
    for verb, group, resource, scope in rules:
        assert any(u[:3] == (verb, group, resource) and (scope == "*" or u[3] == scope)
                   for u in used), f"the role grants {verb} {group}/{resource} unused"
    # the Secrets are touched in kube-system only, through the Role
    assert {ns for v, g, r, ns in used if r == "secrets"} == {"kube-system"}
    # and every rule is needed: without it, one of the calls made is refused (rbac.go
    # `Authorize` over the role minus that rule)
    made = [Attributes(verb, "", True, group, "v1", *(resource.split("/") + [""])[:2], ns)
            for (user, verb, group, resource, ns) in k8s_emulator.authorized
            if user == SCOCTL.name]
    roles = [(i, obj) for i, obj in enumerate(shipped_rbac())
             if obj["kind"] in ("ClusterRole", "Role")]
    assert all(authorize(policy_of(shipped_rbac()), SCOCTL, a) for a in made)
    for i, role in roles:
        for j, rule in enumerate(role["rules"]):
            reduced = shipped_rbac()
            del reduced[i]["rules"][j]
            refused = [a for a in made if not authorize(policy_of(reduced), SCOCTL, a)]
            assert refused, f"{role['metadata']['name']} rule {rule} is unused"


@pytest.fixture
def lacking_eviction(tmp_path: Path) -> Iterator[tuple[K8sEmulator, KubernetesCluster]]:
    objects = shipped_rbac()
    for obj in objects:
        if obj["kind"] == "ClusterRole":
            obj["rules"] = [r for r in obj["rules"] if r["resources"] != ["pods/eviction"]]
    emu = K8sEmulator(grace_scale=0.02)
    emu.add_many(objects)
    emu.start()
    path = tmp_path / "kubeconfig"
    path.write_text(emu.kubeconfig(), encoding="utf-8")
    cluster = KubernetesCluster(str(path), "scoctl-sim")
    try:
        yield emu, cluster
    finally:
        cluster.close()
        emu.stop()


def test_a_role_without_a_rule_scoctl_needs_is_a_403_that_scoctl_reports_as_an_error(
        lacking_eviction: tuple[K8sEmulator, KubernetesCluster]) -> None:
    """The shipped role minus ``pods/eviction create``: the drain's eviction gets the 403 of
    rbac.go + ForbiddenStatus, and scoctl raises it as a PermanentError naming the refusal
    (design: 401/403 are permanent), never a crash; the reads still work."""
    emu, cluster = lacking_eviction
    emu.add(ke.make_node("n1", labels=MANAGED))
    emu.add(ke.make_pod("p", "default"))
    emu.bind_pod("default", "p", "n1")
    with pytest.raises(PermanentError) as refused:
        cluster.drain("n1", timeout=5)
    assert "403" in str(refused.value)
    assert ('cannot create resource "pods/eviction" in API group "" in the namespace '
            '"default"') in str(refused.value)
    assert [p.name for p in cluster.pods_on_node("n1")] == ["p"]
