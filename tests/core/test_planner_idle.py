"""A shrunk claim gives back its idle units first, then worst key first (design: Disruption: "the
planner removes empty units first, then worst key, so fewer pods move")."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.model import Contract, Pool
from scoctl.core.planner import WorkloadPlan, plan_workload
from tests.core.builders_planner import make_claim
from tests.core.test_planner_properties import (
    FLAVORS,
    Scenario,
    _acquired,
    check_invariants,
    pools_strategy,
)

LOOSE = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)


def shrunk_scenario(pools: list[Pool], pods: int, fewer: int, flavor: str,
                    premium: float) -> tuple[Scenario, dict[str, int]]:
    """Reclaimable pools of one flavor, a plan for `pods` pods acquired, then the claim
    shrunk by `fewer` pods; returns the shrunk scenario and the units it held before."""
    pools = [replace(p, flavor=flavor, tier="reclaimable", depth=p.depth + 5) for p in pools]
    scores = {p.name: 0.5 + (i * 7 % 5) / 10 for i, p in enumerate(pools)}
    pods = max(pods, fewer + 1)
    s = Scenario(pools, scores, frozenset(), make_claim("w", pods=pods, cpu=1, memory_gi=2),
                 LOOSE, {}, {}, premium)
    first = s.plan()
    held = _acquired(s, first)
    return replace(held, claim=make_claim("w", pods=pods - fewer, cpu=1, memory_gi=2)), \
        first.units()


def plan_with_idle(s: Scenario, idle: dict[str, int]) -> WorkloadPlan:
    return plan_workload(s.claim, s.contract, s.pools, FLAVORS, s.scores, s.current,
                         s.depth_left, s.excluded, s.premium, idle=idle)


@settings(max_examples=150)
@given(pools_strategy(), st.integers(2, 40), st.integers(1, 39), st.sampled_from(sorted(FLAVORS)),
       st.sampled_from((0.0, 0.05, 0.5)), st.data())
def test_a_shrunk_claim_gives_back_idle_units_before_busy_ones(
    pools: list[Pool], pods: int, fewer: int, flavor: str, premium: float, data: st.DataObject
) -> None:
    shrunk, before = shrunk_scenario(pools, pods, fewer, flavor, premium)
    idle = {p: data.draw(st.integers(0, n), label=p) for p, n in sorted(before.items())}
    plan = plan_with_idle(shrunk, idle)
    check_invariants(shrunk, plan)
    after = plan.units()
    assert all(after.get(p, 0) <= n for p, n in before.items()), "a shrunk claim adds nothing"
    # the same flavor everywhere: the shrink gives back as many units, idle or not
    assert sum(after.values()) == sum(shrunk.plan().units().values())
    # within a pool, reconcile takes the idle units first (`core.disruption.empty`)
    removed = {p: n - after.get(p, 0) for p, n in before.items()}
    busy_gone = sum(max(0, removed[p] - idle[p]) for p in before)
    idle_left = sum(max(0, idle[p] - removed[p]) for p in before)
    assert not (busy_gone and idle_left), (before, idle, after)  # busy ones only once idle gone


@settings(max_examples=100)
@given(pools_strategy(), st.integers(2, 40), st.sampled_from(sorted(FLAVORS)), st.data())
def test_idle_units_change_nothing_when_the_claim_is_unchanged(
    pools: list[Pool], pods: int, flavor: str, data: st.DataObject
) -> None:
    held, before = shrunk_scenario(pools, pods, 0, flavor, 0.05)
    held = replace(held, claim=make_claim("w", pods=max(pods, 1), cpu=1, memory_gi=2))
    idle = {p: data.draw(st.integers(0, n), label=p) for p, n in sorted(before.items())}
    assert plan_with_idle(held, idle).units() == before == held.plan().units()


def test_without_idle_units_the_worst_keyed_pool_gives_back_first_with_them_the_idle_pool(
) -> None:
    pools = [Pool(name=n, region="r1", az="az1", flavor="m8", group=n, tier="reclaimable",
                  depth=8) for n in ("best", "worst")]
    scores = {"best": 0.9, "worst": 0.5}
    current = {"best": 3, "worst": 3}
    shrunk = make_claim("w", pods=16, cpu=1, memory_gi=2)  # 3 units of m8 hold 16 pods
    s = Scenario(pools, scores, frozenset(), shrunk, LOOSE, current, {}, 0.0)
    assert sum(s.plan().units().values()) == 3
    assert s.plan().units() == {"best": 3}  # worst key first: every unit of "worst" goes
    # two idle units in "best": they go first, then one of "worst"
    assert plan_with_idle(s, {"best": 2}).units() == {"best": 1, "worst": 2}
