"""Workloads created through the API, driven by the real `kubernetes` client against the
Kubernetes emulator while the node agent (in this process, its own `SimApi` over HTTP) runs the
controllers: Deployments get ReplicaSets and pods, roll out within maxSurge/maxUnavailable,
scale through the ``scale`` subresource, report the status `kubectl rollout status` reads, are
garbage-collected with graceful pod termination, and ReplicaSets refused by a ResourceQuota
report ``ReplicaFailure``. Each test names the upstream file or function it follows
(kubernetes/kubernetes)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scoctl.sim import agent
from scoctl.sim.k8s_auth import ADMIN
from scoctl.sim.k8s_emulator import (
    K8sEmulator,
    make_deployment,
    make_namespace,
    make_node,
    make_resource_quota,
)
from scoctl.sim.nova_emulator import NovaEmulator

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


class Region:
    """Both emulators, a node agent stepped by the test, and the test's own API clients."""

    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        from kubernetes import client, config

        # terminating pods go after a hundredth of their grace period (0.3 s for 30 s)
        self.k8s = K8sEmulator(grace_scale=0.01).start()
        self.nova = NovaEmulator().start()
        self.worker = agent.Agent({"k8s_url": self.k8s.url, "nova_url": self.nova.url,
                                   **settings},
                                  agent.SimApi(self.k8s.url, self.nova.url,
                                               k8s_ca=self.k8s.client_context()))
        path = tmp_path / "kubeconfig"
        path.write_text(self.k8s.kubeconfig(user=ADMIN), encoding="utf-8")
        api = config.new_client_from_config(str(path))
        self.core = client.CoreV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.k8s.add(make_namespace("shop"))

    def close(self) -> None:
        self.worker.api.close()
        self.k8s.stop()
        self.nova.stop()

    def settle(self, done: Callable[[], bool], steps: int = 40, *,
               each: Callable[[], None] | None = None) -> None:
        """Step the agent until `done` (calling `each` after every step)."""
        import time

        for _ in range(steps):
            self.worker.step()
            if each is not None:
                each()
            if done():
                return
            time.sleep(0.05)
        raise AssertionError("the region did not settle")

    def pods(self) -> list[dict[str, Any]]:
        return self.k8s.objects("Pod", "shop")

    def deployment(self, name: str) -> dict[str, Any]:
        return self.k8s.get("Deployment", "shop", name)


@pytest.fixture
def region(tmp_path: Path) -> Iterator[Region]:
    r = Region(tmp_path)
    try:
        yield r
    finally:
        r.close()


def rollout_status(dep: dict[str, Any]) -> tuple[str, bool]:
    """kubectl's `DeploymentStatusViewer.Status` (staging/src/k8s.io/kubectl/pkg/
    polymorphichelpers/rollout_status.go), line for line, over the stored Deployment."""
    name, status = dep["metadata"]["name"], dep.get("status") or {}
    if dep["metadata"].get("generation", 0) > status.get("observedGeneration", 0):
        return "Waiting for deployment spec update to be observed...", False
    replicas = dep["spec"].get("replicas", 1)
    updated, total = status.get("updatedReplicas", 0), status.get("replicas", 0)
    if updated < replicas:
        return (f'Waiting for deployment "{name}" rollout to finish: {updated} out of '
                f"{replicas} new replicas have been updated...", False)
    if total > updated:
        return (f'Waiting for deployment "{name}" rollout to finish: {total - updated} old '
                "replicas are pending termination...", False)
    if status.get("availableReplicas", 0) < updated:
        return "available", False
    return f'deployment "{name}" successfully rolled out', True


def create_web(region: Region, replicas: int, **spec: Any) -> dict[str, Any]:
    body = make_deployment("web", "shop", replicas=replicas, cpu="1", memory="1Gi")
    body.pop("status")
    body["spec"].update(spec)
    return region.apps.create_namespaced_deployment("shop", body).to_dict()


def owned_replicasets(region: Region) -> list[dict[str, Any]]:
    return sorted(region.k8s.objects("ReplicaSet", "shop"),
                  key=lambda rs: rs["metadata"]["creationTimestamp"] + rs["metadata"]["name"])


def test_a_deployment_made_through_the_api_gets_a_replicaset_its_pods_and_a_true_status(
        region: Region) -> None:
    """pkg/controller/deployment/sync.go `getNewReplicaSet` (``<name>-<pod-template-hash>``,
    the hash label on selector and template, revision annotation 1, owned by the Deployment),
    pkg/controller/replicaset/replica_set.go `manageReplicas` (its pods), sync.go
    `calculateStatus` and progress.go `syncRolloutStatus` (Available/MinimumReplicasAvailable,
    Progressing/NewReplicaSetAvailable once complete)."""
    region.k8s.add(make_node("n1", cpu="8", memory="32Gi"))
    create_web(region, 2)
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    [rs] = region.k8s.objects("ReplicaSet", "shop")
    digest = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{digest}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": digest}
    assert rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs["metadata"]["ownerReferences"][0]["kind"] == "Deployment"
    pods = region.pods()
    assert len(pods) == 2 and all(p["metadata"]["labels"]["pod-template-hash"] == digest
                                  and p["status"]["phase"] == "Running" for p in pods)
    dep = region.deployment("web")
    status = dep["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"],
            status["availableReplicas"]) == (2, 2, 2, 2)
    assert status["observedGeneration"] == dep["metadata"]["generation"]
    conditions = {c["type"]: c["reason"] for c in status["conditions"]}
    assert conditions == {"Available": "MinimumReplicasAvailable",
                          "Progressing": "NewReplicaSetAvailable"}
    assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


def test_rollout_restart_rolls_every_pod_within_max_surge_and_max_unavailable(
        region: Region) -> None:
    """pkg/controller/deployment/rolling.go `rolloutRolling` (`reconcileNewReplicaSet` with
    util `NewRSNewReplicas`, `reconcileOldReplicaSets`), what `kubectl rollout restart` starts
    by setting ``kubectl.kubernetes.io/restartedAt`` on the template: with maxSurge 1 and
    maxUnavailable 0, never more than replicas + 1 pods and never fewer than replicas
    available; the new ReplicaSet is revision 2; `rollout status` waits until it is done."""
    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 3, strategy={"type": "RollingUpdate",
                                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    region.apps.patch_namespaced_deployment("web", "shop", {"spec": {"template": {"metadata": {
        "annotations": {RESTARTED_AT: "2026-12-07T02:00:00Z"}}}}})
    assert rollout_status(region.deployment("web")) == (
        "Waiting for deployment spec update to be observed...", False)
    seen: list[tuple[int, int]] = []
    messages: list[str] = []

    def check() -> None:
        pods = [p for p in region.pods() if not p["metadata"].get("deletionTimestamp")]
        ready = [p for p in pods if agent.is_running(p)]
        seen.append((len(pods), len(ready)))
        messages.append(rollout_status(region.deployment("web"))[0])

    region.settle(lambda: rollout_status(region.deployment("web"))[1]
                  and len(region.pods()) == 3, each=check)
    assert max(total for total, _ in seen) <= 4  # replicas + maxSurge
    assert min(ready for _, ready in seen) >= 3  # replicas − maxUnavailable
    assert any("new replicas have been updated" in m or "pending termination" in m
               for m in messages)
    old, new = owned_replicasets(region)
    assert new["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (0, 3)
    assert all(p["metadata"]["annotations"][RESTARTED_AT] == "2026-12-07T02:00:00Z"
               for p in region.pods())
    progressing = next(c for c in region.deployment("web")["status"]["conditions"]
                       if c["type"] == "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"
    assert progressing["message"] == (f'ReplicaSet "{new["metadata"]["name"]}" has '
                                      "successfully progressed.")


def test_old_replicasets_beyond_the_revision_history_limit_are_deleted(region: Region) -> None:
    """pkg/controller/deployment/sync.go `cleanupDeployment`: old ReplicaSets with no replicas
    beyond ``revisionHistoryLimit`` go, the oldest revisions first."""
    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 1, revisionHistoryLimit=1)
    for stamp in ("2026-12-07T02:00:00Z", "2026-12-07T02:01:00Z", "2026-12-07T02:02:00Z"):
        region.settle(lambda: rollout_status(region.deployment("web"))[1]
                      and len(region.pods()) == 1)
        region.apps.patch_namespaced_deployment("web", "shop", {"spec": {"template": {
            "metadata": {"annotations": {RESTARTED_AT: stamp}}}}})
    region.settle(lambda: rollout_status(region.deployment("web"))[1]
                  and len(region.k8s.objects("ReplicaSet", "shop")) == 2)
    revisions = sorted(rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]
                       for rs in region.k8s.objects("ReplicaSet", "shop"))
    assert revisions == ["3", "4"]


def test_the_scale_subresource_scales_a_deployment_up_and_down(region: Region) -> None:
    """pkg/registry/apps/deployment/storage/storage.go `ScaleREST` (autoscaling/v1 Scale, what
    `kubectl scale` reads and patches), then replica_set.go `manageReplicas`: new pods, then
    the surplus deleted gracefully (Terminating first, `getPodsToDelete`)."""
    from kubernetes.client.exceptions import ApiException

    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 1)
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    scale = region.apps.read_namespaced_deployment_scale("web", "shop")
    assert (scale.kind, scale.spec.replicas, scale.status.replicas) == ("Scale", 1, 1)
    assert scale.status.selector == "app=web"
    region.apps.patch_namespaced_deployment_scale("web", "shop", {"spec": {"replicas": 3}})
    region.settle(lambda: len(region.pods()) == 3
                  and rollout_status(region.deployment("web"))[1])
    assert region.apps.read_namespaced_deployment_scale("web", "shop").status.replicas == 3
    with pytest.raises(ApiException) as invalid:
        region.apps.patch_namespaced_deployment_scale("web", "shop",
                                                      {"spec": {"replicas": -1}})
    assert invalid.value.status == 422
    [rs] = region.k8s.objects("ReplicaSet", "shop")
    rs_scale = region.apps.read_namespaced_replica_set_scale(rs["metadata"]["name"], "shop")
    assert rs_scale.spec.replicas == 3
    region.apps.patch_namespaced_deployment_scale("web", "shop", {"spec": {"replicas": 1}})
    terminating: list[int] = []
    region.settle(lambda: len(region.pods()) == 1, each=lambda: terminating.append(
        sum(1 for p in region.pods() if p["metadata"].get("deletionTimestamp"))))
    assert max(terminating) == 2  # the two surplus pods were Terminating before they went


def test_deleting_a_deployment_leaves_its_pods_terminating_before_they_go(
        region: Region) -> None:
    """pkg/controller/garbagecollector/garbage_collector.go `attemptToDeleteItem` with the
    default Background propagation: the Deployment and its ReplicaSet go at once, their pods
    are deleted gracefully (``deletionTimestamp`` + ``deletionGracePeriodSeconds``) and go
    only once the kubelet confirms (pkg/registry/core/pod/strategy.go
    `CheckGracefulDelete`)."""
    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 2)
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    region.apps.delete_namespaced_deployment("web", "shop")
    assert region.k8s.objects("Deployment", "shop") == []
    assert region.k8s.objects("ReplicaSet", "shop") == []
    pods = region.pods()
    assert len(pods) == 2
    assert all(p["metadata"]["deletionTimestamp"]
               and p["metadata"]["deletionGracePeriodSeconds"] == 30 for p in pods)
    region.settle(lambda: region.pods() == [])


def test_foreground_deletion_keeps_the_deployment_until_its_pods_are_gone(
        region: Region) -> None:
    """garbage_collector.go `processDeletingDependentsItem` and the registry's
    `updateForGracefulDeletionAndFinalizers` (``propagationPolicy: Foreground``, what
    ``kubectl delete --cascade=foreground`` sends): the Deployment stays with
    ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer, its ReplicaSet likewise,
    while the pods terminate; then both go."""
    import time

    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 2)
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    region.apps.delete_namespaced_deployment("web", "shop", propagation_policy="Foreground")
    dep = region.deployment("web")
    assert dep["metadata"]["deletionTimestamp"]
    assert dep["metadata"]["finalizers"] == ["foregroundDeletion"]
    [rs] = region.k8s.objects("ReplicaSet", "shop")
    assert rs["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert all(p["metadata"].get("deletionTimestamp") for p in region.pods())
    for _ in range(100):
        if not region.k8s.objects("Deployment", "shop"):
            break
        time.sleep(0.05)
    assert region.pods() == []
    assert region.k8s.objects("ReplicaSet", "shop") == []
    assert region.k8s.objects("Deployment", "shop") == []


def test_orphan_deletion_leaves_the_replicaset_and_pods_without_their_owner(
        region: Region) -> None:
    """garbage_collector.go `orphanDependents` (``propagationPolicy: Orphan``): the
    dependents stay, their ownerReferences to the deleted owner removed."""
    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    create_web(region, 1)
    region.settle(lambda: rollout_status(region.deployment("web"))[1])
    region.apps.delete_namespaced_deployment("web", "shop", propagation_policy="Orphan")
    [rs] = region.k8s.objects("ReplicaSet", "shop")
    assert "ownerReferences" not in rs["metadata"]
    assert len(region.pods()) == 1 and not region.pods()[0]["metadata"].get("deletionTimestamp")


def test_a_replicaset_refused_by_the_namespace_quota_reports_replica_failure(
        region: Region) -> None:
    """staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go
    `checkRequest` (403 ``exceeded quota: …, requested: …, used: …, limited: …``),
    pkg/controller/replicaset/replica_set_utils.go `calculateStatus`
    (``ReplicaFailure=True/FailedCreate`` with the error) and the Deployment controller's
    `syncRolloutStatus` copying it to the Deployment."""
    from kubernetes.client.exceptions import ApiException

    region.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
    region.k8s.add(make_resource_quota("compute", "shop", {"requests.cpu": "1"}))
    create_web(region, 2)

    def failing() -> bool:
        conditions = region.deployment("web")["status"].get("conditions") or []
        return any(c["type"] == "ReplicaFailure" for c in conditions)

    region.settle(failing)
    [rs] = region.k8s.objects("ReplicaSet", "shop")
    failure = next(c for c in rs["status"]["conditions"] if c["type"] == "ReplicaFailure")
    assert failure["reason"] == "FailedCreate"
    assert "is forbidden: exceeded quota: compute, requested: requests.cpu=1, used: " \
           "requests.cpu=1, limited: requests.cpu=1" in failure["message"]
    assert len(region.pods()) == 1
    with pytest.raises(ApiException) as refused:  # the same admission on the API
        pod = region.pods()[0]
        region.core.create_namespaced_pod("shop", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "extra"},
            "spec": pod["spec"] | {"nodeName": None}})
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"].startswith(
        'pods "extra" is forbidden: exceeded quota: compute')
