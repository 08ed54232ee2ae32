"""A steady controller's Event syncs (design: Visibility): facts the same as the last sync's (the
very
same cached pod values, equal records) are not worked out again over every pod — the sync
writes on from the backlog — yet a refresh or a forgetting that comes due, a failed write, a
changed pod or a changed plan is still seen at the next sync, as a full sync sees it. Against
the emulator, through the real client."""

from __future__ import annotations

from dataclasses import replace

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core import kube_events as ke
from scoctl.core.model import PodInfo
from scoctl.services.kube_events import EventWriter, Facts, TokenBucket
from scoctl.sim.k8s_emulator import K8sEmulator
from tests.adapters.test_k8s_events import Clock, facts, scoctl_events, stored_pods


class Counting(EventWriter):
    """The writer, counting the times it works the Events out (`wanted`)."""

    worked = 0

    def wanted(self, facts: Facts) -> list[ke.Wanted]:
        self.worked += 1
        return super().wanted(facts)


def test_unchanged_facts_are_worked_out_once_and_a_changed_pod_again(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    pods = stored_pods(k8s_emulator, 3)
    clock = Clock()
    writer = Counting(host="h", wall=clock)
    assert writer.sync(k8s_cluster, facts(pods)).created == 3
    for _ in range(3):
        clock.t += 5
        assert writer.sync(k8s_cluster, facts(list(pods))).writes == 0
    assert writer.worked == 1
    changed: list[PodInfo] = [replace(pods[0]), *pods[1:]]  # a new value: the cache replaced it
    assert writer.sync(k8s_cluster, facts(changed)).writes == 0  # the same Event stands
    assert writer.worked == 2
    assert writer.sync(k8s_cluster, facts(changed, generation=2)).patched == 3  # a new plan
    assert writer.worked == 3


def test_a_refresh_that_comes_due_is_written_though_nothing_changed(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    pods = stored_pods(k8s_emulator, 2)
    clock = Clock()
    writer = Counting(host="h", wall=clock)
    writer.sync(k8s_cluster, facts(pods))
    clock.t += ke.REFRESH_S - 1
    assert writer.sync(k8s_cluster, facts(pods)).writes == 0
    clock.t += 1
    refreshed = writer.sync(k8s_cluster, facts(pods))
    assert (refreshed.created, refreshed.patched) == (0, 2)
    assert {e["count"] for e in scoctl_events(k8s_emulator)} == {2}


def test_an_ended_series_is_forgotten_on_time_though_nothing_changed(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    pods = stored_pods(k8s_emulator, 2)
    clock = Clock()
    writer = Counting(host="h", wall=clock)
    writer.sync(k8s_cluster, facts(pods))
    clock.t += 10
    writer.sync(k8s_cluster, facts([]))  # no pod waits any more: both series ended
    assert len(writer.series) == 2 and not any(s.active for s in writer.series.values())
    clock.t += ke.FORGET_S - 11
    writer.sync(k8s_cluster, facts([]))
    assert len(writer.series) == 2
    clock.t += 1  # the same facts, but the forgetting is due (no refresh is: none is wanted)
    writer.sync(k8s_cluster, facts([]))
    assert writer.series == {}
    back = writer.sync(k8s_cluster, facts(pods))
    # forgotten: a create, which finds the Event (the emulator keeps Events; an apiserver's
    # TTL would have removed it) and continues its series
    assert (back.created, back.patched) == (0, 2)


def test_unchanged_facts_write_on_from_the_backlog_as_the_bucket_allows(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    pods = stored_pods(k8s_emulator, 14)
    clock = Clock()
    writer = Counting(host="h", wall=clock, wait=0.0,
                      bucket=TokenBucket(clock=clock, sleep=clock.sleep))
    first = writer.sync(k8s_cluster, facts(pods))
    assert (first.created, first.deferred) == (10, 4)
    clock.t += 0.25  # 2 tokens
    second = writer.sync(k8s_cluster, facts(pods))
    assert (second.created, second.deferred, len(writer.backlog)) == (2, 2, 2)
    clock.t += 1.0
    assert writer.sync(k8s_cluster, facts(pods)).created == 2
    assert writer.worked == 1
    assert len(scoctl_events(k8s_emulator)) == 14


def test_a_failed_write_makes_the_next_sync_a_full_one(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    pods = stored_pods(k8s_emulator, 2)
    writer = Counting(host="h", wall=Clock())
    k8s_emulator.fail_next(1, 500, path_contains="/events")
    failed = writer.sync(k8s_cluster, facts(pods))
    assert (failed.created, failed.failed) == (1, 1)
    assert writer.sync(k8s_cluster, facts(pods)).created == 1
    assert writer.worked == 2
    assert writer.sync(k8s_cluster, facts(pods)).writes == 0
    assert writer.worked == 2
