"""Examples of the planner's rules (design: Planner), including the seed's Placement Decision."""

from __future__ import annotations

import math

import pytest

from scoctl.core.model import Contract, Pool
from scoctl.core.planner import (
    EPS,
    WorkloadPlan,
    coverage,
    plan_all,
    plan_rows,
    plan_workload,
    planning_order,
    pool_key,
    promised_depth,
)
from scoctl.errors import ConfigError
from tests.core.builders_planner import (
    GI,
    SEED_FLAVORS,
    T1,
    depth_after,
    make_claim,
    make_flavor,
    make_pool,
    seed_claim,
    seed_pools,
    seed_scores,
)

LOOSE = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
FLAVORS = {f.name: f for f in (make_flavor("c4.xlarge", 16, 64, reserve=False),
                               make_flavor("c4.2xlarge", 32, 128, reserve=False),
                               make_flavor("m5.large", 8, 32, reserve=False),
                               make_flavor("t3.small", 2, 2, reserve=False))}


def plan(claim, contract, pools, scores=None, current=None, depth_left=None, **kw) -> WorkloadPlan:
    scores = scores if scores is not None else {p.name: 0.5 for p in pools}
    return plan_workload(claim, contract, pools, FLAVORS, scores, current or {}, depth_left or {},
                         **kw)


def group_shares(p: WorkloadPlan) -> dict[str, float]:
    out: dict[str, float] = {}
    for pp in p.pools:
        if pp.tier == "reclaimable":
            out[pp.group] = out.get(pp.group, 0.0) + pp.share
    return out


# --------------------------------------------------------------------------- coverage


def test_coverage_counts_whole_pods_per_instance():
    claim = seed_claim()  # 42 pods of 4 vCPU / 16 GiB
    assert coverage(FLAVORS["c4.xlarge"], claim) == pytest.approx(16 / 168)
    assert coverage(FLAVORS["c4.2xlarge"], claim) == pytest.approx(32 / 168)
    # 1 vCPU left over per instance does not count: 3 pods of 4 vCPU on 15.9 allocatable
    assert coverage(SEED_FLAVORS["c4.xlarge"], claim) == pytest.approx(12 / 168)


def test_coverage_is_zero_when_the_flavor_cannot_hold_the_largest_pod():
    assert coverage(FLAVORS["t3.small"], seed_claim()) == 0.0


def test_coverage_uses_capacity_when_allocatable_is_unset_and_counts_accelerators():
    gpu = make_flavor("g5.2xlarge", 32, 128, gpus=2, reserve=False)
    claim = make_claim(pods=4, cpu=8, memory_gi=16, gpus=1)
    assert coverage(gpu, claim) == pytest.approx(0.5)  # the 2 GPUs bind: 2 of 4 pods
    assert coverage(FLAVORS["c4.2xlarge"], claim) == 0.0  # no GPU at all


def test_one_large_unit_can_cover_a_small_claim_many_times_over():
    claim = make_claim(pods=2, cpu=1, memory_gi=2)  # 16 such pods fit one c4.xlarge
    assert coverage(FLAVORS["c4.xlarge"], claim) == pytest.approx(8.0)


def test_the_key_adds_the_depth_premium_over_the_deepest_pool():
    assert pool_key(0.9, 10, 40, 0.05) == pytest.approx(0.9125)
    assert pool_key(0.9, 0, 0, 0.05) == 0.9


# --------------------------------------------------------------------------- the seed scenario


def test_seed_placement_decision_keeps_the_t1_contract():
    pools = seed_pools()
    result = plan_workload(seed_claim(), T1, pools, SEED_FLAVORS, seed_scores(pools), {}, {})
    assert result.feasible and not result.degraded and result.reasons == ()
    assert result.coverage >= 1 - EPS
    assert result.committed_coverage >= 0.30
    reclaimable = [p for p in result.pools if p.tier == "reclaimable"]
    assert len(reclaimable) >= 8
    assert max(p.share for p in reclaimable) <= 0.15 + EPS
    assert max(group_shares(result).values()) <= 0.30 + EPS
    assert sum(p.units for p in result.pools) <= 20  # a handful of units, not a pod per unit


def test_seed_scenario_has_71_eligible_pools_in_9_groups():
    pools = seed_pools()
    claim = seed_claim()
    scores = seed_scores(pools)
    eligible = [p for p in pools if p.name in scores
                and coverage(SEED_FLAVORS[p.flavor], claim) > 0]
    assert len(eligible) == 71
    assert len({p.group for p in eligible}) == 9
    assert sum(p.tier == "committed" for p in eligible) == 8


def test_seed_explain_says_why_pools_were_skipped():
    pools = seed_pools()
    result = plan_workload(seed_claim(), T1, pools, SEED_FLAVORS, seed_scores(pools), {}, {},
                           explain=True)
    why = {line.pool: line.reason for line in result.explain}
    assert why["t3.medium.az1.spot90"].startswith("flavor t3.medium cannot hold the largest pod")
    assert why["c4.xlarge.az2.spot91"] == "not ranked (no score in the ranking)"
    big = next(p.name for p in pools if p.flavor == "c5.4xlarge")
    assert "above the pool cap 15.0%" in why[big]
    assert any("is at its cap (30.0%)" in r for r in why.values())
    assert any(r.startswith("not needed") for r in why.values())
    planned = {p.pool for p in result.pools}
    assert all(line.units == 0 for line in result.explain if line.pool not in planned)


# --------------------------------------------------------------------------- order and fill


def test_at_equal_score_the_deeper_pool_comes_first_then_the_name():
    pools = [make_pool("a", depth=5), make_pool("b", depth=40), make_pool("c", depth=40)]
    one = make_claim(pods=4, cpu=4, memory_gi=16)  # one c4.xlarge covers it
    result = plan(one, LOOSE, pools)
    assert result.units() == {"b": 1}
    assert [p.key for p in result.pools] == [pytest.approx(0.55)]
    no_premium = plan(one, LOOSE, pools, depth_premium=0.0)
    assert no_premium.units() == {"a": 1}


def test_unranked_and_excluded_pools_get_nothing():
    pools = [make_pool("a"), make_pool("b"), make_pool("c")]
    result = plan(make_claim(pods=4), LOOSE, pools, scores={"a": 0.9, "b": 0.5},
                  excluded=frozenset({"a"}), explain=True)
    assert result.units() == {"b": 1}
    why = {line.pool: line.reason for line in result.explain}
    assert why["a"] == "excluded"
    assert why["c"] == "not ranked (no score in the ranking)"


def test_pods_that_do_not_tolerate_reclaimable_get_committed_pools_only():
    pools = [make_pool("spot", depth=40), make_pool("res", tier="committed", depth=40)]
    claim = make_claim(pods=8, tolerates_reclaimable=False)
    result = plan(claim, T1, pools, scores={"spot": 0.99, "res": 0.1})
    assert result.units() == {"res": 2}
    assert result.feasible and not result.degraded


def test_floor_first_on_committed_units_best_key_first():
    pools = [make_pool("res-a", tier="committed", group="r1"),
             make_pool("res-b", tier="committed", group="r2")]
    pools += [make_pool(f"spot{i}", group=f"g{i % 4}") for i in range(10)]
    scores = {p.name: 0.5 for p in pools} | {"res-b": 0.9}
    result = plan(seed_claim(), T1, pools, scores)  # c4.xlarge covers 16/168 each
    committed = {p.pool: p.units for p in result.pools if p.tier == "committed"}
    assert committed == {"res-b": 4}  # 4 × 9.5% ≥ 30%
    assert result.committed_coverage >= 0.30


def test_floor_shortfall_is_reported_and_reclaimable_units_cover_the_rest():
    pools = [make_pool("res", tier="committed", depth=1)]
    pools += [make_pool(f"spot{i}", group=f"g{i % 4}") for i in range(10)]
    result = plan(seed_claim(), T1, pools)
    assert result.feasible and not result.degraded
    assert result.units()["res"] == 1
    assert result.floor_shortfall == pytest.approx(0.30 - 16 / 168)
    assert any(r.startswith("floor shortfall") and "committed depth exhausted" in r
               for r in result.reasons)
    assert result.coverage >= 1 - EPS


def test_reclaimable_units_spread_over_min_pools_pools_first():
    pools = [make_pool(f"spot{i}", group=f"g{i}") for i in range(10)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    contract = Contract("T1", floor=0.0, pool_cap=0.5, group_cap=0.5, min_pools=4)
    result = plan(make_claim(pods=12), contract, pools, scores)  # 3 c4.xlarge cover it
    assert result.units() == {"spot0": 1, "spot1": 1, "spot2": 1, "spot3": 1}
    assert not result.degraded


def test_waste_is_dropped_worst_key_first():
    pools = [make_pool("big", flavor="c4.2xlarge", group="g1"),
             make_pool("small", flavor="m5.large", group="g2")]
    scores = {"big": 0.9, "small": 0.5}
    contract = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    # 10 pods of 4 vCPU: big covers 0.8, small 0.2 → two big units would over-cover
    result = plan(make_claim(pods=10), contract, pools, scores, depth_left={"big": 1})
    assert result.units() == {"big": 1, "small": 1}
    assert result.coverage == pytest.approx(1.0)


# --------------------------------------------------------------------------- degraded, infeasible


def test_a_small_claim_above_the_pool_cap_relaxes_in_order_and_covers():
    pools = [make_pool(f"spot{i}", group=f"g{i % 2}") for i in range(4)]
    claim = make_claim(pods=6)  # one c4.xlarge (4 pods) covers 2/3: above every cap
    no_floor = Contract("T1", floor=0.0, pool_cap=0.15, group_cap=0.30, min_pools=8)
    result = plan(claim, no_floor, pools, explain=True)
    assert result.feasible and result.degraded
    assert result.units() == {"spot0": 1, "spot1": 1}  # one unit per pool first
    kinds = [r.split(":")[0] for r in result.reasons]
    assert kinds == ["min_pools relaxed", "group cap relaxed", "pool cap relaxed"]


def test_too_few_pools_relaxes_min_pools_only():
    pools = [make_pool(f"spot{i}", group=f"g{i}", depth=40) for i in range(5)]
    contract = Contract("T1", floor=0.0, pool_cap=0.3, group_cap=0.3, min_pools=8)
    result = plan(make_claim(pods=40), contract, pools)  # 10% per unit, 3 per pool
    assert result.feasible and result.degraded
    assert result.reasons == ("min_pools relaxed: reclaimable units in 5 pools, "
                              "contract T1 asks 8",)
    assert all(p.share <= 0.3 + EPS for p in result.pools)


def test_a_strict_contract_reports_infeasible_instead_of_relaxing():
    pools = [make_pool(f"spot{i}", group=f"g{i % 2}") for i in range(4)]
    strict = Contract("T1", floor=0.0, pool_cap=0.15, group_cap=0.30, min_pools=8, strict=True)
    result = plan(make_claim(pods=6), strict, pools)
    assert not result.feasible and not result.degraded
    assert result.units() == {}
    assert result.reasons[0].startswith("strict contract T1: the caps and depth allow only 0.0%")


def test_depth_exhausted_everywhere_is_infeasible_with_the_shortfall():
    pools = [make_pool("spot0", group="g0", depth=2), make_pool("spot1", group="g1", depth=1),
             make_pool("res", tier="committed", depth=1)]
    result = plan(seed_claim(), T1, pools)  # 4 units × 9.5% = 38%
    assert not result.feasible
    assert result.units() == {"res": 1, "spot0": 2, "spot1": 1}
    assert result.coverage == pytest.approx(4 * 16 / 168)
    assert any(r.startswith("depth exhausted: the plan covers 38.1% of the claim (61.9% short)")
               for r in result.reasons)


def test_a_claim_no_flavor_can_hold_says_no_eligible_pool_with_the_reason_per_pool_class():
    pools = [make_pool("spot0", group="g0"), make_pool("spot1", group="g1"),
             make_pool("res", tier="committed"), make_pool("tiny", flavor="t3.small"),
             make_pool("gone", flavor="m5.large")]
    result = plan(make_claim(pods=4, gpus=1), T1, pools, excluded={"gone"})
    assert not result.feasible and result.units() == {}
    pod = "4 vCPU · 16Gi · 1 nvidia.com/gpu"
    assert result.reasons[0] == (
        f"no eligible pool (100.0% short): excluded (pool gone); flavor c4.xlarge cannot hold"
        f" the largest pod ({pod}) (3 pools: res, spot0, spot1); flavor t3.small cannot hold"
        f" the largest pod ({pod}) (pool tiny)")
    assert not any("depth exhausted" in r for r in result.reasons)


def test_empty_claim_releases_every_unit():
    pools = [make_pool("spot0")]
    claim = make_claim(pods=0)
    result = plan(claim, T1, pools, current={"spot0": 3})
    assert result.feasible and result.units() == {} and result.coverage == 1.0


# --------------------------------------------------------------------------- stability


def seed_plan(current=None, pools=None):
    pools = pools or seed_pools()
    return plan_workload(seed_claim(), T1, pools, SEED_FLAVORS, seed_scores(pools),
                         current or {}, {})


def test_replanning_the_seed_with_its_units_in_place_moves_nothing():
    pools = seed_pools()
    first = seed_plan(pools=pools)
    depth = depth_after(pools, first, {})
    again = plan_workload(seed_claim(), T1, pools, SEED_FLAVORS, seed_scores(pools),
                          first.units(), depth)
    assert again == first


def test_a_grown_claim_adds_units_and_keeps_the_placed_ones():
    pools = [make_pool(f"spot{i}", group=f"g{i}") for i in range(10)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    contract = Contract("T1", floor=0.0, pool_cap=0.5, group_cap=0.5, min_pools=2)
    first = plan(make_claim(pods=8), contract, pools, scores)
    grown = plan(make_claim(pods=20), contract, pools, scores, current=first.units())
    assert first.units() == {"spot0": 1, "spot1": 1}
    assert grown.units() == {"spot0": 2, "spot1": 2, "spot2": 1}


def test_a_shrunk_claim_gives_back_the_worst_keyed_units_first():
    pools = [make_pool(f"spot{i}", group=f"g{i}") for i in range(6)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    current = {f"spot{i}": 1 for i in range(6)}  # 6 units for 24 pods
    result = plan(make_claim(pods=10), LOOSE, pools, scores, current=current)
    assert result.units() == {"spot0": 1, "spot1": 1, "spot2": 1}


def test_a_tightened_pool_cap_trims_units_and_places_them_elsewhere():
    pools = [make_pool(f"spot{i}", group=f"g{i}") for i in range(6)]
    scores = {p.name: 0.9 - i / 100 for i, p in enumerate(pools)}
    current = {"spot0": 3, "spot1": 3}  # 6 × 1/6
    tight = Contract("T1", floor=0.0, pool_cap=0.34, group_cap=1.0, min_pools=2)
    result = plan(make_claim(pods=24), tight, pools, scores, current=current)
    assert result.units() == {"spot0": 2, "spot1": 2, "spot2": 2}


def test_an_excluded_pool_keeps_its_current_units_and_takes_no_new_ones():
    # issue 28 item 9: a notice on 1 of 4 units of a pool dropped the 3 others; design: Notices
    # excludes the pool for new units only (the noticed unit is not current: not live)
    pools = [make_pool("spot0", group="g0"), make_pool("spot1", group="g1")]
    scores = {"spot0": 0.9, "spot1": 0.5}
    result = plan(make_claim(pods=16), LOOSE, pools, scores, current={"spot0": 3},
                  excluded=frozenset({"spot0"}), explain=True)
    assert result.units() == {"spot0": 3, "spot1": 1}  # the replacement goes elsewhere
    assert ("spot0", 3, "excluded: keeps its current units, takes no new ones") in [
        (line.pool, line.units, line.reason) for line in result.explain]
    # grown, the claim still gets nothing new from the excluded pool
    grown = plan(make_claim(pods=32), LOOSE, pools, scores, current={"spot0": 3, "spot1": 1},
                 excluded=frozenset({"spot0"}))
    assert grown.units() == {"spot0": 3, "spot1": 5}
    # shrunk, its units are given back like any other's
    shrunk = plan(make_claim(pods=8), LOOSE, pools, scores, current={"spot0": 3, "spot1": 1},
                  excluded=frozenset({"spot0"}), explain=True)
    assert sum(shrunk.units().values()) == 2
    never = plan(make_claim(pods=4), LOOSE, pools, scores, excluded=frozenset({"spot0"}),
                 explain=True)
    assert never.units() == {"spot1": 1}
    assert ("spot0", 0, "excluded") in [(x.pool, x.units, x.reason) for x in never.explain]


# --------------------------------------------------------------------------- plan_all


CONTRACTS = {"T1": LOOSE, "T2": Contract("T2", floor=0.0, pool_cap=1.0, group_cap=1.0,
                                         min_pools=1),
             "T10": Contract("T10", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)}


def test_planning_order_is_contract_tier_then_slug():
    claims = [make_claim("b", contract="T10"), make_claim("a", contract="T2"),
              make_claim("z", contract="T1"), make_claim("c", contract="T2")]
    assert [c.workload for c in planning_order(claims)] == ["z", "a", "c", "b"]


def test_committed_depth_goes_to_the_higher_tier_first():
    pools = [make_pool("res", tier="committed", depth=1)]
    claims = [make_claim("aaa", pods=4, contract="T2", tolerates_reclaimable=False),
              make_claim("zzz", pods=4, contract="T1", tolerates_reclaimable=False)]
    plans = plan_all(claims, CONTRACTS, pools, FLAVORS, {"res": 0.5}, {})
    assert list(plans) == ["zzz", "aaa"]
    assert plans["zzz"].units() == {"res": 1} and plans["zzz"].feasible
    assert plans["aaa"].units() == {} and not plans["aaa"].feasible


def test_committed_depth_is_the_reserved_instances_whoever_holds_them():
    # issue 28 item 8: a workload holding both reserved units of row-h.res (depth 2) planned
    # 4 there once a notice excluded row-e.res, and another workload got 2 more on top
    pools = [make_pool("c4.xlarge.row-e.res", tier="committed", group="row-e", depth=4),
             make_pool("c4.xlarge.row-h.res", tier="committed", group="row-h", depth=2),
             make_pool("c4.xlarge.row-a.spot", group="row-a", depth=40)]
    scores = {p.name: 0.5 for p in pools}
    floor = Contract("T1", floor=0.9, pool_cap=1.0, group_cap=1.0, min_pools=1)
    current = {"web": {"c4.xlarge.row-h.res": 2}, "api": {}}
    claims = [make_claim("web", pods=16), make_claim("api", pods=8)]
    plans = plan_all(claims, {"T1": floor}, pools, FLAVORS, scores, current,
                     excluded={"c4.xlarge.row-e.res"})
    assert sum(p.units().get("c4.xlarge.row-h.res", 0) for p in plans.values()) == 2
    assert plans["web"].units()["c4.xlarge.row-h.res"] == 2  # web's current units stay
    assert "c4.xlarge.row-h.res" not in plans["api"].units()
    assert any(r.startswith("floor shortfall") for r in plans["api"].reasons)
    again = plan_all(claims, {"T1": floor}, pools, FLAVORS, scores, current,
                     excluded={"c4.xlarge.row-e.res"}, only={"api"}, previous=plans)
    assert again == plans


def test_an_incremental_replan_keeps_the_other_plans_and_their_depth():
    pools = [make_pool("spot0", depth=3)]
    claims = [make_claim("a", pods=8), make_claim("b", pods=4)]
    full = plan_all(claims, CONTRACTS, pools, FLAVORS, {"spot0": 0.5}, {})
    assert full["a"].units() == {"spot0": 2} and full["b"].units() == {"spot0": 1}
    grown = [make_claim("a", pods=8), make_claim("b", pods=8)]
    again = plan_all(grown, CONTRACTS, pools, FLAVORS, {"spot0": 0.5}, {}, only={"b"},
                     previous=full)
    assert again["a"] is full["a"]
    assert again["b"].units() == {"spot0": 1} and not again["b"].feasible  # depth is a's


def test_a_claim_without_a_previous_plan_is_planned_even_when_not_named():
    pools = [make_pool("spot0")]
    plans = plan_all([make_claim("a", pods=4)], CONTRACTS, pools, FLAVORS, {"spot0": 0.5}, {},
                     only=set(), previous={})
    assert plans["a"].units() == {"spot0": 1}


def test_unknown_contract_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown contract 'T9'"):
        plan_all([make_claim("a", contract="T9")], CONTRACTS, [make_pool("p")], FLAVORS,
                 {"p": 0.5}, {})


def test_explain_only_for_the_workloads_asked():
    pools = [make_pool("spot0"), make_pool("spot1")]
    plans = plan_all([make_claim("a", pods=4), make_claim("b", pods=4)], CONTRACTS, pools,
                     FLAVORS, {"spot0": 0.5}, {}, explain={"b"})
    assert plans["a"].explain == ()
    assert [(line.pool, line.reason) for line in plans["b"].explain] == [
        ("spot1", "not ranked (no score in the ranking)")]


def test_shares_are_coverage_over_the_plan_total_or_the_claim():
    pools = [make_pool("spot0", depth=1)]
    partial = plan(make_claim(pods=8), LOOSE, pools)
    assert partial.pools[0].share == pytest.approx(0.5)  # over 1: the plan covers half
    over = plan(make_claim(pods=3), LOOSE, pools)
    assert over.pools[0].share == 1.0 and over.coverage == pytest.approx(4 / 3)
    assert math.isclose(sum(p.share for p in over.pools), 1.0)


def test_memory_binds_when_it_is_the_scarcer_resource():
    claim = make_claim(pods=10, cpu=1, memory_gi=16)
    assert coverage(FLAVORS["c4.xlarge"], claim) == pytest.approx(4 / 10)
    assert claim.requests["memory"] == 160 * GI


def test_pools_with_no_depth_take_no_new_units_but_keep_current_ones():
    pools = [make_pool("dry", depth=0), make_pool("wet", depth=5)]
    scores = {"dry": 0.9, "wet": 0.5}
    result = plan(make_claim(pods=8), LOOSE, pools, scores, current={"dry": 1})
    assert result.units() == {"dry": 1, "wet": 1}


def test_pool_depth_drives_the_key_not_what_earlier_workloads_left():
    pools: list[Pool] = [make_pool("a", depth=10), make_pool("b", depth=20)]
    result = plan(make_claim(pods=4), LOOSE, pools, depth_left={"b": 1})
    assert result.units() == {"b": 1}


def test_a_precomputed_promised_depth_gives_the_same_plans():
    pools = [make_pool("spot0", depth=3), make_pool("spot1", depth=2, group="g1")]
    scores = {"spot0": 0.9, "spot1": 0.5}
    claims = [make_claim("a", pods=8), make_claim("b", pods=4), make_claim("gone", pods=4)]
    full = plan_all(claims, CONTRACTS, pools, FLAVORS, scores, {})
    changed = [make_claim("a", pods=8), make_claim("b", pods=12)]
    slow = plan_all(changed, CONTRACTS, pools, FLAVORS, scores, {}, only={"b"}, previous=full)
    fast = plan_all(changed, CONTRACTS, pools, FLAVORS, scores, {}, only={"b"}, previous=full,
                    promised=promised_depth(plan_rows(full), {}))
    assert fast == slow
    assert promised_depth(plan_rows(full), {}) == {"spot0": 3, "spot1": 1}
    assert slow["b"].units() == {"spot0": 1, "spot1": 2}  # "gone" gave its spot1 unit back
