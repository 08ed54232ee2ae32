"""Placement truth (`core.truth`) and its intake tokens: isolation of exclusive workloads,
the truth loop's unplaced pods, and a shared workload's claim growing by them.

The fit rules are kube-scheduler's NodeResourcesFit (`pkg/scheduler/framework/plugins/
noderesources/fit.go`: a pod fits where its requests are within the allocatable less the
requests of the pods bound there), TaintToleration and NodeAffinity filters."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.intake.common import WorkloadRule, WorkloadState
from scoctl.core.intake.k8s import K8sPolicy, K8sSnapshot, decide_k8s_intake
from scoctl.core.model import (
    Condition,
    Container,
    NodeInfo,
    OwnerRef,
    Placement,
    PodInfo,
    Taint,
    Toleration,
)
from scoctl.core.quantity import fits
from scoctl.core.tokens import map_token
from scoctl.core.truth import Cluster, Units, missing_isolation, not_isolated, unplaced
from scoctl.core.userdata import BootContract

GI = 2**30
NOW = 10_000.0
WAITING = Condition("PodScheduled", "False", "Unschedulable",
                    "0/4 nodes are available: 4 Insufficient cpu.")
OWN_TOLERATION = Toleration("sco/workload", "Equal", "web", "NoSchedule")
OWN_SELECTOR = Placement(node_selector=(("sco/workload", "web"),))


def pod(name: str, cpu: int, *, workload: str | None = "web", node: str = "",
        isolated: bool = True, created: float = 0.0) -> PodInfo:
    return PodInfo(
        name=name, namespace="shop", uid=f"uid-{name}",
        labels={"sco/workload": workload} if workload else {},
        owners=(OwnerRef("ReplicaSet", f"{workload or 'tenant'}-5d8f7c9b4", controller=True),),
        containers=(Container("main", {"cpu": cpu * 1000, "memory": GI}),),
        node_name=node, phase="Running" if node else "Pending",
        conditions=() if node else (WAITING,),
        tolerations=(OWN_TOLERATION,) if isolated and workload else (),
        placement=OWN_SELECTOR if isolated and workload == "web" else None, created=created)


def unit(name: str, cpu: int, *, workload: str = "web", ready: bool = True,
         exclusive: bool = True) -> NodeInfo:
    return NodeInfo(name=name, labels={"sco/managed": "true", "sco/workload": workload},
                    taints=(Taint("sco/workload", "NoSchedule", workload),) if exclusive else (),
                    allocatable={"cpu": cpu * 1000, "memory": 64 * GI}, ready=ready)


# --- isolation ------------------------------------------------------------------------------


def test_an_exclusive_units_user_data_registers_the_workload_taint() -> None:
    boot = BootContract(workload="web", contract="T1", pool="p", tier="committed",
                        generation=1, launch="l", region="r", az="az1", flavor="f",
                        exclusive=True)
    assert boot.taints() == ["sco/workload=web:NoSchedule"]
    assert boot.labels()["sco/workload"] == "web"
    shared = BootContract(workload="web", contract="T1", pool="p", tier="reclaimable",
                          generation=1, launch="l", region="r", az="az1", flavor="f")
    assert shared.taints() == ["reclaimable=true:NoSchedule"]
    slurm = BootContract(workload="web", contract="T1", pool="p", tier="committed",
                         generation=1, launch="l", region="r", az="az1", flavor="f",
                         exclusive=True, slurm_node_name="c-1")
    assert slurm.taints() == []


def test_a_pod_lacking_the_toleration_or_the_selector_is_named_with_what_it_lacks() -> None:
    assert missing_isolation(pod("a", 1), "web") == ()
    bare = pod("b", 1, isolated=False)
    assert missing_isolation(bare, "web") == ("toleration sco/workload=web:NoSchedule",
                                              "nodeSelector sco/workload=web")
    found = not_isolated([pod("a", 1), bare], "web")
    assert found is not None and found.pods == ("shop/b",)


def test_intake_reports_a_not_isolated_pod_at_once_and_queues_the_workload() -> None:
    snap = K8sSnapshot(pods=(pod("b", 1, isolated=False),))
    decision = decide_k8s_intake(snap, K8sPolicy())
    (token,) = decision.tokens
    assert token.token == "POD_NOT_ISOLATED"
    assert token.detail["missing"] == ["nodeSelector sco/workload=web",
                                       "toleration sco/workload=web:NoSchedule"]
    assert map_token(token.token).status == "queued"
    # a shared workload's pods need neither
    shared = K8sPolicy(workloads=(WorkloadRule("web", "T1", "k8s"),),
                       isolation={"web": "shared"})
    assert [t.token for t in decide_k8s_intake(snap, shared).tokens] == ["POD_QUEUED"]


# --- the truth loop -------------------------------------------------------------------------


def test_pods_whose_units_others_fill_are_unplaced_with_the_occupants() -> None:
    nodes = (unit("n1", 8, exclusive=False),)
    tenant = pod("t1", 6, workload=None, node="n1")
    waiting = pod("w1", 4)
    found = unplaced("web", [waiting], Cluster(nodes, [tenant, waiting]),
                     Units(last_ready=NOW - 31), now=NOW, after=30)
    assert found is not None
    assert found.pods == ("shop/w1",) and found.occupants == ("shop/t1",)
    assert found.requests == {"cpu": 4000, "memory": GI}
    assert "Insufficient cpu" in found.reason


def test_nothing_is_unplaced_while_a_unit_boots_or_before_the_timeout() -> None:
    nodes = (unit("n1", 8),)
    full = pod("x", 8, node="n1")
    waiting = pod("w1", 4)
    cluster = Cluster(nodes, [full, waiting])
    assert unplaced("web", [waiting], cluster, Units(booting=1, last_ready=NOW - 60),
                    now=NOW, after=30) is None
    assert unplaced("web", [waiting], cluster, Units(last_ready=NOW - 10),
                    now=NOW, after=30) is None
    assert unplaced("web", [pod("w2", 4, created=NOW - 5)], cluster,
                    Units(last_ready=NOW - 60), now=NOW, after=30) is None
    assert unplaced("web", [waiting], cluster, Units(last_ready=NOW - 60),
                    now=NOW, after=30) is not None


def _states() -> dict[str, WorkloadState]:
    return {"web": WorkloadState("web", "queued", last_token="POD_QUEUED")}


def test_a_shared_workloads_claim_grows_by_its_unplaced_pods_and_shrinks_back() -> None:
    policy = K8sPolicy(workloads=(WorkloadRule("web", "T1", "k8s"),),
                       isolation={"web": "shared"})
    nodes = (unit("n1", 8, exclusive=False),)
    tenant = pod("t1", 6, workload=None, node="n1")
    waiting = pod("w1", 4, isolated=False)
    snap = K8sSnapshot(pods=(tenant, waiting), nodes=nodes, workloads=_states(), now=NOW,
                       units={"web": Units(last_ready=NOW - 60)})
    decision = decide_k8s_intake(snap, policy)
    (claim,) = decision.claims
    assert claim.requests["cpu"] == 8000  # its 4 vCPU pending, and again: the room taken
    assert [t.token for t in decision.tokens] == ["PODS_UNPLACED"]
    assert decision.tokens[0].detail["occupants"] == ["shop/t1"]
    # the tenant leaves: the pod fits its unit again, the claim is what its pods request
    placed = decide_k8s_intake(K8sSnapshot(pods=(waiting,), nodes=nodes, workloads=_states(),
                                           now=NOW, units={"web": Units(last_ready=NOW - 60)}),
                               policy)
    assert placed.claims[0].requests["cpu"] == 4000
    assert "PODS_UNPLACED" not in [t.token for t in placed.tokens]


def test_an_exclusive_workload_is_told_unplaced_but_its_claim_does_not_grow() -> None:
    nodes = (unit("n1", 8),)
    other = pod("o1", 6, node="n1")  # its own running pod
    waiting = pod("w1", 4)
    snap = K8sSnapshot(pods=(other, waiting), nodes=nodes, workloads=_states(), now=NOW,
                       units={"web": Units(last_ready=NOW - 60)})
    decision = decide_k8s_intake(snap, K8sPolicy())
    assert [t.token for t in decision.tokens] == ["PODS_UNPLACED"]
    assert decision.claims[0].requests["cpu"] == 10_000


# --- property: the unplaced set is an independent first-fit scheduling ----------------------


def _first_fit(pending: list[PodInfo], nodes: list[NodeInfo],
               bound: list[PodInfo]) -> set[str]:
    """Written apart from `core.truth`: each node's free cpu/memory, pods oldest first onto
    the first node (by name) that is the workload's, Ready, tolerated and has room."""
    free = {}
    for n in sorted(nodes, key=lambda n: n.name):
        if n.ready and n.labels.get("sco/workload") == "web":
            used_cpu = sum(c.requests.get("cpu", 0) for p in bound if p.node_name == n.name
                           for c in p.containers)
            used_mem = sum(c.requests.get("memory", 0) for p in bound if p.node_name == n.name
                           for c in p.containers)
            free[n.name] = {"cpu": n.allocatable["cpu"] - used_cpu,
                            "memory": n.allocatable["memory"] - used_mem}
    left = set()
    for p in sorted(pending, key=lambda p: (p.created or 0.0, p.namespace, p.name)):
        want = {"cpu": sum(c.requests.get("cpu", 0) for c in p.containers),
                "memory": sum(c.requests.get("memory", 0) for c in p.containers)}
        for name in sorted(free):
            if fits(want, free[name]):
                free[name] = {k: free[name][k] - want[k] for k in want}
                break
        else:
            left.add(f"shop/{p.name}")
    return left


@settings(max_examples=150, deadline=None)
@given(units=st.lists(st.tuples(st.sampled_from([4, 8, 16]), st.booleans(),
                                st.sampled_from(["web", "api"])), min_size=1, max_size=5),
       pending=st.lists(st.integers(min_value=1, max_value=12), min_size=1, max_size=10),
       bound=st.lists(st.tuples(st.integers(min_value=0, max_value=4),
                                st.integers(min_value=1, max_value=6),
                                st.sampled_from(["web", None])), max_size=8))
def test_unplaced_equals_an_independent_first_fit(
        units: list[tuple[int, bool, str]], pending: list[int],
        bound: list[tuple[int, int, str | None]]) -> None:
    nodes = [unit(f"n{i}", cpu, workload=owner, ready=ready)
             for i, (cpu, ready, owner) in enumerate(units)]
    running = [pod(f"b{i}", cpu, workload=owner, node=f"n{at % len(nodes)}")
               for i, (at, cpu, owner) in enumerate(bound)]
    waiting = [pod(f"w{i:02d}", cpu, created=float(i)) for i, cpu in enumerate(pending)]
    found = unplaced("web", waiting, Cluster(nodes, [*running, *waiting]),
                     Units(last_ready=NOW - 60), now=NOW, after=30)
    expected = _first_fit(waiting, nodes, running)
    has_units = any(n.ready and n.labels["sco/workload"] == "web" for n in nodes)
    if not has_units:
        assert found is None
    else:
        assert set(found.pods if found else ()) == expected
