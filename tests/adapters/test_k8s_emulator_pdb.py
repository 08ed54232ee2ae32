"""The Kubernetes emulator's PodDisruptionBudgets, through the real client: a disruption-controller
step writes each budget's status, and the Eviction API judges from that status (scoctl's adapter
`evict` and the official `PolicyV1Api`). Each test names the upstream rule it follows
(kubernetes/kubernetes)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.errors import ApiError, TemporaryError
from scoctl.sim import k8s_controllers as kc
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from tests.fixtures.k8s import with_scoctl_role

pytestmark = pytest.mark.k8s

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def k8s_emulator() -> Iterator[K8sEmulator]:
    """The emulator whose disruption controller syncs only when the test says so
    (`sync_disruption`), so that what an eviction sees is exact (the fixtures built on it
    follow)."""
    emulator = with_scoctl_role(K8sEmulator(grace_scale=0.02, disruption_delay=None)).start()
    try:
        yield emulator
    finally:
        emulator.stop()


def running_pods(emu: K8sEmulator, replicas: int = 3) -> tuple[dict[str, Any], list[str]]:
    dep = emu.add(ke.make_deployment("web", "shop", replicas=replicas))
    rs = emu.add(ke.make_replicaset(dep))
    emu.add(ke.make_node("n1"))
    names = []
    for pod in ke.pods_for(rs, replicas):
        emu.add(pod)
        emu.bind_pod("shop", pod["metadata"]["name"], "n1")
        names.append(pod["metadata"]["name"])
    return rs, names


def refusal(k8s_api: Any, name: str) -> tuple[int, str | None, str]:
    """Evict through the official client; the refusal's code, Retry-After and the message of
    its ``DisruptionBudget`` cause."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CoreV1Api(k8s_api).create_namespaced_pod_eviction(
            name, "shop", {"apiVersion": "policy/v1", "kind": "Eviction",
                           "metadata": {"name": name, "namespace": "shop"}})
    except ApiException as exc:
        body = json.loads(exc.body)
        [cause] = body["details"]["causes"]
        assert cause["reason"] == "DisruptionBudget"
        return int(exc.status), exc.headers.get("Retry-After"), str(cause["message"])
    raise AssertionError(f"the eviction of {name} was not refused")


def status(emu: K8sEmulator, name: str = "web") -> dict[str, Any]:
    found: dict[str, Any] = emu.get("PodDisruptionBudget", "shop", name)["status"]
    return found


def test_a_new_budget_is_still_being_processed_until_the_controller_syncs_it(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, k8s_api: Any) -> None:
    """pkg/registry/core/pod/storage/eviction.go `checkAndDecrement`: while
    ``status.observedGeneration < generation`` the eviction is refused by
    `createTooManyRequestsError` (429, Retry-After 10, "The disruption budget web is still
    being processed by the server."); pkg/controller/disruption/disruption.go `updatePdbStatus`
    then writes currentHealthy / desiredHealthy / expectedPods / disruptionsAllowed /
    observedGeneration; a spec change bumps the generation and the budget is stale again."""
    from kubernetes import client

    _, names = running_pods(k8s_emulator)
    policy = client.PolicyV1Api(k8s_api)
    policy.create_namespaced_pod_disruption_budget(
        "shop", ke.make_pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1))
    assert refusal(k8s_api, names[0]) == (
        429, "10", "The disruption budget web is still being processed by the server.")
    with pytest.raises(TemporaryError) as mapped:  # scoctl's adapter keeps the hint
        k8s_cluster.evict("shop", names[0])
    assert mapped.value.delay == 10.0

    assert k8s_emulator.sync_disruption() == 1
    pdb = policy.read_namespaced_pod_disruption_budget("web", "shop")
    assert (pdb.status.current_healthy, pdb.status.desired_healthy, pdb.status.expected_pods,
            pdb.status.disruptions_allowed, pdb.status.observed_generation,
            pdb.metadata.generation) == (3, 2, 3, 1, 1, 1)
    [cond] = pdb.status.conditions
    assert (cond.type, cond.status, cond.reason) == ("DisruptionAllowed", "True",
                                                     "SufficientPods")
    assert k8s_cluster.evict("shop", names[0]) is True
    spent = status(k8s_emulator)  # checkAndDecrement wrote it, before any sync
    assert spent["disruptionsAllowed"] == 0 and list(spent["disruptedPods"]) == [names[0]]
    assert spent["conditions"][0]["reason"] == "InsufficientPods"
    # the status is not re-synced yet: 3 healthy still, but nothing left; no Retry-After
    assert refusal(k8s_api, names[1]) == (
        429, None, "The disruption budget web needs 2 healthy pods and has 3 currently")
    with pytest.raises(TemporaryError, match="disruption budget") as held:
        k8s_cluster.evict("shop", names[1])
    assert held.value.delay is None

    policy.patch_namespaced_pod_disruption_budget("web", "shop",
                                                  {"spec": {"maxUnavailable": 2}})
    assert k8s_emulator.get("PodDisruptionBudget", "shop", "web")["metadata"][
        "generation"] == 2
    assert refusal(k8s_api, names[1])[:2] == (429, "10")  # stale again
    k8s_emulator.sync_disruption()
    assert status(k8s_emulator)["currentHealthy"] == 2  # the evicted pod is Terminating
    assert k8s_cluster.evict("shop", names[1]) is True


def test_the_controller_step_follows_pod_changes_on_its_own() -> None:
    """pkg/controller/disruption/disruption.go `addPod` / `updatePod` / `deletePod` enqueue the
    pod's budget and the worker syncs it: the emulator's controller step runs
    `disruption_delay` after a change, without being asked."""
    with K8sEmulator(disruption_delay=0.05) as emu:
        _, names = running_pods(emu)
        emu.add(ke.make_pdb("web", "shop", match_labels={"app": "web"}, min_available=2))
        deadline = time.monotonic() + 5
        while status(emu).get("observedGeneration") != 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert status(emu)["disruptionsAllowed"] == 1
        emu.delete("Pod", "shop", names[0])
        while status(emu)["currentHealthy"] != 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (status(emu)["currentHealthy"], status(emu)["disruptionsAllowed"]) == (2, 0)


def test_max_unavailable_1_allows_one_eviction_until_the_pod_is_back(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, k8s_api: Any) -> None:
    """pkg/controller/disruption/disruption.go `countHealthyPods`: a Terminating pod and a pod
    in ``disruptedPods`` are not healthy; the ReplicaSet's new pod counts once Ready."""
    from kubernetes import client

    rs, names = running_pods(k8s_emulator)
    client.PolicyV1Api(k8s_api).create_namespaced_pod_disruption_budget(
        "shop", ke.make_pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1))
    k8s_emulator.sync_disruption()
    assert k8s_cluster.evict("shop", names[0]) is True
    k8s_emulator.sync_disruption()
    assert "disruptedPods" not in status(k8s_emulator)  # Terminating now: dropped from the map
    with pytest.raises(TemporaryError, match="disruption budget"):
        k8s_cluster.evict("shop", names[1])
    [fresh] = ke.pods_for(rs, 1, start=7)
    k8s_emulator.add(fresh)  # pending: no room yet
    k8s_emulator.sync_disruption()
    with pytest.raises(TemporaryError):
        k8s_cluster.evict("shop", names[1])
    k8s_emulator.bind_pod("shop", fresh["metadata"]["name"], "n1")
    k8s_emulator.sync_disruption()
    assert k8s_cluster.evict("shop", names[1]) is True


def test_unready_pods_follow_the_unhealthy_pod_eviction_policy(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, k8s_api: Any) -> None:
    """pkg/registry/core/pod/storage/eviction.go `Create`: a pod that is not Ready goes without
    spending the budget under ``unhealthyPodEvictionPolicy: AlwaysAllow``, and under
    ``IfHealthyBudget`` (the default) only while currentHealthy ≥ desiredHealthy > 0; else
    `checkAndDecrement` decides (0 allowed: 429)."""
    _, names = running_pods(k8s_emulator, replicas=3)

    def unready(name: str) -> None:
        def change(pod: dict[str, Any]) -> None:
            pod["status"]["conditions"] = [c for c in pod["status"]["conditions"]
                                           if c["type"] != "Ready"] + [
                {"type": "Ready", "status": "False"}]
        k8s_emulator.update("Pod", "shop", name, change)

    unready(names[0])
    unready(names[1])
    k8s_emulator.add(ke.make_pdb("web", "shop", match_labels={"app": "web"}, min_available=2))
    k8s_emulator.sync_disruption()
    assert (status(k8s_emulator)["currentHealthy"], status(k8s_emulator)["desiredHealthy"]) == (
        1, 2)
    # the application is disrupted already: the unready pod is kept
    assert refusal(k8s_api, names[0])[2].endswith("needs 2 healthy pods and has 1 currently")
    k8s_emulator.update("PodDisruptionBudget", "shop", "web",
                        {"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}})
    k8s_emulator.sync_disruption()
    assert k8s_cluster.evict("shop", names[0]) is True
    assert status(k8s_emulator)["disruptionsAllowed"] == 0  # nothing spent
    with pytest.raises(TemporaryError):
        k8s_cluster.evict("shop", names[2])  # the Ready one is still guarded
    with pytest.raises(ke.StatusError, match="unhealthyPodEvictionPolicy"):
        k8s_emulator.update("PodDisruptionBudget", "shop", "web",
                            {"spec": {"unhealthyPodEvictionPolicy": "Sometimes"}})


def test_pending_terminal_and_terminating_pods_go_without_asking_the_budget(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """pkg/registry/core/pod/storage/eviction.go `canIgnorePDB`: a Succeeded, Failed or Pending
    pod, or one with a deletionTimestamp, is deleted without checking any budget, even one
    that allows nothing."""
    rs, names = running_pods(k8s_emulator, replicas=2)
    k8s_emulator.add(ke.make_pdb("web", "shop", match_labels={"app": "web"}, min_available=9))
    k8s_emulator.sync_disruption()
    assert status(k8s_emulator)["disruptionsAllowed"] == 0
    pending, done = ke.pods_for(rs, 2, start=5)
    k8s_emulator.add(pending)
    done["status"] = {"phase": "Succeeded"}
    k8s_emulator.add(done)
    assert k8s_cluster.evict("shop", pending["metadata"]["name"]) is True
    assert k8s_cluster.evict("shop", done["metadata"]["name"]) is True
    with pytest.raises(TemporaryError):
        k8s_cluster.evict("shop", names[0])
    k8s_cluster.delete_pod("shop", names[0])  # Terminating now
    assert k8s_cluster.evict("shop", names[0]) is True


def test_expected_pods_come_from_the_owning_deployment(k8s_emulator: K8sEmulator) -> None:
    """pkg/controller/disruption/disruption.go `getExpectedScale` with `getPodDeployment`: a pod
    of a ReplicaSet a Deployment controls counts the Deployment's ``spec.replicas``, once for
    all its ReplicaSets (mid-rollout); a percentage is rounded up
    (`GetScaledValueFromIntOrPercent`, roundUp)."""
    rs, names = running_pods(k8s_emulator, replicas=3)
    dep = k8s_emulator.get("Deployment", "shop", "web")
    old = ke.make_replicaset(dep, template_hash="0ld0ld0ld")
    old["spec"]["replicas"] = 5  # the old ReplicaSet's own count is not the budget's
    old = k8s_emulator.add(old)
    [leftover] = ke.pods_for(old, 1, start=20)
    k8s_emulator.add(leftover)
    k8s_emulator.bind_pod("shop", leftover["metadata"]["name"], "n1")
    k8s_emulator.update("Deployment", "shop", "web", {"spec": {"replicas": 4}})
    k8s_emulator.add(ke.make_pdb("web", "shop", match_labels={"app": "web"},
                                 max_unavailable="30%"))
    k8s_emulator.sync_disruption()
    got = status(k8s_emulator)
    assert (got["expectedPods"], got["desiredHealthy"], got["currentHealthy"],
            got["disruptionsAllowed"]) == (4, 2, 4, 2)  # 30% of 4 rounds up to 2


def test_bare_pods_and_job_pods_under_max_unavailable_allow_nothing(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, k8s_api: Any) -> None:
    """pkg/controller/disruption/disruption.go: pods without a controller are left out of
    `getExpectedScale`, so a ``maxUnavailable`` budget over bare pods expects 0 and
    `updatePdbStatus` allows 0; a Job has no scale subresource (`getScaleController`), so
    `trySync` fails and `failSafe` writes disruptionsAllowed 0 with
    ``DisruptionAllowed=False/SyncFailed`` (observedGeneration not advanced: still being
    processed). An integer ``minAvailable`` counts the pods themselves."""
    k8s_emulator.add(ke.make_node("n1"))
    for i in range(2):
        k8s_emulator.add(ke.make_pod(f"bare-{i}", "shop", labels={"app": "bare"}))
        k8s_emulator.bind_pod("shop", f"bare-{i}", "n1")
    job = k8s_emulator.add(ke.make_job("batch", "shop", parallelism=2))
    for i in range(2):
        pod = ke.make_pod(f"batch-{i}", "shop", labels={"app": "batch"})
        pod["metadata"]["ownerReferences"] = [ke.owner_reference(job)]
        k8s_emulator.add(pod)
        k8s_emulator.bind_pod("shop", f"batch-{i}", "n1")
    k8s_emulator.add(ke.make_pdb("bare", "shop", match_labels={"app": "bare"},
                                 max_unavailable=1))
    k8s_emulator.add(ke.make_pdb("batch", "shop", match_labels={"app": "batch"},
                                 max_unavailable="50%"))
    k8s_emulator.sync_disruption()
    bare = status(k8s_emulator, "bare")
    assert (bare["expectedPods"], bare["currentHealthy"], bare["disruptionsAllowed"]) == (0, 2, 0)
    assert refusal(k8s_api, "bare-0")[2].endswith("needs 0 healthy pods and has 2 currently")
    batch = status(k8s_emulator, "batch")
    assert batch["disruptionsAllowed"] == 0 and "observedGeneration" not in batch
    [cond] = batch["conditions"]
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "False", "SyncFailed", "jobs.batch does not implement the scale subresource")
    assert refusal(k8s_api, "batch-0")[2].endswith("is still being processed by the server.")
    def integer_min_available(pdb: dict[str, Any]) -> None:
        del pdb["spec"]["maxUnavailable"]
        pdb["spec"]["minAvailable"] = 1

    k8s_emulator.update("PodDisruptionBudget", "shop", "bare", integer_min_available)
    k8s_emulator.sync_disruption()
    assert status(k8s_emulator, "bare")["expectedPods"] == 2
    assert k8s_cluster.evict("shop", "bare-0") is True


def test_a_pod_under_two_budgets_cannot_be_evicted(k8s_emulator: K8sEmulator,
                                                   k8s_cluster: KubernetesCluster) -> None:
    """pkg/registry/core/pod/storage/eviction.go `Create`: "This pod has more than one
    PodDisruptionBudget, which the eviction subresource does not support." (500)."""
    _, names = running_pods(k8s_emulator)
    for name in ("a", "b"):
        k8s_emulator.add(ke.make_pdb(name, "shop", match_labels={"app": "web"},
                                     max_unavailable=3))
    k8s_emulator.sync_disruption()
    with pytest.raises(ApiError, match="more than one PodDisruptionBudget"):
        k8s_cluster.evict("shop", names[0])
    assert k8s_emulator.get("Pod", "shop", names[0])
    bad = ke.make_pdb("x", "shop", match_labels={}, max_unavailable=1, min_available=1)
    with pytest.raises(ke.StatusError):
        ke.validate(ke.resource_type("PodDisruptionBudget"), bad)


def test_a_disrupted_pod_stays_unhealthy_until_deleted_or_the_deletion_timeout() -> None:
    """pkg/controller/disruption/disruption.go `buildDisruptedPodMap`: an entry of
    ``disruptedPods`` holds while its pod is not being deleted and for `DeletionTimeout`
    (2 minutes) after the eviction; `countHealthyPods` skips the pods it holds."""
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods = [{"metadata": {"name": f"p{i}", "labels": {"app": "web"}}, "status": ready}
            for i in range(3)]
    pdb = ke.make_pdb("web", "shop", match_labels={"app": "web"}, min_available=1)
    pdb["metadata"]["generation"] = 1
    pdb["status"] = {"disruptedPods": {"p0": kc.rfc3339(NOW)}}
    fresh = kc.disruption_status(pdb, pods, {}, NOW + timedelta(seconds=119))
    assert (fresh["currentHealthy"], fresh["disruptionsAllowed"]) == (2, 1)
    assert fresh["disruptedPods"] == {"p0": kc.rfc3339(NOW)}
    stale = kc.disruption_status(pdb, pods, {}, NOW + timedelta(seconds=121))
    assert (stale["currentHealthy"], "disruptedPods" in stale) == (3, False)
