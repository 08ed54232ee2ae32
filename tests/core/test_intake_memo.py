"""Intake reads pods by bucket and keeps what it read between passes (`IntakeMemo`, issue 29):
the decision with a memo warmed by earlier passes is the decision a fresh read makes, whatever
changed in between; and a pass whose pods did not change reads no bucket again."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.intake.common import WorkloadRule
from scoctl.core.intake.k8s import IntakeMemo, K8sSnapshot, count_pending, decide_k8s_intake
from scoctl.core.model import OwnerRef, PodInfo
from tests.core.test_intake import POLICY, make_pod, node

# the adapter builds one owners value per template, shared by its pods
TEMPLATES = [(OwnerRef("ReplicaSet", f"orders-daily-5d8f7c9b{i}", controller=True),)
             for i in range(3)] + [(OwnerRef("ReplicaSet", "web-77f9c", controller=True),)]
NODES = (node("n1"), node("sco-1", managed=True), node("sco-2", managed=True))
POLICY_2 = replace(POLICY, workloads=(*POLICY.workloads,
                                      WorkloadRule("web", "T2", "k8s", namespace="shop")))

POD = st.fixed_dictionaries({
    "template": st.integers(0, len(TEMPLATES) - 1),
    "labelled": st.sampled_from([None, "orders-daily", "Bad_Slug", "batch"]),
    "where": st.sampled_from(["", "", "sco-1", "sco-2", "n1"]),
    "phase": st.sampled_from(["Pending", "Pending", "Running", "Succeeded"]),
    "cpu": st.sampled_from(["1", "4", "500m"]),
    "tolerate": st.booleans(),
    "namespace": st.sampled_from(["shop", "shop", "other"]),
})


def pod(i: int, spec: dict[str, object]) -> PodInfo:
    owners = TEMPLATES[int(str(spec["template"]))]
    rs = owners[0].name
    base = make_pod(f"p{i}", workload=spec["labelled"], rs=rs, cpu=str(spec["cpu"]),
                    node=str(spec["where"]), namespace=str(spec["namespace"]),
                    phase=str(spec["phase"]) if spec["where"] else "Pending",
                    tolerate=bool(spec["tolerate"]), ready=spec["phase"] == "Running")
    return replace(base, owners=owners)


def snap(pods: list[PodInfo], nodes: tuple[object, ...] = NODES) -> K8sSnapshot:
    return K8sSnapshot(pods=tuple(pods), nodes=tuple(nodes))  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(st.lists(POD, max_size=14), st.data())
def test_a_warm_memo_decides_as_a_fresh_read_whatever_changed(first, data) -> None:
    pods = [pod(i, spec) for i, spec in enumerate(first)]
    memo = IntakeMemo()
    assert decide_k8s_intake(snap(pods), POLICY_2, memo) == decide_k8s_intake(snap(pods),
                                                                                POLICY_2)
    for _ in range(3):  # three more passes, each after some change
        change = data.draw(st.sampled_from(["drop", "replace", "add", "reorder", "nodes",
                                            "policy", "none"]))
        policy = POLICY_2
        nodes: tuple[object, ...] = NODES
        if change == "drop" and pods:
            pods.pop(data.draw(st.integers(0, len(pods) - 1)))
        elif change == "replace" and pods:
            at = data.draw(st.integers(0, len(pods) - 1))
            pods[at] = pod(at, data.draw(POD))
        elif change == "add":
            pods.append(pod(len(pods) + 100, data.draw(POD)))
        elif change == "reorder":
            pods = data.draw(st.permutations(pods))
        elif change == "nodes":
            nodes = NODES[:2]  # sco-2 is no longer scoctl's
        elif change == "policy":
            policy = POLICY
        warm = decide_k8s_intake(snap(pods, nodes), policy, memo)
        assert warm == decide_k8s_intake(snap(pods, nodes), policy), change


def test_a_pass_reads_only_the_buckets_whose_pods_changed() -> None:
    pods = [replace(make_pod(f"a{i}", rs=TEMPLATES[0][0].name), owners=TEMPLATES[0])
            for i in range(50)]
    pods += [replace(make_pod(f"b{i}", rs=TEMPLATES[1][0].name), owners=TEMPLATES[1])
             for i in range(50)]
    memo = IntakeMemo()
    first = decide_k8s_intake(snap(pods), POLICY, memo)
    assert (memo.read, memo.reused) == (2, 0)  # a bucket per (namespace, owners value)
    again = decide_k8s_intake(snap(pods), POLICY, memo)
    assert again == first and (memo.read, memo.reused) == (0, 2)
    # a new pod of a template read by watch (its own owners value): only its bucket is read
    newcomer = make_pod("c0", rs=TEMPLATES[2][0].name)
    grown = decide_k8s_intake(snap([*pods, newcomer]), POLICY, memo)
    assert (memo.read, memo.reused) == (1, 2)
    [claim] = grown.claims
    assert claim.pods == 101 == sum(1 for _ in (*pods, newcomer))


@settings(max_examples=100, deadline=None)
@given(st.lists(POD, max_size=14), st.lists(st.tuples(st.sampled_from(["drop", "replace",
                                                                      "add", "policy"]),
                                                      st.integers(0, 13), POD), max_size=4))
def test_the_memo_counts_the_pending_demand_as_the_pods_do(first, changes) -> None:
    """The watch stage's pending count, from the buckets a warm memo keeps, is the count over
    the pods themselves (`count_pending`), whatever changed."""
    pods = [pod(i, spec) for i, spec in enumerate(first)]
    memo = IntakeMemo()
    decide_k8s_intake(snap(pods), POLICY_2, memo)
    assert memo.pending() == count_pending(pods, POLICY_2)
    for change, at, spec in changes:
        policy = POLICY_2
        if change == "drop" and pods:
            pods.pop(at % len(pods))
        elif change == "replace" and pods:
            pods[at % len(pods)] = pod(at, spec)
        elif change == "add":
            pods.append(pod(len(pods) + 100, spec))
        elif change == "policy":
            policy = POLICY
        decide_k8s_intake(snap(pods), policy, memo)
        assert memo.pending() == count_pending(pods, policy), change
