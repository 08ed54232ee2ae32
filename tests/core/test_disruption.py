"""The disruption seam (design: Disruption), pure: candidates per reason, one budget, replace
first."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.budgets import Allowance
from scoctl.core.budgets import allowed as allowed_for
from scoctl.core.disruption import (
    REPLACE_FIRST,
    Blocked,
    Disruption,
    DisruptionPlan,
    Unit,
    disruption,
    empty,
)
from scoctl.core.disruption import plan as plan_at
from scoctl.core.model.disruption import Budget, Units
from scoctl.core.model.vocabulary import BudgetLimit, DisruptionReason
from scoctl.core.timefmt import rfc3339

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
IDLE = 600.0  # timeouts.idle: 10m
TENTH = Budget(Units.share(10))  # the default: 10 % of a workload's registered units, every reason
EMPTY, NOTICED = DisruptionReason.EMPTY, DisruptionReason.NOTICED


def share(fraction: float, reasons: frozenset[DisruptionReason] = frozenset()) -> Budget:
    """The legacy form: `disruption_budget: 0.5` is [{units: "50%"}]."""
    return Budget(Units.share(str(fraction * 100)), reasons)


def plan(candidates: list[Disruption], **kwargs: Any) -> DisruptionPlan:
    return plan_at(candidates, now=NOW, **kwargs)


def allowed(workload: str, reason: DisruptionReason, *, registered: int,
            in_flight: list[Disruption], budgets: tuple[Budget, ...]) -> Allowance:
    return allowed_for(budgets, reason, registered=registered, now=NOW,
                       in_flight=[d.reason for d in in_flight if d.workload == workload])


def ago(seconds: float) -> str:
    return rfc3339(NOW - timedelta(seconds=seconds))


def make_unit(sid: str, *, workload: str = "web", pool: str = "p-spot",
              idle: float | None = 700) -> Unit:
    return Unit(sid, f"sco-{workload}-{sid}", workload, pool,
                ago(idle) if idle is not None else None)


def make_disruption(sid: str, reason: DisruptionReason = EMPTY, *, workload: str = "web",
                    pool: str = "p-spot") -> Disruption:
    return disruption(make_unit(sid, workload=workload, pool=pool), reason)


def ids(disruptions: tuple[Disruption, ...]) -> list[str]:
    return [d.server_id for d in disruptions]


# -- empty -------------------------------------------------------------------------------------

def test_an_idle_unit_the_plan_no_longer_holds_is_removed_without_a_replacement() -> None:
    found = empty([make_unit("a")], targets={}, held={"web": {"p-spot": 1}}, in_flight=(),
                  now=NOW, idle_timeout=IDLE)
    assert found == (Disruption("a", "sco-web-a", "web", "p-spot", EMPTY, replace_first=False),)


def test_units_the_plan_still_wants_busy_ones_and_recently_idle_ones_stay() -> None:
    units = [make_unit("a"), make_unit("b", idle=None), make_unit("c", idle=599)]
    assert empty(units, targets={"web": {"p-spot": 3}}, held={"web": {"p-spot": 3}},
                 in_flight=(), now=NOW, idle_timeout=IDLE) == ()
    assert ids(empty(units, targets={}, held={"web": {"p-spot": 3}}, in_flight=(), now=NOW,
                     idle_timeout=IDLE)) == ["a"]


def test_empty_takes_the_longest_idle_first_up_to_the_surplus_less_those_in_flight() -> None:
    units = [make_unit("a", idle=700), make_unit("b", idle=9000), make_unit("c", idle=800),
             make_unit("d", idle=800, pool="p-res")]
    held = {"web": {"p-spot": 4, "p-res": 1}}
    assert ids(empty(units, targets={"web": {"p-spot": 2}}, held=held, in_flight=(), now=NOW,
                     idle_timeout=IDLE)) == ["d", "b", "c"]
    draining = (make_disruption("z"),)  # held, and one of the p-spot surplus already
    assert ids(empty(units, targets={"web": {"p-spot": 2}}, held=held, in_flight=draining,
                     now=NOW, idle_timeout=IDLE)) == ["d", "b"]


# -- the budget --------------------------------------------------------------------------------

@pytest.mark.parametrize(("units", "share", "allowed"), [
    (0, 0.1, 0), (1, 0.1, 1), (10, 0.1, 1), (11, 0.1, 2), (22, 0.5, 11), (30, 0.1, 3)])
def test_the_disruption_budget_rounds_up_and_allows_at_least_one(units, share, allowed):
    assert Budget(Units.share(str(share * 100))).limit(units) == allowed


def test_the_budget_counts_disruptions_in_flight_not_per_pass() -> None:
    candidates = [make_disruption(s) for s in ("a", "b", "c")]
    first = plan(candidates, in_flight=(), registered={"web": 20}, budgets=(TENTH,))
    assert ids(first.start) == ["a", "b"]
    assert first.blocked == (Blocked(candidates[2], TENTH),)  # until a disruption ends
    # the next pass: a and b still draining, so nothing more starts
    second = plan(candidates[2:], in_flight=first.start, registered={"web": 20},
                  budgets=(TENTH,))
    assert second.start == () and [b.budget for b in second.blocked] == [TENTH]


def test_each_workload_has_its_own_budget() -> None:
    candidates = [make_disruption("a"), make_disruption("b", workload="api")]
    decided = plan(candidates, in_flight=(make_disruption("z"),),
                   registered={"web": 5, "api": 5}, budgets=(TENTH,))
    assert ids(decided.start) == ["b"] and ids(tuple(b.disruption for b in decided.blocked)) == [
        "a"]


def test_the_budget_that_leaves_the_least_room_blocks_and_is_named() -> None:
    halves, tenth_empty = share(0.5), share(0.1, frozenset({EMPTY}))
    assert allowed("web", EMPTY, registered=10, in_flight=[], budgets=(halves,)) == Allowance(
        5, halves, 0)
    assert allowed("web", EMPTY, registered=10, in_flight=[], budgets=(
        halves, tenth_empty)) == Allowance(1, tenth_empty, 1)
    decided = plan([make_disruption("a"), make_disruption("b")], in_flight=(),
                   registered={"web": 10}, budgets=(halves, tenth_empty))
    assert ids(decided.start) == ["a"] and decided.blocked[0].budget == tenth_empty


def test_a_budget_naming_reasons_counts_only_those() -> None:
    drifted = share(0.1, frozenset({DisruptionReason.DRIFTED}))
    flying = [make_disruption("z", DisruptionReason.DRIFTED)]
    assert allowed("web", EMPTY, registered=10, in_flight=flying,
                   budgets=(drifted,)) == Allowance(None)
    assert allowed("web", DisruptionReason.DRIFTED, registered=10, in_flight=flying,
                   budgets=(drifted,)) == Allowance(0, drifted, 0, by=BudgetLimit.UNITS)
    assert allowed("web", DisruptionReason.DRIFTED, registered=10,
                   in_flight=[make_disruption("y")], budgets=(drifted,)) == Allowance(1, drifted, 0)


def test_a_reclaim_notice_is_never_held_back_but_counts_against_budgets_naming_no_reason() -> None:
    noticed = [make_disruption(s, NOTICED) for s in ("a", "b", "c")]
    decided = plan([*noticed, make_disruption("d")], in_flight=(make_disruption("z"),),
                   registered={"web": 10}, budgets=(TENTH, share(0.1, frozenset({EMPTY}))))
    assert ids(decided.start) == ["a", "b", "c"] and decided.blocked[0].budget == TENTH
    empty_only = share(0.5, frozenset({EMPTY}))
    decided = plan([*noticed, make_disruption("d")], in_flight=(), registered={"web": 4},
                   budgets=(empty_only,))
    assert ids(decided.start) == ["a", "b", "c", "d"]


def test_every_reason_but_empty_underutilized_and_late_is_replaced_first() -> None:
    assert set(REPLACE_FIRST) == set(DisruptionReason)
    assert {r for r, first in REPLACE_FIRST.items() if not first} == {
        EMPTY, DisruptionReason.UNDERUTILIZED, DisruptionReason.LATE}
    assert make_disruption("a", NOTICED).replace_first


def test_no_budget_limits_nothing() -> None:
    candidates = [make_disruption(s) for s in "abc"]
    assert plan(candidates, in_flight=(), registered={}, budgets=()).start == tuple(candidates)


# -- properties --------------------------------------------------------------------------------

REASONS = st.sampled_from(list(DisruptionReason))
WORKLOADS = st.sampled_from(["web", "api"])
BUDGETS = st.lists(st.builds(share, st.sampled_from([0.0001, 0.1, 0.25, 0.5, 1.0]),
                             st.frozensets(REASONS, max_size=2)), max_size=3)


@st.composite
def disruptions(draw: st.DrawFn, prefix: str) -> list[Disruption]:
    pairs = draw(st.lists(st.tuples(WORKLOADS, REASONS), max_size=12))
    return [make_disruption(f"{prefix}{i}", reason, workload=workload)
            for i, (workload, reason) in enumerate(pairs)]


@given(disruptions("c"), disruptions("f"), BUDGETS,
       st.fixed_dictionaries({"web": st.integers(0, 40), "api": st.integers(0, 40)}))
def test_never_more_in_flight_than_a_budget_allows_and_noticed_never_held_back(
        candidates: list[Disruption], in_flight: list[Disruption], budgets: list[Budget],
        registered: dict[str, int]) -> None:
    decided = plan(candidates, in_flight=in_flight, registered=registered, budgets=budgets)
    blocked = [b.disruption for b in decided.blocked]
    # every candidate either starts or is blocked, in the order given
    assert sorted(ids(decided.start) + ids(tuple(blocked))) == sorted(ids(tuple(candidates)))
    assert list(decided.start) == [c for c in candidates if c in decided.start]
    assert all(c.reason is not NOTICED for c in blocked)
    for b in decided.blocked:
        assert b.budget in budgets and b.budget.counts(b.disruption.reason)
    for budget in budgets:
        before = Counter(d.workload for d in in_flight if budget.counts(d.reason))
        started = Counter(d.workload for d in decided.start
                          if d.reason is not NOTICED and budget.counts(d.reason))
        for workload, count in started.items():
            assert count <= max(0, budget.limit(registered[workload]) - before[workload])


@given(st.lists(st.tuples(st.sampled_from(["p-spot", "p-res"]),
                          st.sampled_from([None, 100.0, 600.0, 5000.0])), max_size=15),
       st.integers(0, 10), st.integers(0, 3))
def test_empty_never_exceeds_the_surplus_nor_takes_a_unit_idle_too_briefly(
        pools: list[tuple[str, float | None]], want: int, draining: int) -> None:
    units = [make_unit(f"u{i}", pool=pool, idle=idle) for i, (pool, idle) in enumerate(pools)]
    held = dict(Counter(pool for pool, _ in pools))
    held["p-spot"] = held.get("p-spot", 0) + draining
    flying = [make_disruption(f"d{i}") for i in range(draining)]
    found = empty(units, targets={"web": {"p-spot": want}}, held={"web": held},
                  in_flight=flying, now=NOW, idle_timeout=IDLE)
    by_id = {u.server_id: u for u in units}
    assert all(d.reason is EMPTY and not d.replace_first for d in found)
    assert all(by_id[d.server_id].idle_since is not None
               and by_id[d.server_id].idle_since <= ago(IDLE) for d in found)
    taken = Counter(d.pool for d in found)
    assert taken["p-spot"] <= max(0, held["p-spot"] - want - draining)
    assert taken["p-res"] <= held.get("p-res", 0)
