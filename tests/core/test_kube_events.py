"""`core.kube_events`: which Kubernetes Events stand, and their series writes (design:
Visibility)."""

from __future__ import annotations

from dataclasses import replace

from scoctl.core import kube_events as ke
from scoctl.core.intake.k8s import K8sPolicy
from scoctl.core.model import (
    InstanceRecord,
    NoticedRecord,
    PlanUnitRecord,
    PlanWorkloadRecord,
    PodInfo,
    WorkloadRecord,
)
from scoctl.core.model.kubernetes import Condition

UNSCHEDULABLE = (Condition("PodScheduled", "False", "Unschedulable"),)
POLICY = K8sPolicy()


def pending(name: str, workload: str = "web", **fields: object) -> PodInfo:
    return PodInfo(name=name, namespace="shop", uid=f"uid-{name}",
                   labels={"sco/workload": workload}, conditions=UNSCHEDULABLE,
                   **fields)  # type: ignore[arg-type]


def plan(workload: str, *pools: tuple[str, int], feasible: bool = True, generation: int = 3,
         reasons: tuple[str, ...] = ()) -> PlanWorkloadRecord:
    return PlanWorkloadRecord(workload, generation, 1, "T1", None, feasible, False, reasons,
                              tuple(PlanUnitRecord(p, "spot", "g", n, 1.0, 1.0)
                                    for p, n in pools))


def workload(slug: str, status: str = "queued", **fields: object) -> WorkloadRecord:
    return WorkloadRecord(1, slug, "deployment", "k8s", "T1", status, "t", "t",
                          **fields)  # type: ignore[arg-type]


def test_pending_pods_of_a_planned_workload_are_nominated_with_units_pools_and_generation(
        ) -> None:
    pods = [pending("web-1"), pending("web-0"), pending("db-0", "db"),
            pending("bound", node_name="n1"), PodInfo("stray", "shop", conditions=UNSCHEDULABLE)]
    wanted = ke.pod_events(pods, POLICY, {"web": plan("web", ("a", 2), ("b", 1)),
                                          "db": plan("db", feasible=False,
                                                     reasons=("no pool has 4 GPUs",))},
                           {"web": workload("web"), "db": workload("db")})
    assert [(w.ref.name, w.reason, w.type) for w in wanted] == [
        ("db-0", "FailedProvisioning", "Warning"), ("web-0", "Nominated", "Normal"),
        ("web-1", "Nominated", "Normal")]
    assert wanted[1].message == ("Pod should schedule on: 3 unit(s) of workload web in pools "
                                 "a (2), b (1) (plan generation 3)")
    assert "no pool has 4 GPUs" in wanted[0].message
    # kubectl describe pod matches these fields
    assert wanted[1].ref.as_dict() == {"apiVersion": "v1", "kind": "Pod", "name": "web-0",
                                       "namespace": "shop", "uid": "uid-web-0"}


def test_a_failed_workload_gets_failed_provisioning_with_its_reason() -> None:
    wanted = ke.pod_events([pending("web-0")], POLICY, {"web": plan("web", ("a", 1))},
                           {"web": workload("web", "failed", last_token="CAPACITY_EXCEEDED")})
    assert [(w.reason, w.message) for w in wanted] == [
        ("FailedProvisioning", "scoctl cannot provision workload web: CAPACITY_EXCEEDED")]


def test_a_memo_kept_between_passes_gives_the_events_a_fresh_pass_gives() -> None:
    """`PodEventMemo` (the controller's writer keeps one): pods, plans and workloads that
    change between passes are seen at once; pods that stay keep their Event value."""
    memo = ke.PodEventMemo()
    pods = [pending("web-0"), pending("web-1"), pending("db-0", "db")]
    plans = {"web": plan("web", ("a", 2)), "db": plan("db", ("b", 1))}
    states = {"web": workload("web"), "db": workload("db")}

    def both(pods: list[PodInfo], plans: dict[str, PlanWorkloadRecord],
             states: dict[str, WorkloadRecord], policy: K8sPolicy = POLICY) -> list[ke.Wanted]:
        warm = ke.pod_events(pods, policy, plans, states, memo)
        assert warm == ke.pod_events(pods, policy, plans, states)
        return warm

    first = both(pods, plans, states)
    again = both(pods, plans, states)
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same values, kept
    regenerated = both(pods, {**plans, "web": plan("web", ("a", 3), generation=4)}, states)
    assert "plan generation 4" in regenerated[1].message
    bound = both([replace(pods[0], node_name="n1"), *pods[1:]], plans, states)
    assert [w.ref.name for w in bound] == ["db-0", "web-1"]
    failed = both(pods, plans, {**states, "db": workload("db", "failed", last_token="X")})
    assert failed[0].reason == "FailedProvisioning"
    assert [w.ref.name for w in both(pods, plans, states,
                                     K8sPolicy(workload_label="team"))] == []


def instance(id_: str, status: str, node: str | None = None) -> InstanceRecord:
    return InstanceRecord(id_, f"name-{id_}", "r1", "web", "a", 3, "l1", status,  # type: ignore[arg-type]
                          "t", "t", node_name=node)


def test_nodes_get_reclaim_noticed_disruption_started_and_blocked_in_default() -> None:
    notice = NoticedRecord("s1", "r1", "name-s1", "web", "a", "2030-01-01T00:00:00Z",
                           "2030-01-01T00:00:00Z", "metadata")  # type: ignore[arg-type]
    ended = replace(notice, server_id="s3", name="name-s3", outcome="reclaimed")  # type: ignore[arg-type]
    wanted = ke.node_events([instance("s1", "draining", "node-1"), instance("s2", "draining"),
                             instance("s4", "ready")], [notice, ended],
                            [ke.Blocked("s4", "name-s4", "empty", "budget 0")])
    assert [(w.ref.name, w.reason, w.type) for w in wanted] == [
        ("node-1", "ReclaimNoticed", "Warning"), ("node-1", "DisruptionStarted", "Normal"),
        ("name-s2", "DisruptionStarted", "Normal"), ("name-s4", "DisruptionBlocked", "Warning")]
    assert "reason noticed" in wanted[1].message and "reason empty" in wanted[2].message
    # Node events as the kubelet writes them: cluster-scoped object, Event in default, uid = name
    assert wanted[0].ref.as_dict() == {"apiVersion": "v1", "kind": "Node", "name": "node-1",
                                       "uid": "node-1"}
    assert wanted[0].ref.event_namespace == "default"


def nominated(message: str = "m") -> ke.Wanted:
    return ke.Wanted(ke.ObjectRef("Pod", "web-0", "shop", "u0"), "Nominated", message)


def test_a_series_is_created_once_then_silent_while_the_fact_stands() -> None:
    """A steady state writes nothing; one Event per (object, reason), named for both."""
    first = ke.plan_writes([nominated(), nominated()], {}, 1000.0, host="h")
    assert [w.op for w in first] == ["create"]
    body = first[0].body
    assert body["metadata"] == {"name": ke.event_name(nominated().ref, "Nominated"),
                                "namespace": "shop"}
    assert (body["count"], body["source"], body["reportingComponent"],
            body["reportingInstance"], body["firstTimestamp"]) == (
        1, {"component": "scoctl", "host": "h"}, "scoctl", "h", "1970-01-01T00:16:40Z")
    known = ke.settle({}, [nominated()], {first[0].key: first[0].series}, 1000.0)
    for t in (1001.0, 1500.0, 1000.0 + ke.REFRESH_S - 1):
        assert ke.plan_writes([nominated()], known, t) == []
    assert ke.event_name(nominated().ref, "Nominated") != ke.event_name(nominated().ref,
                                                                        "FailedProvisioning")


def test_a_changed_message_a_refresh_and_a_return_patch_count_and_last_timestamp() -> None:
    created = ke.plan_writes([nominated()], {}, 1000.0)[0]
    known = {created.key: created.series}
    changed = ke.plan_writes([nominated("new plan")], known, 1010.0)
    assert [(w.op, w.body) for w in changed] == [("patch", {
        "count": 2, "lastTimestamp": "1970-01-01T00:16:50Z", "message": "new plan",
        "type": "Normal"})]
    known = ke.settle(known, [nominated("new plan")], {changed[0].key: changed[0].series}, 1010)
    refreshed = ke.plan_writes([nominated("new plan")], known, 1010.0 + ke.REFRESH_S)
    assert refreshed[0].body["count"] == 3
    # the fact ends (no write), then returns: the same Event, count + 1
    ended = ke.settle(known, [], {}, 1020.0)
    assert not ended[created.key].active
    back = ke.plan_writes([nominated("new plan")], ended, 1030.0)
    assert [(w.op, w.name, w.body["count"]) for w in back] == [("patch", created.name, 3)]
    # an ended series older than the apiserver's TTL is forgotten
    assert ke.settle(ended, [], {}, 1010.0 + ke.FORGET_S) == {}


def test_an_event_found_in_the_cluster_continues_its_series() -> None:
    created = ke.plan_writes([nominated()], {}, 1000.0)[0]
    raw = {**created.body, "count": 4}
    found = ke.adopted(raw, created.key)
    assert found is not None and (found.count, found.first, found.last) == (4, 1000.0, 1000.0)
    assert ke.plan_writes([nominated()], {created.key: found}, 1005.0) == []
    assert ke.plan_writes([nominated("x")], {created.key: found}, 1005.0)[0].body["count"] == 5
    assert ke.adopted({**raw, "source": {"component": "kubelet"}}, created.key) is None


def test_a_disruption_in_flight_names_its_recorded_reason_before_the_drain_too() -> None:
    expiring = replace(instance("s5", "ready", "node-5"), disruption="expired")
    drained = replace(instance("s6", "draining", "node-6"), disruption="underutilized")
    wanted = ke.node_events([expiring, drained], [])
    assert [(w.ref.name, w.reason) for w in wanted] == [("node-5", "DisruptionStarted"),
                                                       ("node-6", "DisruptionStarted")]
    assert "reason expired" in wanted[0].message
    assert "reason underutilized" in wanted[1].message


def test_long_messages_and_names_are_cut_to_the_apis_limits() -> None:
    long = ke.Wanted(ke.ObjectRef("Pod", "p" * 253, "shop", "u"), "Nominated", "m" * 5000)
    write = ke.plan_writes([long], {}, 0.0)[0]
    assert len(write.name) <= 253 and len(write.body["message"]) == ke.MAX_MESSAGE
