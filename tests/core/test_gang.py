"""Gangs (design: Gangs): sources, planning in one group, all-or-nothing launch and failure."""

from __future__ import annotations

import pytest

from scoctl.config.claims_file import load_claims
from scoctl.core.gang import (
    GANG_FAILED,
    GANG_PROVISIONED,
    GANG_UNSATISFIABLE,
    GangPolicy,
    GangRecord,
    Member,
    gang_backoff,
    gang_booked,
    gang_launch_count,
    gang_launched,
    gang_pass,
    gang_retry_due,
    gang_step,
    may_launch_gang,
    no_valid_host,
    plan_gang,
    pod_group_size,
    report_up,
    slurm_gang_size,
    zone_exclusions,
)
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.planner import plan_all
from scoctl.errors import ConfigError
from tests.core.builders_planner import T1, make_claim, make_flavor, make_pool

POLICY = GangPolicy("same_group", max_pools=2, deadline=600.0, retries=3, booking=1200.0)
FLAVORS = {f.name: f for f in (make_flavor("c4.xlarge", 16, 64), make_flavor("m1.tiny", 2, 4))}


def gang_claim(pods: int = 6):
    return make_claim("train", pods=pods, cpu=8, memory_gi=32)


# --------------------------------------------------------------------------- sources


def test_a_slurm_job_is_a_gang_only_when_it_needs_more_than_one_node():
    assert slurm_gang_size(1) == 0
    assert slurm_gang_size(4) == 4


def test_pod_group_size_prefers_the_annotation_then_min_member_then_the_pods_seen():
    assert pod_group_size(["6", "6", None], 4, 3) == (6, None)
    assert pod_group_size([None, None], 4, 2) == (4, None)
    assert pod_group_size([None], None, 5) == (5, None)


def test_pod_group_size_names_a_bad_or_disagreeing_annotation():
    size, problem = pod_group_size(["six"], None, 3)
    assert size == 3 and problem is not None and "sco/gang-size" in problem
    size, problem = pod_group_size(["4", "6"], None, 3)
    assert problem is not None and "4, 6" in problem


# --------------------------------------------------------------------------- planning


def test_a_gang_goes_whole_into_its_best_group_in_at_most_max_pools_pools():
    pools = [make_pool("a.az1.p1", group="row-a", depth=2),
             make_pool("a.az1.p2", group="row-a", depth=2),
             make_pool("a.az1.p3", group="row-a", depth=10),
             make_pool("b.az2.p1", group="row-b", depth=10)]
    scores = {"a.az1.p1": 0.9, "a.az1.p2": 0.9, "a.az1.p3": 0.8, "b.az2.p1": 0.5}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores)
    assert plan.feasible
    units = plan.units()
    assert sum(units.values()) == 6  # one unit per member, never more
    assert len(units) <= 2
    assert {p.group for p in plan.pools} == {"row-a"}


def test_min_pools_and_the_pool_cap_do_not_spread_one_gang_over_many_pools():
    pools = [make_pool(f"a.az1.p{i}", group="row-a", depth=40) for i in range(10)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores)
    assert plan.units() == {"a.az1.p0": 6}


def test_a_gang_that_fits_no_single_group_is_infeasible_not_split_across_groups():
    pools = [make_pool("a.az1.p1", group="row-a", depth=3),
             make_pool("b.az2.p1", group="row-b", depth=3)]
    scores = {"a.az1.p1": 0.9, "b.az2.p1": 0.8}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores)
    assert not plan.feasible
    assert plan.units() == {}
    assert "gang" in plan.reasons[-1]
    anywhere = GangPolicy("any", 2, 600.0, 3, 1200.0)
    assert plan_gang(gang_claim(), T1, 6, anywhere, pools, FLAVORS, scores).units() == {
        "a.az1.p1": 3, "b.az2.p1": 3}


def test_an_excluded_pool_moves_the_gang_to_the_next_group():
    pools = [make_pool("a.az1.p1", group="row-a"), make_pool("b.az2.p1", group="row-b")]
    scores = {"a.az1.p1": 0.9, "b.az2.p1": 0.8}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores,
                     excluded={"a.az1.p1"})
    assert plan.units() == {"b.az2.p1": 6}


def test_pools_whose_flavor_cannot_hold_a_member_are_not_used():
    pools = [make_pool("a.az1.tiny", flavor="m1.tiny", group="row-a"),
             make_pool("b.az2.p1", group="row-b")]
    scores = {"a.az1.tiny": 0.99, "b.az2.p1": 0.5}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores)
    assert plan.units() == {"b.az2.p1": 6}


def test_several_gangs_count_against_the_pool_cap_as_gangs():
    pools = [make_pool(f"a.az1.p{i}", group="row-a", depth=40) for i in range(4)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    contract = T1.__class__("T1", pool_cap=0.5, min_pools=2)
    plan = plan_gang(gang_claim(pods=12), contract, 3, POLICY, pools, FLAVORS, scores)
    # 4 gangs of 3; no pool holds members of more than ceil(0.5 x 4) = 2 gangs
    assert sum(plan.units().values()) == 12
    assert max(plan.units().values()) <= 6
    assert len(plan.units()) >= 2


def test_a_held_gang_keeps_its_units():
    pools = [make_pool("a.az1.p1", group="row-a"), make_pool("b.az2.p1", group="row-b")]
    scores = {"a.az1.p1": 0.5, "b.az2.p1": 0.9}
    plan = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores,
                     current={"a.az1.p1": 6})
    assert plan.units() == {"a.az1.p1": 6}


def test_the_same_inputs_give_the_same_gang_plan():
    pools = [make_pool(f"{g}.az1.p{i}", group=g, depth=3) for g in "ab" for i in range(3)]
    scores = dict.fromkeys((p.name for p in pools), 0.5)
    one = plan_gang(gang_claim(), T1, 6, POLICY, pools, FLAVORS, scores)
    two = plan_gang(gang_claim(), T1, 6, POLICY, list(reversed(pools)), FLAVORS, scores)
    assert one == two and one.feasible


# --------------------------------------------------------------------------- launch


def test_a_gang_is_launched_whole_or_not_at_all():
    assert gang_launch_count(0, 6, 10) == 6
    assert gang_launch_count(0, 6, 5) == 0
    assert gang_launch_count(4, 6, 2) == 2
    assert gang_launch_count(6, 6, 10) == 0


def test_backoff_doubles_from_a_minute_up_to_half_an_hour():
    assert [gang_backoff(n) for n in range(7)] == [0, 60, 120, 240, 480, 960, 1800]


def members(state, n=6, pool="a.az1.p1"):
    return [Member(f"s{i}", pool, InstanceStatus(state)) for i in range(n)]


def test_a_failed_create_deletes_every_member_and_excludes_the_pool():
    record = gang_launched(GangRecord("train", 6), 100.0)
    seen = members("building", 5) + [Member("launch-1", "a.az1.p1", InstanceStatus.REQUESTED,
                                            "NoValidHost", created=False)]
    step = gang_step(record, seen, POLICY, 110.0)
    assert step.delete == tuple(f"s{i}" for i in range(5))
    assert step.exclude == ("a.az1.p1",)
    assert [e.token for e in step.events] == [GANG_FAILED]
    assert step.events[0].detail["pool"] == "a.az1.p1"
    assert step.events[0].detail["reason"] == "NoValidHost"
    assert step.record.failures == 1 and not step.workload_failed
    assert report_up(seen, 6) == ()


def test_slurm_nodes_are_reported_up_only_once_every_member_has_booted():
    assert report_up(members("building", 5) + members("active", 1, "b"), 6) == ()
    assert report_up(members("active", 5), 6) == ()  # a member short
    failed = members("active", 5) + [Member("s9", "b", InstanceStatus.ERROR, "fault")]
    assert report_up(failed, 6) == ()
    booted = members("active", 4) + [Member(f"r{i}", "b", InstanceStatus.READY)
                                     for i in range(2)]
    assert report_up(booted, 6) == ("r0", "r1", "s0", "s1", "s2", "s3")
    # a second gang of the workload still booting holds back every member's report
    assert report_up(booted + members("building", 6, "c"), 6) == ()
    assert len(report_up(booted + [Member(f"t{i}", "c", InstanceStatus.ACTIVE)
                                   for i in range(6)], 6)) == 12


def test_after_a_failure_the_retry_waits_the_backoff():
    record = GangRecord("train", 6, failures=2, failed_at=1000.0)
    assert not gang_step(record, [], POLICY, 1119.0).may_launch
    assert gang_step(record, [], POLICY, 1120.0).may_launch
    assert gang_step(GangRecord("train", 6), [], POLICY, 0.0).may_launch


def test_members_not_ready_by_the_deadline_fail_the_gang():
    record = gang_launched(GangRecord("train", 6), 0.0)
    seen = members("ready", 5) + [Member("s9", "b.az2.p1", InstanceStatus.ACTIVE)]
    assert gang_step(record, seen, POLICY, 599.0).delete == ()
    step = gang_step(record, seen, POLICY, 600.0)
    assert len(step.delete) == 6
    assert step.exclude == ("b.az2.p1",)
    assert "not Ready" in str(step.events[0].detail["reason"])


def test_after_the_retries_the_gang_is_unsatisfiable_and_the_workload_failed():
    record = gang_launched(GangRecord("train", 6, failures=3, failed_at=0.0), 5000.0)
    step = gang_step(record, [Member("x", "a.az1.p1", InstanceStatus.ERROR, "fault")], POLICY,
                     5001.0)
    assert [e.token for e in step.events] == [GANG_FAILED, GANG_UNSATISFIABLE]
    assert step.workload_failed
    assert not gang_step(step.record, [], POLICY, 99999.0).may_launch


def test_a_ready_gang_is_provisioned_once_and_booked():
    record = gang_launched(GangRecord("train", 6), 0.0)
    booting = gang_step(record, members("active"), POLICY, 30.0)
    assert booting.events == () and booting.delete == ()
    step = gang_step(record, members("ready"), POLICY, 60.0)
    assert [e.token for e in step.events] == [GANG_PROVISIONED]
    again = gang_step(step.record, members("ready"), POLICY, 70.0)
    assert again.events == ()
    assert gang_booked(step.record, POLICY, 60.0 + 1199.0)
    assert not gang_booked(step.record, POLICY, 60.0 + 1200.0)
    assert not gang_booked(record, POLICY, 60.0)


# --------------------------------------------------------------------------- plan_all, claims file


def test_plan_all_plans_a_gang_claim_whole_beside_an_ordinary_claim(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(
        "claims:\n"
        "  - {workload: train, contract: T1, pods: 6, gang: {size: 6},\n"
        "     requests: {cpu: '48', memory: 192Gi}, largest_pod: {cpu: '8', memory: 32Gi}}\n"
        "  - {workload: web, contract: T1, pods: 2,\n"
        "     requests: {cpu: '8', memory: 32Gi}, largest_pod: {cpu: '4', memory: 16Gi}}\n",
        encoding="utf-8")
    claims = load_claims(path, {"T1": T1})
    assert [c.gang for c in claims] == [6, 0]
    pools = [make_pool(f"{g}.az1.p{i}", group=g, depth=40) for g in "ab" for i in range(2)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    plans = plan_all(claims, {"T1": T1}, pools, FLAVORS, scores, {})
    assert plans["train"].feasible and sum(plans["train"].units().values()) == 6
    assert len({p.group for p in plans["train"].pools}) == 1
    assert plans["web"].units()  # the ordinary claim is planned by the usual rules


def test_a_claims_file_gang_larger_than_its_pods_names_the_field(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("claims:\n  - {workload: train, pods: 2, gang: {size: 6},\n"
                    "     requests: {cpu: '16'}, largest_pod: {cpu: '8'}}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_claims(path, {"T1": T1})
    assert "claims[0].gang.size" in str(caught.value)


# --------------------------------------------------------------------------- NoValidHost: the zone


NOVA_NVH = "500: No valid host was found. There are not enough hosts available."
ZONE_FLAVORS = {f.name: f for f in (
    make_flavor("c6.xlarge", 16, 80), make_flavor("m5.2xlarge", 32, 256),
    make_flavor("c4.2xlarge", 32, 128), make_flavor("c5.xlarge", 16, 48),
    make_flavor("c4.large", 8, 32))}


def test_a_gang_nova_found_no_host_for_moves_at_once_and_a_late_one_waits_its_backoff():
    """Issue 49 item 2: NoValidHost for the gang's multi-create excludes its zone, so the
    retry goes elsewhere without the minute's back-off (the failure still counts)."""
    record = gang_launched(GangRecord("train", 6), 100.0)
    failed = [Member(f"s{i}", "c6.xlarge.az2.b", InstanceStatus.ERROR, NOVA_NVH)
              for i in range(6)]
    step = gang_pass(record, failed, POLICY, 110.0)
    assert step.no_host == (("c6.xlarge.az2.b", 6),)
    assert step.record.relocate and step.record.failures == 1
    after = gang_pass(step.record, (), POLICY, 111.0)  # a second later, members deleted
    assert after.may_launch and may_launch_gang(after, after.record, (), 6, 6)
    assert gang_retry_due(step.record, POLICY, 111.0)
    # a gang late at its deadline is no zone's verdict: the back-off holds
    late = gang_pass(record, [Member("s0", "c6.xlarge.az2.b", InstanceStatus.ACTIVE)],
                     POLICY, 100.0 + POLICY.deadline)
    assert not late.record.relocate and late.no_host == ()
    assert not gang_pass(late.record, (), POLICY, 101.0 + POLICY.deadline).may_launch
    # one pool NoValidHost, the other a plain fault: not every failing pool moved, back-off
    mixed = gang_step(record, [failed[0], Member("t0", "c5.xlarge.az2.b", InstanceStatus.ERROR,
                                                  "500: disk error")], POLICY, 110.0)
    assert not mixed.record.relocate and mixed.no_host == (("c6.xlarge.az2.b", 1),)
    # once launched again, the next failure is judged afresh
    assert not gang_launched(step.record, 120.0).relocate


def test_no_valid_host_reads_novas_fault_in_its_forms():
    assert no_valid_host(NOVA_NVH) and no_valid_host("NoValidHost") and no_valid_host(
        "No valid host was found. ")
    assert not no_valid_host("413: Quota exceeded for instances") and not no_valid_host("")


def test_no_valid_host_excludes_the_zones_pools_of_flavors_no_smaller_in_every_group():
    pools = [make_pool("c6.xlarge.az2.b", flavor="c6.xlarge", group="row-b"),
             make_pool("m5.2xlarge.az2.b", flavor="m5.2xlarge", group="row-b"),
             make_pool("c4.2xlarge.az2.e", flavor="c4.2xlarge", group="row-e"),
             make_pool("c5.xlarge.az2.b", flavor="c5.xlarge", group="row-b"),  # less RAM
             make_pool("c4.large.az2.b", flavor="c4.large", group="row-b"),  # smaller
             make_pool("c4.2xlarge.az1.a", flavor="c4.2xlarge", group="row-a")]  # other zone
    record = gang_launched(GangRecord("train", 6), 100.0)
    failed = [Member(f"s{i}", "c6.xlarge.az2.b", InstanceStatus.ERROR, NOVA_NVH)
              for i in range(6)]
    step = gang_step(record, failed, POLICY, 110.0)
    out = zone_exclusions(step, pools, ZONE_FLAVORS)
    assert sorted(out) == ["c4.2xlarge.az2.e", "m5.2xlarge.az2.b"]
    assert out["m5.2xlarge.az2.b"] == "zone az2 cannot hold 6 × c6.xlarge (NoValidHost in " \
        "c6.xlarge.az2.b)"
    # the plan then goes to the other zone's group at once, not pool by pool through az2
    scores = {"c6.xlarge.az2.b": 0.9, "m5.2xlarge.az2.b": 0.85, "c4.2xlarge.az2.e": 0.8,
              "c4.2xlarge.az1.a": 0.5}
    claim = make_claim("train", pods=6, cpu=12, memory_gi=16)
    plan = plan_gang(claim, T1, 6, POLICY, pools, ZONE_FLAVORS, scores,
                     excluded={*step.exclude, *out})
    assert plan.units() == {"c4.2xlarge.az1.a": 6}
    # a fault that is not NoValidHost excludes the failing pool only
    other = gang_step(record, [Member("s0", "c6.xlarge.az2.b", InstanceStatus.ERROR,
                                      "500: disk error")], POLICY, 110.0)
    assert zone_exclusions(other, pools, ZONE_FLAVORS) == {}
