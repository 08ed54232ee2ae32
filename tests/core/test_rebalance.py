"""Rebalance (design: Rebalance): triggers, moves and the stabilize window, by example and by
Hypothesis properties over the planner's generated scenarios."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core import rebalance
from scoctl.core.model import Contract, Flavor
from scoctl.core.model.disruption import Rebalance
from scoctl.core.model.vocabulary import RebalanceTrigger
from scoctl.core.planner import WorkloadPlan, plan_all, plan_fresh, plan_workload
from scoctl.core.rebalance import Held
from scoctl.core.timefmt import rfc3339
from tests.core.builders_planner import make_claim, make_flavor, make_pool
from tests.core.test_planner_properties import FLAVORS, Scenario, check_invariants, scenarios

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
OLD = rfc3339(NOW - timedelta(hours=3))
SIX: dict[str, Flavor] = {"m8": make_flavor("m8", 8, 32), "c4": make_flavor("c4", 4, 16)}
POOLS = [make_pool(f"p{i}", flavor="m8", group=f"g{i}", depth=10) for i in range(6)]
RESERVED = make_pool("res", flavor="m8", group="gr", tier="committed", depth=20)
SCORES = {p.name: round(0.9 - 0.05 * i, 2) for i, p in enumerate(POOLS)} | {"res": 0.5}
SPREAD = Contract("T1", floor=0.0, pool_cap=0.3, group_cap=0.3, min_pools=4)
CLAIM = make_claim("w", pods=12, cpu=2, memory_gi=6)
KNOBS = Rebalance(stabilize=600.0, min_age=3600.0, min_gain=0.1)


def _plan(current: dict[str, int], excluded: set[str], contract: Contract = SPREAD,
          pools: list | None = None) -> WorkloadPlan:
    return plan_workload(CLAIM, contract, pools or POOLS, SIX, SCORES, current, {},
                         excluded=excluded)


def _fresh(current: dict[str, int], contract: Contract = SPREAD,
           pools: list | None = None) -> WorkloadPlan:
    return plan_fresh([CLAIM], {"T1": contract}, pools or POOLS, SIX, SCORES,
                      {"w": current})["w"]


def _held(units: dict[str, int], created: str = OLD) -> list[Held]:
    return [Held(f"{pool}-{i}", f"w-{pool}-{i}", pool, created)
            for pool, n in sorted(units.items()) for i in range(n)]


def test_a_plan_degraded_by_exclusions_is_degraded_and_the_fresh_plan_is_not() -> None:
    degraded = _plan({}, excluded={"p0", "p1", "p2", "p3"})
    assert degraded.degraded and degraded.units() == {"p4": 2, "p5": 2}
    # while the exclusions hold, the fresh plan sees them too: nothing better to move to
    fresh = plan_fresh([CLAIM], {"T1": SPREAD}, POOLS, SIX, SCORES, {"w": degraded.units()},
                       excluded={"p0", "p1", "p2", "p3"})["w"]
    assert rebalance.triggers(degraded, fresh, SPREAD, 0.1) == ()
    # once they lapse, the current plan (as stored) is degraded and the fresh one is not
    fresh = _fresh(degraded.units())
    assert not fresh.degraded and fresh.units() == {"p0": 1, "p1": 1, "p2": 1, "p3": 1}
    found = rebalance.triggers(degraded, fresh, SPREAD, 0.1)
    assert found[:4] == (RebalanceTrigger.DEGRADED, RebalanceTrigger.POOL_CAP,
                         RebalanceTrigger.GROUP_CAP, RebalanceTrigger.MIN_POOLS)


def test_the_stable_replan_keeps_worse_pools_and_the_gain_trigger_moves_them() -> None:
    degraded = _plan({}, excluded={"p0", "p1", "p2", "p3"})
    stable = _plan(degraded.units(), excluded=set())  # the planner keeps p4 and p5 units
    assert not stable.degraded and {"p4", "p5"} <= set(stable.units())
    fresh = _fresh(stable.units())
    assert rebalance.triggers(stable, fresh, SPREAD, 0.1) == ()  # gain 0.05 < 0.1
    assert rebalance.triggers(stable, fresh, SPREAD, 0.04) == (RebalanceTrigger.GAIN,)
    moved = rebalance.moves(stable, fresh, _held(stable.units()), now=NOW, min_age=3600)
    assert [m.pool for m in moved] == ["p5", "p4"]  # worst key first
    assert rebalance.into(stable, fresh) == {"p2": 1, "p3": 1}


def test_committed_units_beyond_the_floor_are_a_trigger() -> None:
    pools = [*POOLS, RESERVED]
    # every reclaimable pool excluded: committed units cover the claim (beyond the 0 floor)
    held = _plan({}, excluded={p.name for p in POOLS}, pools=pools)
    assert set(held.units()) == {"res"}
    fresh = _fresh(held.units(), pools=pools)
    assert "res" not in fresh.units()
    assert RebalanceTrigger.COMMITTED in rebalance.triggers(held, fresh, SPREAD, 0.1)


def test_a_trigger_must_hold_for_stabilize_before_the_moves_are_planned() -> None:
    degraded = _plan({}, excluded={"p0", "p1", "p2", "p3"})
    fresh = _fresh(degraded.units())
    held = _held(degraded.units())
    first = rebalance.decide("w", degraded, fresh, SPREAD, held, None, KNOBS, now=NOW)
    assert first.pending is not None and not first.planned and first.moves == ()
    assert first.pending.trigger is RebalanceTrigger.DEGRADED and first.pending.since == NOW
    assert len(first.pending.moves) == 4
    later = NOW + timedelta(seconds=599)
    second = rebalance.decide("w", degraded, fresh, SPREAD, held, first.pending, KNOBS,
                              now=later)
    assert not second.planned and second.pending == replace(first.pending)
    done = rebalance.decide("w", degraded, fresh, SPREAD, held, second.pending, KNOBS,
                            now=NOW + timedelta(seconds=600))
    assert done.planned and done.moves == first.pending.moves
    assert done.into == {"p0": 1, "p1": 1, "p2": 1, "p3": 1}
    # the trigger lapses (the fleet matches the fresh plan): nothing pending any more
    again = rebalance.decide("w", fresh, _fresh(fresh.units()), SPREAD,
                             _held(fresh.units()), done.pending, KNOBS, now=NOW)
    assert again.pending is None


def test_young_units_and_units_moved_within_min_age_do_not_move() -> None:
    degraded = _plan({}, excluded={"p0", "p1", "p2", "p3"})
    fresh = _fresh(degraded.units())
    young = rfc3339(NOW - timedelta(minutes=30))
    held = [Held("a", "a", "p4", young), Held("b", "b", "p4", OLD),
            Held("c", "c", "p5", OLD, moved_at=young), Held("d", "d", "p5", OLD)]
    moved = rebalance.moves(degraded, fresh, held, now=NOW, min_age=3600)
    assert [m.server_id for m in moved] == ["d", "b"]
    only_young = [Held("a", "a", "p4", young)]
    decided = rebalance.decide("w", degraded, fresh, SPREAD, only_young, None, KNOBS, now=NOW)
    assert decided.pending is None  # nothing old enough: nothing pending


def test_a_strict_contract_never_rebalances_into_a_degraded_plan() -> None:
    strict = replace(SPREAD, strict=True, min_pools=8)  # 6 pools cannot give 8
    current = _plan({}, excluded=set(), contract=replace(SPREAD, min_pools=8))
    fresh = _fresh(current.units(), contract=strict)
    assert not fresh.feasible
    assert rebalance.triggers(current, fresh, strict, 0.0) == ()


# --------------------------------------------------------------------------- properties


def _fresh_of(s: Scenario, current: dict[str, int]) -> WorkloadPlan:
    """`plan_fresh` for one scenario (its `depth_left` is what is left beyond `current`)."""
    pools = [replace(p, depth=s.depth_left.get(p.name, p.depth)) for p in s.pools]
    return plan_fresh([s.claim], {s.claim.contract: s.contract}, pools, FLAVORS, s.scores,
                      {s.claim.workload: current}, s.excluded, s.premium)[s.claim.workload]


def _keeps(plan: WorkloadPlan) -> bool:
    return plan.feasible and not plan.degraded


@st.composite
def degraded_then_lapsed(draw: st.DrawFn) -> tuple[Scenario, WorkloadPlan]:
    """A scenario whose workload was planned while more pools were excluded (a notice, a
    capacity fault) and re-planned, stably, once they lapsed: the plan rebalance looks at."""
    s = draw(scenarios())
    extra = frozenset(p.name for p in s.pools if draw(st.booleans()))
    before = s.plan(excluded=s.excluded | extra)
    return s, s.plan(current=before.units())


@settings(max_examples=200, deadline=None)
@given(degraded_then_lapsed(), st.sampled_from((0.0, 0.05, 0.1)))
def test_a_rebalance_never_breaks_an_invariant_the_current_plan_keeps(
        case: tuple[Scenario, WorkloadPlan], min_gain: float) -> None:
    s, current = case
    s = replace(s, current=current.units())
    fresh = _fresh_of(s, current.units())
    found = rebalance.triggers(current, fresh, s.contract, min_gain)
    if not found:
        return
    # the plan moved into is a plan of Planner over the same inputs, as if holding no unit ...
    pools = [replace(p, depth=s.depth_left.get(p.name, p.depth) + current.units().get(p.name, 0))
             for p in s.pools]
    check_invariants(replace(s, pools=pools, current={}, depth_left={}), fresh)
    # ... that keeps its contract: covered, within every cap, in min_pools pools
    assert _keeps(fresh)
    if _keeps(current):
        assert fresh.coverage >= 1 - 1e-9
    # and the units that leave plus the replacements are the fresh plan exactly
    held = _held(current.units())
    moved = rebalance.moves(current, fresh, held, now=NOW, min_age=0)
    after = dict(current.units())
    for m in moved:
        after[m.pool] -= 1
    for pool, n in rebalance.into(current, fresh).items():
        after[pool] = after.get(pool, 0) + n
    assert {p: n for p, n in after.items() if n} == fresh.units()


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_a_fleet_that_matches_its_fresh_plan_gets_no_moves(s: Scenario) -> None:
    fresh = _fresh_of(s, {})
    # the workload holds exactly its fresh plan; its re-plan keeps it (no churn), and so
    # does the rebalance
    held = fresh.units()
    current = s.plan(current=held, depth_left={})
    assert rebalance.triggers(current, _fresh_of(s, held), s.contract, 0.0) == ()
    decided = rebalance.decide(s.claim.workload, current, _fresh_of(s, held), s.contract,
                               _held(held), None, replace(KNOBS, stabilize=0, min_gain=0),
                               now=NOW)
    assert decided.pending is None and decided.moves == ()


@settings(max_examples=100, deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_moves_are_deterministic(s: Scenario, rnd: random.Random) -> None:
    current = s.plan()
    fresh = _fresh_of(s, current.units())
    held = [replace(h, created=rfc3339(NOW - timedelta(hours=1 + i % 3)))
            for i, h in enumerate(_held(current.units()))]
    shuffled = list(held)
    rnd.shuffle(shuffled)
    first = rebalance.decide("w", current, fresh, s.contract, held, None,
                             replace(KNOBS, stabilize=0), now=NOW)
    again = rebalance.decide("w", current, _fresh_of(s, current.units()), s.contract,
                             shuffled, None, replace(KNOBS, stabilize=0), now=NOW)
    assert first == again
    assert len({m.server_id for m in first.moves}) == len(first.moves)
    extra = rebalance.surplus(current, fresh)
    for pool in {m.pool for m in first.moves}:
        assert sum(m.pool == pool for m in first.moves) <= extra[pool]


@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_plan_all_gives_the_same_fresh_plans_as_plan_fresh(s: Scenario) -> None:
    pools = [replace(p, depth=s.depth_left.get(p.name, p.depth)) for p in s.pools]
    current = {s.claim.workload: s.current}
    contracts = {s.claim.contract: s.contract}
    fresh: dict[str, WorkloadPlan] = {}
    plan_all([s.claim], contracts, pools, FLAVORS, s.scores, current, s.excluded, s.premium,
             fresh=fresh)
    if not any(s.current.values()):  # nothing to move: no fresh plan is made
        assert fresh == {}
        return
    assert fresh == plan_fresh([s.claim], contracts, pools, FLAVORS, s.scores, current,
                               s.excluded, s.premium)
