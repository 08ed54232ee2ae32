"""Gangs in the pure reconcile decision and the loop's gang rules (design: Gangs): all Ready is
provisioned once, a failed member or a late gang deletes every member, a provisioned gang is
left alone while it drains, a booked gang is not idle-scaled down, and a gang launches whole."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from scoctl.core.gang import (
    DEFAULT_GANG_POLICY,
    GANG_FAILED,
    GANG_PROVISIONED,
    Member,
    gang_backoff,
    gang_launched,
    gang_needed,
    gang_pass,
    gang_retry_due,
    may_launch_gang,
    members_of,
)
from scoctl.core.model import GangRecord, SlurmNode
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.reconcile import decide
from tests.core.test_reconcile import (
    NOW,
    POLICY,
    fleet,
    make_instance,
    make_node,
    make_server,
    snap,
)

T = NOW.timestamp()
GANG = DEFAULT_GANG_POLICY






def test_all_members_ready_is_provisioned_once() -> None:
    servers = tuple(make_server(f"s{i}") for i in range(3))
    insts = tuple(make_instance(f"s{i}") for i in range(3))
    nodes = tuple(make_node(i.name, sid=i.id) for i in insts)
    record = GangRecord("web", 3, launched_at=T - 100)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, gangs={"web": record},
                    gang_policy=GANG, targets={"web": {"p-spot": 3}}), POLICY, NOW)
    [gang] = d.gangs
    assert [e.token for e in gang.events] == [GANG_PROVISIONED]
    assert gang.record.provisioned_at == T and not d.deletions
    again = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                        gangs={"web": gang.record}, gang_policy=GANG,
                        targets={"web": {"p-spot": 3}}), POLICY, NOW)
    assert again.gangs == () and not again.deletions  # provisioned once


def test_a_gang_not_ready_by_the_deadline_deletes_every_member() -> None:
    servers = tuple(make_server(f"s{i}") for i in range(3))
    insts = (make_instance("s0"), *(make_instance(f"s{i}", status="active") for i in (1, 2)))
    nodes = (make_node(insts[0].name, sid="s0"),)
    record = GangRecord("web", 3, launched_at=T - GANG.deadline)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, gangs={"web": record},
                    gang_policy=GANG, targets={"web": {"p-spot": 3}}), POLICY, NOW)
    [gang] = d.gangs
    assert sorted(x.server_id for x in d.deletions) == ["s0", "s1", "s2"]
    assert all(x.reason == "gang failed: not Ready within 600s" for x in d.deletions)
    assert [(e.token, e.detail["pool"]) for e in gang.events] == [(GANG_FAILED, "p-spot")]
    assert (gang.record.failures, gang.record.failed_at, gang.exclude) == (1, T, ("p-spot",))


def test_an_error_member_fails_the_gang_and_is_deleted_once() -> None:
    servers = (make_server("s0"), make_server("s1", status="ERROR", fault_code=500,
                                              fault="No valid host was found."))
    insts = (make_instance("s0"), make_instance("s1", status="building", active=None))
    nodes = (make_node(insts[0].name, sid="s0"),)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    gangs={"web": GangRecord("web", 2, launched_at=T - 10)}, gang_policy=GANG,
                    targets={"web": {"p-spot": 2}}), POLICY, NOW)
    assert sorted(x.server_id for x in d.deletions) == ["s0", "s1"]
    [gang] = d.gangs
    assert gang.events[0].token == GANG_FAILED and gang.record.failures == 1


def test_a_booked_gang_is_not_idle_scaled_down_until_its_booking_ends() -> None:
    servers, insts, nodes = fleet(4)
    booked = GangRecord("web", 4, launched_at=T - 900, provisioned_at=T - 60)
    kwargs = {"servers": servers, "instances": insts, "k8s_nodes": nodes,
              "targets": {"web": {"p-spot": 0}}, "gang_policy": GANG}
    d = decide(snap(gangs={"web": booked}, **kwargs), POLICY, NOW)
    assert not d.scale_downs and d.gangs == ()
    over = GangRecord("web", 4, launched_at=T - 9000, provisioned_at=T - GANG.booking)
    d = decide(snap(gangs={"web": over}, **kwargs), POLICY, NOW)
    assert d.scale_downs  # the booking ended: idle units go as any others


def test_a_provisioned_gang_draining_for_a_scale_down_is_no_failure() -> None:
    record = GangRecord("web", 2, launched_at=T - 900, provisioned_at=T - 800)
    members = (Member("s0", "p", InstanceStatus.READY),)  # the other one is draining
    assert gang_pass(record, members, GANG, T).record == record
    assert gang_pass(record, members, GANG, T + 10 * GANG.deadline).delete == ()
    fresh = gang_pass(record, (), GANG, T).record  # all gone: a fresh gang
    assert (fresh.provisioned_at, fresh.launched_at) == (None, None)


def test_members_seen_without_a_launch_start_the_deadline_now() -> None:
    members = (Member("s0", "p", InstanceStatus.BUILDING),)
    decision = gang_pass(GangRecord("web", 2), members, GANG, T)
    assert decision.record.launched_at == T and decision.delete == ()


def test_members_are_the_live_and_error_instances() -> None:
    insts = [make_instance("a"), make_instance("b", status="deleting"),
             make_instance("c", status="error"), make_instance("d", workload="other")]
    assert [m.server for m in members_of(insts, "web")] == ["a", "c"]


def test_a_gang_launches_whole_after_its_backoff_and_never_in_part() -> None:
    failed = GangRecord("web", 4, failures=1, failed_at=T)
    early = gang_pass(failed, (), GANG, T + 30)
    assert not may_launch_gang(early, failed, (), 4, 4)
    later = gang_pass(failed, (), GANG, T + gang_backoff(1))
    assert may_launch_gang(later, failed, (), 4, 4)
    booting = (Member("s0", "p", InstanceStatus.BUILDING),)
    assert not may_launch_gang(later, failed, booting, 3, 4)  # never top up a gang
    up = GangRecord("web", 4, T - 100, provisioned_at=T - 10)
    ready = tuple(Member(f"s{i}", "p", InstanceStatus.READY) for i in range(4))
    grown = gang_pass(up, ready, GANG, T)
    assert may_launch_gang(grown, up, ready, 4, 4)  # one more whole gang
    assert not may_launch_gang(grown, up, ready, 2, 4)


def test_a_provisioned_gang_that_lost_a_member_launches_it_again() -> None:
    """A reclaimed member (gone, no fault of the launch) leaves a provisioned gang short: the
    acquirer may make it whole again — that member alone, never more than the gang needs."""
    up = GangRecord("web", 4, T - 100, provisioned_at=T - 10)
    left = tuple(Member(f"s{i}", "p", InstanceStatus.READY) for i in range(3))
    decision = gang_pass(up, left, GANG, T)
    assert decision.delete == () and decision.record == up  # no gang failure
    assert may_launch_gang(decision, up, left, 1, 4)
    assert not may_launch_gang(decision, up, left, 2, 4)  # a fifth server: never
    broken = (*left[:2], Member("s9", "p", InstanceStatus.ERROR, "fault"))
    assert not may_launch_gang(decision, up, broken, 1, 4)  # a failed member fails it whole


def test_the_backoff_base_is_the_policy_s() -> None:
    assert gang_backoff(1, 2.0) == 2.0 and gang_backoff(3, 2.0) == 8.0
    assert gang_backoff(40, 2.0) == 1800.0
    assert (gang_needed(6, 6), gang_needed(13, 6), gang_needed(3, 6), gang_needed(4, 0)) \
        == (6, 12, 6, 0)
    assert timedelta(seconds=GANG.backoff) == timedelta(minutes=1)


def test_a_retry_is_due_once_the_backoff_ended_and_not_after_giving_up() -> None:
    failed = GangRecord("web", 4, failures=1, failed_at=T)
    assert not gang_retry_due(failed, GANG, T + 59)
    assert gang_retry_due(failed, GANG, T + 60)
    assert not gang_retry_due(gang_launched(failed, T + 60), GANG, T + 61)  # launched again
    gave_up = GangRecord("web", 4, failures=GANG.retries + 1, failed_at=T)
    assert not gang_retry_due(gave_up, GANG, T + 10_000)
    assert not gang_retry_due(GangRecord("web", 4), GANG, T)  # never failed: nothing owed


def test_a_slurm_gangs_nodes_are_reported_up_only_once_every_member_has_booted() -> None:
    """design: Gangs: slurmctld is given no member's address (NodeAddr) while another member is
    still building; once all have booted, every member's address goes out in one pass."""
    names = [f"hpc-{i}" for i in range(3)]
    servers = tuple(replace(make_server(f"s{i}", workload="hpc", name=f"sco-hpc-s{i}"),
                            address=f"127.0.0.{i + 5}") for i in range(3))
    booting = tuple(SlurmNode(name=n, cpus=8, memory_mb=1000, state="idle",
                              flags=frozenset({"CLOUD", "POWERING_UP"})) for n in names)

    def decided(*states: str) -> Any:
        insts = tuple(make_instance(f"s{i}", status=state, workload="hpc", node_name=names[i],
                                    name=f"sco-hpc-s{i}")
                      for i, state in enumerate(states))
        shown = tuple(s for s, state in zip(servers, states, strict=True) if state != "building")
        building = tuple(replace(s, status="BUILD") for s, state in
                         zip(servers, states, strict=True) if state == "building")
        return decide(snap(servers=shown + building, instances=insts, slurm_nodes=booting,
                           gangs={"hpc": gang_launched(GangRecord("hpc", 3), T - 10)},
                           gang_policy=GANG, targets={"hpc": {"p-spot": 3}}), POLICY, NOW)

    assert decided("active", "active", "building").addresses == ()
    up = decided("active", "active", "active").addresses
    assert sorted((a.node, a.address) for a in up) == [
        ("hpc-0", "127.0.0.5"), ("hpc-1", "127.0.0.6"), ("hpc-2", "127.0.0.7")]
    # without a gang the same node is told its address at once (as before)
    alone = decide(snap(servers=servers[:1], instances=(make_instance(
        "s0", status="active", workload="hpc", node_name="hpc-0", name="sco-hpc-s0"),),
        slurm_nodes=booting[:1], targets={"hpc": {"p-spot": 1}}), POLICY, NOW)
    assert [a.node for a in alone.addresses] == ["hpc-0"]
