"""A drain does not move the claim back and forth (issue 49 item 8).

After 42 → 10 pods the claim flapped between 3 and 4 units, 14 claim versions in 40 s, while
drains ran: each eviction left the evicted pod Terminating (``deletionTimestamp`` set: no
longer demand) a moment before its ReplicaSet's replacement was made and looked at by the
scheduler, so the claim dipped by one pod and came back, once per eviction. The rule
followed is Kubernetes' own: the ReplicaSet controller makes ``spec.replicas`` pods that are not
being deleted (``pkg/controller/replicaset/replica_set.go`` ``manageReplicas`` over
``controller.FilterActivePods``), so while it has fewer, a Terminating pod of it stands for the
replacement to come; once the replacement is there (or after a scale-down) it stands for
nothing.
"""

from __future__ import annotations

from dataclasses import replace

from scoctl.core.intake.k8s import K8sSnapshot, decide_k8s_intake
from scoctl.core.model import PodInfo, ReplicaSetInfo
from tests.core.test_intake import POLICY, make_pod, node

RS = "orders-daily-5d8f7c9b4"
NODES = (node("sco-1", managed=True), node("sco-2", managed=True), node("sco-3", managed=True))


def running(i: int, where: str) -> PodInfo:
    return make_pod(f"p{i}", node=where, phase="Running", ready=True)


def claim_pods(pods: list[PodInfo], replicas: int) -> int:
    snap = K8sSnapshot(pods=tuple(pods), nodes=NODES,
                       replicasets=(ReplicaSetInfo(RS, "shop", replicas=replicas),))
    [claim] = [c for c in decide_k8s_intake(snap, POLICY).claims if c.workload == "orders-daily"]
    return claim.pods


def test_a_drain_keeps_the_claim_steady_through_each_eviction_and_its_replacement() -> None:
    kept = [running(i, "sco-1") for i in range(7)]
    drained = [running(i, "sco-3") for i in range(7, 10)]  # the unit being drained
    seen = [claim_pods(kept + drained, 10)]
    for pod in drained:  # one eviction at a time (a PodDisruptionBudget of 1)
        others = [p for p in drained if p is not pod]
        evicted = replace(pod, deleting=True)  # Terminating, its grace period running
        seen.append(claim_pods(kept + others + [evicted], 10))  # no replacement yet
        fresh = make_pod(f"{pod.name}-r", unschedulable=False)  # not looked at yet
        seen.append(claim_pods(kept + others + [evicted, fresh], 10))
        waiting = make_pod(f"{pod.name}-r")  # the scheduler found no room: Unschedulable
        seen.append(claim_pods(kept + others + [evicted, waiting], 10))
        bound = running(int(pod.name[1:]), "sco-2")  # on a kept unit; the evicted pod gone
        kept.append(bound)
        drained = others
        seen.append(claim_pods(kept + drained, 10))
    assert seen == [10] * len(seen)  # one claim version, not two per eviction


def test_terminating_pods_of_a_scale_down_are_not_demand() -> None:
    pods = [running(i, "sco-1") for i in range(10)]
    going = [replace(running(i, "sco-2"), deleting=True) for i in range(10, 42)]
    assert claim_pods(pods + going, 10) == 10  # the ReplicaSet wants 10: it has them
    assert claim_pods(pods[:9] + going, 10) == 10  # one short: one Terminating stands in
    assert claim_pods(pods[:9] + going, 9) == 9
    # a pod no scheduler has looked at yet is demand its ReplicaSet wants (a scale-up)
    fresh = [make_pod(f"n{i}", unschedulable=False) for i in range(5)]
    assert claim_pods(pods + fresh, 15) == 15
    assert claim_pods(pods + fresh, 12) == 12  # never more than the ReplicaSet wants
