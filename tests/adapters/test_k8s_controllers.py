"""The simulated cluster's controllers as pure functions (`scoctl.sim.k8s_controllers`). Each test
names the upstream rule it follows (kubernetes/kubernetes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from scoctl.sim import agent
from scoctl.sim import k8s_controllers as kc
from scoctl.sim.k8s_emulator import make_deployment, make_replicaset, pods_for

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def pod(name: str, node: str = "", *, ready: bool = True, phase: str = "Running",
        cost: int | None = None, created: datetime | None = None,
        ready_since: datetime | None = None, restarts: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}", "labels": {"app": "web"},
                            "creationTimestamp": kc.rfc3339(created or NOW - timedelta(hours=1))}
    if cost is not None:
        meta["annotations"] = {kc.POD_DELETION_COST: str(cost)}
    conditions = [{"type": "Ready", "status": "True" if ready else "False",
                   "lastTransitionTime": kc.rfc3339(ready_since or NOW - timedelta(hours=1))}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"name": "main", "restartCount": restarts}]}}


def names(pods: list[Any]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# --- ReplicaSet scale-down victims -----------------------------------------------------------


def test_victims_are_ranked_unassigned_pending_unready_cost_then_doubled_up() -> None:
    """pkg/controller/controller_utils.go `ActivePodsWithRanks.Less`, rules 1–5: unassigned <
    assigned; Pending < Unknown < Running; not Ready < Ready; lower
    ``controller.kubernetes.io/pod-deletion-cost`` first; more related pods on the same node
    first (pkg/controller/replicaset/replica_set.go `getPodsRankedByRelatedPodsOnSameNode`)."""
    pods = [pod("spread", "n1"), pod("crowded-a", "n2"), pod("crowded-b", "n2"),
            pod("cheap", "n3", cost=-5), pod("unready", "n4", ready=False),
            pod("unknown", "n5", phase="Unknown"), pod("pending", "n6", phase="Pending",
                                                       ready=False),
            pod("unassigned", phase="Pending", ready=False)]
    ranked = kc.pods_to_delete(pods, pods, len(pods), NOW)
    assert names(ranked) == ["unassigned", "pending", "unknown", "unready", "cheap",
                             "crowded-b", "crowded-a", "spread"]
    assert names(kc.pods_to_delete(pods, pods, 2, NOW)) == ["unassigned", "pending"]
    assert kc.pods_to_delete(pods, pods, 0, NOW) == []


def test_victims_then_go_by_ready_time_restarts_and_age_in_log_buckets() -> None:
    """`ActivePodsWithRanks.Less` rules 6–8 with LogarithmicScaleDown: Ready for less time
    first, more container restarts first, newer first, each time compared by the log2 of its
    age (`logarithmicRankDiff`), equal buckets by uid."""
    recent = pod("recent", "n1", ready_since=NOW - timedelta(seconds=30))
    settled = pod("settled", "n2", ready_since=NOW - timedelta(hours=5))
    assert names(kc.pods_to_delete([settled, recent], [], 1, NOW)) == ["recent"]
    flappy = pod("flappy", "n1", restarts=4)
    calm = pod("calm", "n2")
    assert names(kc.pods_to_delete([calm, flappy], [], 1, NOW)) == ["flappy"]
    young = pod("young", "n1", created=NOW - timedelta(minutes=1))
    old = pod("old", "n2", created=NOW - timedelta(days=3))
    assert names(kc.pods_to_delete([old, young], [], 1, NOW)) == ["young"]
    # 40 s and 60 s old fall in the same log2 bucket (2**35 ns ≈ 34 s to 69 s): the uid
    # decides, not the 20 s
    a = pod("a", "n1", created=NOW - timedelta(seconds=60))
    b = pod("b", "n2", created=NOW - timedelta(seconds=40))
    assert names(kc.pods_to_delete([b, a], [], 2, NOW)) == ["a", "b"]


def test_a_deployment_scale_down_keeps_the_survivors_spread_one_per_node() -> None:
    """pkg/controller/replicaset/replica_set.go `getPodsToDelete`: ranks count the active pods
    of every ReplicaSet of the Deployment (`getIndirectlyRelatedPods`), so the doubled-up
    nodes lose pods first and one pod per node survives; the agent's `scale_changes` uses it.
    (The ranks are counted once, before any deletion, as upstream counts them.)"""
    deployment = make_deployment("web", "shop", replicas=5)
    deployment["metadata"]["uid"] = "d-uid"
    replicaset = make_replicaset(deployment)
    replicaset["metadata"]["uid"] = "rs-uid"
    pods = pods_for(replicaset, 5)
    layout = ["n1", "n3", "n1", "n2", "n1"]
    for p, node in zip(pods, layout, strict=True):
        p["spec"]["nodeName"] = node
        p["metadata"]["creationTimestamp"] = kc.rfc3339(NOW - timedelta(hours=1))
        p["status"] = {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True",
             "lastTransitionTime": kc.rfc3339(NOW - timedelta(hours=1))}]}
    changes = agent.scale_changes(deployment, [replicaset], pods, 3, 3, kc.rfc3339(NOW))
    left = [p for p in pods if p["metadata"]["name"] not in changes.delete]
    assert sorted(p["spec"]["nodeName"] for p in left) == ["n1", "n2", "n3"]
    assert len(changes.delete) == 2


# --- PodGC -----------------------------------------------------------------------------------


def test_pods_of_a_missing_node_go_after_the_quarantine() -> None:
    """pkg/controller/podgc/gc_controller.go `gcOrphaned`: a node absent from the informer is
    queued for `quarantineTime` (40 s) before its pods are deleted (it may come back); a node
    seen again leaves the queue; unassigned pods are not orphans."""
    pods = [pod("a", "gone"), pod("b", "gone"), pod("c", "n1"), pod("d", phase="Pending")]
    since, doomed = kc.orphaned_pods(pods, ["n1"], {}, 100.0)
    assert (since, doomed) == ({"gone": 100.0}, [])
    since, doomed = kc.orphaned_pods(pods, ["n1"], since, 139.0)
    assert doomed == []
    since, doomed = kc.orphaned_pods(pods, ["n1"], since, 140.0)
    assert names(doomed) == ["a", "b"]
    assert kc.orphaned_pods(pods, ["n1", "gone"], since, 200.0) == ({}, [])  # it came back


def test_an_orphan_is_marked_failed_with_a_disruption_condition() -> None:
    """gc_controller.go `gcOrphaned` → `markFailedAndDeletePodWithCondition`: phase Failed and
    ``DisruptionTarget=True``, reason ``DeletionByPodGC``, "PodGC: node no longer exists",
    before the deletion with grace period 0."""
    status = kc.podgc_failed_status(pod("a", "gone"), NOW)
    assert status["phase"] == "Failed"
    target = status["conditions"][-1]
    assert (target["type"], target["status"], target["reason"], target["message"]) == (
        "DisruptionTarget", "True", "DeletionByPodGC", "PodGC: node no longer exists")
    assert kc.podgc_failed_status(pod("s", "gone", phase="Succeeded"), NOW)["phase"] == (
        "Succeeded")


# --- node lifecycle --------------------------------------------------------------------------


def test_a_node_whose_kubelet_stopped_turns_unknown_after_the_grace_period() -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `tryUpdateNodeHealth`: past
    node-monitor-grace-period without a status from the kubelet, Ready and the kubelet's other
    conditions become Unknown / ``NodeStatusUnknown`` / "Kubelet stopped posting node status.";
    a Node that never posted Ready gets ``NodeStatusNeverUpdated``."""
    node = {"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady",
         "lastHeartbeatTime": "2026-01-01T11:00:00Z"},
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "NetworkUnavailable", "status": "False"}]}}
    assert kc.node_health(node, 100.0, 139.0, NOW) is None
    conditions = kc.node_health(node, 100.0, 140.0, NOW)
    assert conditions is not None
    by_type = {c["type"]: c for c in conditions}
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"],
            by_type["Ready"]["message"]) == ("Unknown", "NodeStatusUnknown",
                                             "Kubelet stopped posting node status.")
    assert by_type["Ready"]["lastHeartbeatTime"] == "2026-01-01T11:00:00Z"  # kept
    assert by_type["MemoryPressure"]["status"] == "Unknown"
    assert by_type["NetworkUnavailable"]["status"] == "False"  # not the kubelet's
    unknown = {**node, "status": {"conditions": conditions}}
    assert kc.node_health(unknown, 100.0, 500.0, NOW) is None  # Unknown already
    [never] = kc.node_health({"metadata": {"name": "n2"}}, None, 0.0, NOW) or []
    assert (never["status"], never["reason"]) == ("Unknown", "NodeStatusNeverUpdated")
