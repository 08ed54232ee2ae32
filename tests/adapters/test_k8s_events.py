"""scoctl's Kubernetes Events against the emulator, through the real client and the shipped role:
one Event per object and reason as ``kubectl describe`` finds it, a series (count,
lastTimestamp) instead of new Events, no writes in a steady state, at most 10 writes a second,
and a failure that never raises into the pass (design: Visibility)."""

from __future__ import annotations

from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core import kube_events as ke
from scoctl.core.intake.k8s import K8sPolicy
from scoctl.core.model import PlanUnitRecord, PlanWorkloadRecord, PodInfo, WorkloadRecord
from scoctl.core.model.kubernetes import Condition
from scoctl.services.kube_events import EventWriter, Facts, TokenBucket
from scoctl.sim import k8s_emulator as kem
from scoctl.sim.k8s_emulator import K8sEmulator

UNSCHEDULABLE = (Condition("PodScheduled", "False", "Unschedulable"),)


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def facts(pods: list[PodInfo], units: int = 2, generation: int = 1) -> Facts:
    plan = PlanWorkloadRecord("web", generation, 1, "T1", None, True, False, (), (
        PlanUnitRecord("a", "spot", "g", units, 1.0, 1.0),))
    return Facts(pods, K8sPolicy(), {"web": plan},
                 {"web": WorkloadRecord(1, "web", "deployment", "k8s", "T1", "queued", "", "")})


def stored_pods(emu: K8sEmulator, n: int, start: int = 0) -> list[PodInfo]:
    """`n` pending pods of workload web, stored, as scoctl's intake sees them."""
    out = []
    for i in range(start, start + n):
        pod = emu.add(kem.make_pod(f"web-{i}", "default", labels={"sco/workload": "web"}))
        meta = pod["metadata"]
        out.append(PodInfo(meta["name"], "default", meta["uid"],
                           labels={"sco/workload": "web"}, conditions=UNSCHEDULABLE))
    return out


def scoctl_events(emu: K8sEmulator) -> list[dict[str, Any]]:
    return [e for e in emu.objects("Event") if (e.get("source") or {}).get("component")
            == "scoctl"]


def test_nominated_events_stand_once_per_pod_and_repeat_as_a_series(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """core/v1 Event series as client-go's EventCorrelator keeps them
    (tools/record/events_cache.go `eventObserve`: a repeat patches count, lastTimestamp and
    message of the one Event): the first sync creates one per pod; later syncs of the same
    facts write nothing; a new plan patches count 2; a restarted writer finds the Events
    (409 AlreadyExists, then a get) and writes nothing for facts that still stand. The Events
    are found by kubectl describe's field selector (describe.go `searchEvents`)."""
    pods = stored_pods(k8s_emulator, 3)
    clock = Clock()
    writer = EventWriter(host="h1", wall=clock)
    first = writer.sync(k8s_cluster, facts(pods))
    assert (first.created, first.patched, first.failed) == (3, 0, 0)
    events = scoctl_events(k8s_emulator)
    assert sorted(e["involvedObject"]["name"] for e in events) == ["web-0", "web-1", "web-2"]
    versions = {e["metadata"]["name"]: e["metadata"]["resourceVersion"] for e in events}
    for _ in range(3):
        clock.t += 5
        assert writer.sync(k8s_cluster, facts(pods)).writes == 0
    assert {e["metadata"]["name"]: e["metadata"]["resourceVersion"]
            for e in scoctl_events(k8s_emulator)} == versions

    # as kubectl describe pod web-0 asks for its events
    uid = pods[0].uid
    found = k8s_cluster._core.list_namespaced_event(  # noqa: SLF001 - the raw API, as kubectl
        "default", field_selector=(f"involvedObject.kind=Pod,involvedObject.name=web-0,"
                                   f"involvedObject.namespace=default,involvedObject.uid={uid}"))
    assert [(e.reason, e.count, e.type, e.source.component, e.reporting_component)
            for e in found.items] == [("Nominated", 1, "Normal", "scoctl", "scoctl")]
    assert found.items[0].message == ("Pod should schedule on: 2 unit(s) of workload web in "
                                      "pools a (2) (plan generation 1)")

    clock.t += 10
    replanned = writer.sync(k8s_cluster, facts(pods, units=3, generation=2))
    assert (replanned.created, replanned.patched) == (0, 3)
    event = k8s_emulator.get("Event", "default", ke.event_name(ke.pod_ref(pods[0]), "Nominated"))
    assert (event["count"], event["message"].split(": ")[1][:9]) == (2, "3 unit(s)")
    assert event["lastTimestamp"] > event["firstTimestamp"]

    restarted = EventWriter(host="h2", wall=clock)
    clock.t += 1
    again = restarted.sync(k8s_cluster, facts(pods, units=3, generation=2))
    assert (again.created, again.patched, again.failed) == (0, 0, 0)
    assert len(scoctl_events(k8s_emulator)) == 3


def test_writes_stay_under_ten_a_second_and_the_rest_waits_for_the_next_pass(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """A token bucket of 10 a second, burst 10 (client-go flowcontrol): 25 new Events with no
    time to wait: 10 written, 15 deferred; a second later 10 more; nothing lost."""
    pods = stored_pods(k8s_emulator, 25)
    clock = Clock()
    writer = EventWriter(host="h", wall=clock, wait=0.0,
                         bucket=TokenBucket(clock=clock, sleep=clock.sleep))
    first = writer.sync(k8s_cluster, facts(pods))
    assert (first.created, first.deferred) == (10, 15)
    clock.t += 1.0
    second = writer.sync(k8s_cluster, facts(pods))
    assert (second.created, second.deferred) == (10, 5)
    clock.t += 1.0
    assert writer.sync(k8s_cluster, facts(pods)).created == 5
    assert len(scoctl_events(k8s_emulator)) == 25
    # waiting is allowed up to `wait`: then the bucket paces the writes at 10 a second
    more = stored_pods(k8s_emulator, 15, start=25)
    paced = EventWriter(host="h", wall=clock, wait=1.0,
                        bucket=TokenBucket(clock=clock, sleep=clock.sleep))
    start = clock.t
    result = paced.sync(k8s_cluster, facts(more))
    assert result.created == 15 and abs(clock.t - start - 0.5) < 1e-6  # 10 at once, 5 in 0.5 s
    late = stored_pods(k8s_emulator, 30, start=40)
    capped = paced.sync(k8s_cluster, facts(more + late))
    assert (capped.created, capped.deferred) == (10, 20)  # the 1 s a pass may wait: 10 more


def test_what_a_pass_defers_is_drained_as_tokens_come_without_recomputing_the_facts(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """The controller's writer waits for no token in a pass: the 15 Events the bucket could
    not cover are its backlog, written by `drain` as the bucket refills (10 a second), each
    once; a sync in between replaces the backlog with what its facts still call for."""
    pods = stored_pods(k8s_emulator, 25)
    clock = Clock()
    writer = EventWriter(host="h", wall=clock, wait=0.0,
                         bucket=TokenBucket(clock=clock, sleep=clock.sleep))
    assert writer.next_drain() is None
    first = writer.sync(k8s_cluster, facts(pods))
    assert (first.created, first.deferred, len(writer.backlog)) == (10, 15, 15)
    assert writer.next_drain() == pytest.approx(0.1)  # the next token
    assert writer.drain(k8s_cluster).created == 0  # no token yet: nothing, nothing lost
    clock.t += 1.0
    assert writer.next_drain() == 0.0
    drained = writer.drain(k8s_cluster)
    assert (drained.created, drained.deferred, len(writer.backlog)) == (10, 5, 5)
    assert writer.next_drain() == pytest.approx(0.1)
    # a pass meanwhile: the facts now hold 3 of the 5 not yet written (2 pods ran)
    written = {e["involvedObject"]["name"] for e in scoctl_events(k8s_emulator)}
    left = [p for p in pods if p.name not in written]
    assert len(left) == 5
    clock.t += 0.4  # 4 tokens
    again = writer.sync(k8s_cluster, facts([p for p in pods if p not in left[:2]]))
    assert (again.created, len(writer.backlog)) == (3, 0)
    assert writer.next_drain() is None
    assert len(scoctl_events(k8s_emulator)) == 23  # each once; the 2 that ran never written


def test_a_writer_with_a_cap_writes_that_many_at_once_and_the_rest_on_the_next_drains(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """The controller's writer (`most`): however many tokens the bucket holds, a sync or a
    drain writes at most `most`, so its loop looks at the schedule between them; the Events
    are the same, each once, and the rate limit still holds."""
    pods = stored_pods(k8s_emulator, 7)
    clock = Clock()
    writer = EventWriter(host="h", wall=clock, wait=0.0, most=2,
                         bucket=TokenBucket(clock=clock, sleep=clock.sleep))
    first = writer.sync(k8s_cluster, facts(pods))
    assert (first.created, first.deferred, len(writer.backlog)) == (2, 5, 5)
    assert writer.next_drain() == 0.0  # 8 tokens left: the loop drains again at once
    drained = [writer.drain(k8s_cluster) for _ in range(3)]
    assert [(d.created, d.deferred) for d in drained] == [(2, 3), (2, 1), (1, 0)]
    assert writer.next_drain() is None
    assert sorted(e["involvedObject"]["name"] for e in scoctl_events(k8s_emulator)) == \
        sorted(p.name for p in pods)


def test_a_failing_api_is_counted_and_never_raised(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    """An Event write that fails (the apiserver's 500) is logged and counted; its series is
    not recorded, so the next sync writes it."""
    pods = stored_pods(k8s_emulator, 2)
    writer = EventWriter(host="h", wall=Clock())
    k8s_emulator.fail_next(20, 500, path_contains="/events")
    failed = writer.sync(k8s_cluster, facts(pods))
    assert (failed.created, failed.failed, writer.failures) == (0, 2, 2)
    k8s_emulator.clear_faults()
    assert writer.sync(k8s_cluster, facts(pods)).created == 2
