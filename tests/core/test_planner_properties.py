"""Hypothesis properties of the planner: design: Planner invariants 1–6 over random inputs."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.model import Claim, Contract, Flavor, Pool, Tier, flavor_allocatable
from scoctl.core.planner import (
    EPS,
    WorkloadPlan,
    coverage,
    initial_depth,
    plan_all,
    plan_workload,
    planning_order,
)
from scoctl.core.quantity import fits
from tests.core.builders_planner import make_claim, make_flavor, make_pool

FLAVORS: dict[str, Flavor] = {
    f.name: f
    for f in (
        make_flavor("s2", 2, 8),
        make_flavor("m4", 4, 16, reserve=False),
        make_flavor("m8", 8, 32),
        make_flavor("l16", 16, 64),
        make_flavor("r8", 8, 64, reserve=False),
        make_flavor("x32", 32, 128),
    )
}
SHAPES = ((1, 2), (1, 4), (2, 8), (4, 16), (6, 20))


@dataclass(frozen=True)
class Scenario:
    pools: list[Pool]
    scores: dict[str, float]
    excluded: frozenset[str]
    claim: Claim
    contract: Contract
    current: dict[str, int]
    depth_left: dict[str, int]
    premium: float

    def plan(self, **changes: object) -> WorkloadPlan:
        s = replace(self, **changes)  # type: ignore[arg-type]
        return plan_workload(s.claim, s.contract, s.pools, FLAVORS, s.scores, s.current,
                             s.depth_left, s.excluded, s.premium)


@st.composite
def pools_strategy(draw: st.DrawFn, max_pools: int = 9) -> list[Pool]:
    n = draw(st.integers(1, max_pools))
    groups = draw(st.integers(1, 4))
    pools = []
    for i in range(n):
        tier: Tier = draw(st.sampled_from(("reclaimable", "reclaimable", "committed")))
        pools.append(make_pool(
            f"p{i}",
            flavor=draw(st.sampled_from(sorted(FLAVORS))),
            group=f"g{draw(st.integers(0, groups - 1))}",
            tier=tier,
            depth=draw(st.integers(0, 6)),
        ))
    return pools


@st.composite
def contracts(draw: st.DrawFn, name: str = "T1") -> Contract:
    return Contract(
        name=name,
        floor=draw(st.sampled_from((0.0, 0.1, 0.3, 0.5))),
        pool_cap=draw(st.sampled_from((0.1, 0.15, 0.3, 0.5, 1.0))),
        group_cap=draw(st.sampled_from((0.2, 0.3, 0.6, 1.0))),
        min_pools=draw(st.integers(1, 5)),
        strict=draw(st.booleans()),
    )


@st.composite
def claims(draw: st.DrawFn, workload: str = "w", contract: str = "T1") -> Claim:
    cpu, mem = draw(st.sampled_from(SHAPES))
    return make_claim(workload, pods=draw(st.integers(1, 40)), cpu=cpu, memory_gi=mem,
                      contract=contract,
                      tolerates_reclaimable=draw(st.sampled_from((True, True, True, False))))


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    pools = draw(pools_strategy())
    names = [p.name for p in pools]
    scores = {n: draw(st.sampled_from((0.5, 0.6, 0.7, 0.8, 0.9))) for n in names
              if draw(st.integers(0, 9)) > 0}
    excluded = frozenset(n for n in names if draw(st.integers(0, 9)) == 0)
    current = {n: draw(st.integers(1, 4)) for n in names if draw(st.integers(0, 2)) == 0}
    depth_left = {p.name: draw(st.integers(0, p.depth)) for p in pools
                  if draw(st.booleans())}
    return Scenario(pools, scores, excluded, draw(claims()), draw(contracts()), current,
                    depth_left, draw(st.sampled_from((0.0, 0.05, 0.5))))


# --------------------------------------------------------------------------- the invariants


def _eligible(s: Scenario, pool: Pool, *, keeping: bool = False) -> bool:
    """The pool may take new units of the claim (with `keeping`: may keep current ones, which
    an excluded pool does, design: Notices)."""
    flavor = FLAVORS[pool.flavor]
    return (
        (keeping or pool.name not in s.excluded)
        and pool.name in s.scores
        and (s.claim.tolerates_reclaimable or pool.tier == "committed")
        and fits(s.claim.largest_pod, flavor_allocatable(flavor))
        and coverage(flavor, s.claim) > 0
    )


def _room(s: Scenario, pool: Pool, units: int) -> int:
    """New units the pool could still give this workload beyond `units`."""
    return s.current.get(pool.name, 0) + max(s.depth_left.get(pool.name, pool.depth), 0) - units


def check_invariants(s: Scenario, plan: WorkloadPlan) -> None:
    """Every invariant of design: Planner holds, or the plan says why it cannot."""
    c = s.contract
    by_name = {p.name: p for p in s.pools}
    units = plan.units()
    cov = {p.name: coverage(FLAVORS[p.flavor], s.claim) for p in s.pools}
    total = math.fsum(n * cov[p] for p, n in units.items())
    committed = math.fsum(n * cov[p] for p, n in units.items() if by_name[p].tier == "committed")
    reclaimable = {p: n for p, n in units.items() if by_name[p].tier == "reclaimable"}
    assert math.isclose(plan.coverage, total, abs_tol=1e-12)
    assert math.isclose(plan.committed_coverage, committed, abs_tol=1e-12)
    covered = total >= 1 - EPS

    # 3: eligible pools only (an excluded one keeps at most its current units); depth respected.
    for p in plan.pools:
        pool = by_name[p.pool]
        assert p.units > 0 and _eligible(s, pool, keeping=True), p
        assert _eligible(s, pool) or p.units <= s.current.get(p.pool, 0), p
        assert _room(s, pool, p.units) >= 0 or p.units <= s.current.get(p.pool, 0), p
        assert p.tier == pool.tier and p.group == pool.group
        assert math.isclose(p.share, p.coverage / max(plan.coverage, 1.0), abs_tol=1e-12)

    # 1: covered, without waste.
    if covered:
        if committed >= 1 - EPS:
            assert not reclaimable, "committed units alone cover the claim"
        for p, n in reclaimable.items():
            if n >= 2 or len(reclaimable) > c.min_pools:
                assert total - cov[p] < 1 - EPS, f"{p}: a reclaimable unit is waste"
        for p in units:
            if by_name[p].tier == "committed":
                assert total - cov[p] < 1 - EPS or committed - cov[p] < c.floor - EPS, p

    # 2: the floor, or a reported shortfall with no committed room left.
    if committed < c.floor - EPS:
        assert math.isclose(plan.floor_shortfall, c.floor - committed, abs_tol=1e-12)
        assert any(r.startswith("floor shortfall") for r in plan.reasons)
        for pool in s.pools:
            if pool.tier == "committed" and _eligible(s, pool):
                assert _room(s, pool, units.get(pool.name, 0)) <= 0, pool.name
    else:
        assert plan.floor_shortfall == 0

    # 3: caps, read from the plan's shares; 6: or the degraded reason per relaxation.
    over_pool = [p for p in plan.pools if p.tier == "reclaimable" and p.share > c.pool_cap + EPS]
    groups: dict[str, float] = {}
    for p in plan.pools:
        if p.tier == "reclaimable":
            groups[p.group] = groups.get(p.group, 0.0) + p.share
    over_group = [g for g, share in groups.items() if share > c.group_cap + EPS]
    few_pools = 0 < len(reclaimable) < c.min_pools
    text = " | ".join(plan.reasons)
    if c.strict:
        assert not plan.degraded
        assert not over_pool and not over_group
        if plan.feasible:
            assert covered and not few_pools
        else:
            assert plan.reasons and (not covered or few_pools)
    else:
        assert plan.feasible == covered
        assert plan.degraded == any(
            r.split(" relaxed")[0] in ("min_pools", "group cap", "pool cap")
            for r in plan.reasons)
        if over_pool:
            assert "pool cap relaxed" in text
        if over_group:
            assert "group cap relaxed" in text
        if few_pools:
            assert "min_pools relaxed" in text
        if not plan.degraded:
            for p in plan.pools:  # the enforced form: coverage against the claim itself
                if p.tier == "reclaimable" and c.pool_cap < 1:
                    assert p.coverage <= c.pool_cap + EPS, p
    # 6: depth exhausted everywhere → infeasible with the shortfall.
    if not covered:
        assert not plan.feasible
        assert any("short)" in r for r in plan.reasons)
        if not c.strict:
            for pool in s.pools:
                if _eligible(s, pool):
                    assert _room(s, pool, units.get(pool.name, 0)) <= 0, pool.name


# --------------------------------------------------------------------------- properties


@settings(max_examples=400)
@given(scenarios())
def test_every_plan_keeps_the_invariants_or_says_why(s: Scenario) -> None:
    check_invariants(s, s.plan())


@settings(max_examples=150)
@given(scenarios(), st.randoms(use_true_random=False))
def test_same_inputs_give_the_same_plan_whatever_their_order(s: Scenario, rnd) -> None:
    shuffled = list(s.pools)
    rnd.shuffle(shuffled)
    current = dict(sorted(s.current.items(), reverse=True))
    assert s.plan() == s.plan()
    assert s.plan(pools=shuffled, current=current) == s.plan()


@settings(max_examples=300)
@given(scenarios(), st.data())
def test_pools_the_pods_rule_out_plan_as_if_they_were_not_configured(s: Scenario,
                                                                    data: st.DataObject) -> None:
    # design: Constraints: a pool the pods rule out is not eligible, and Planner: the key scales
    # depth by
    # the deepest pool the claim may use; a soft term orders the pools left the same way
    names = [p.name for p in s.pools]
    ruled = data.draw(st.sets(st.sampled_from(names)), label="ruled out")
    preferred = data.draw(st.dictionaries(st.sampled_from(names), st.integers(1, 3)),
                          label="preferred")
    soft = replace(s.claim, preferred=preferred)
    got = s.plan(claim=replace(soft, ineligible=dict.fromkeys(sorted(ruled), "nodeSelector")))
    want = s.plan(claim=soft, pools=[p for p in s.pools if p.name not in ruled])
    assert got.pools == want.pools
    assert (got.coverage, got.committed_coverage, got.feasible, got.degraded) == (
        want.coverage, want.committed_coverage, want.feasible, want.degraded)
    if want.pools:  # with no pool at all, the reason lists the pools ruled out
        assert got.reasons == want.reasons


@settings(max_examples=300)
@given(scenarios(), st.data())
def test_a_plan_lists_its_pools_in_the_order_soft_terms_give(s: Scenario,
                                                             data: st.DataObject) -> None:
    # design: Constraints: preferred terms put the pools they match first, the heaviest first, the
    # key ordering pools of equal weight (names, equal keys); a plan lists its pools
    # committed first, each tier in that order
    names = [p.name for p in s.pools]
    weight = data.draw(st.dictionaries(st.sampled_from(names), st.integers(-2, 3)),
                       label="preferred")
    plan = s.plan(claim=replace(s.claim, preferred=weight))
    listed = [(p.tier != "committed", -weight.get(p.pool, 0), -p.key, p.pool)
              for p in plan.pools]
    assert listed == sorted(listed)


def _acquired(s: Scenario, plan: WorkloadPlan) -> Scenario:
    """The scenario once the plan's units exist: they are current, their depth is used."""
    units = plan.units()
    depth_left = {}
    for pool in s.pools:
        left = max(s.depth_left.get(pool.name, pool.depth), 0)
        new = max(units.get(pool.name, 0) - s.current.get(pool.name, 0), 0)
        depth_left[pool.name] = left - new
    return replace(s, current=units, depth_left=depth_left)


@settings(max_examples=300)
@given(scenarios())
def test_an_unchanged_claim_keeps_its_units(s: Scenario) -> None:
    first = s.plan()
    after = _acquired(s, first)
    assert after.plan() == first


@settings(max_examples=150)
@given(scenarios(), st.integers(1, 40))
def test_a_grown_claim_adds_units_and_keeps_the_ones_it_holds(s: Scenario, more: int) -> None:
    first = s.plan()
    held = _acquired(s, first)
    grown_claim = make_claim("w", pods=s.claim.pods + more,
                             cpu=s.claim.largest_pod["cpu"] // 1000,
                             memory_gi=s.claim.largest_pod["memory"] // 2**30,
                             tolerates_reclaimable=s.claim.tolerates_reclaimable)
    grown = replace(held, claim=grown_claim)
    plan = grown.plan()
    check_invariants(grown, plan)
    if first.degraded or not first.feasible:
        return  # a degraded plan may be rebuilt within the caps once the claim allows it
    before, after = first.units(), plan.units()
    cov = {p.name: coverage(FLAVORS[p.flavor], grown_claim) for p in s.pools}
    added = [p for p in after if after[p] > before.get(p, 0)]
    tier = {p.name: p.tier for p in s.pools}
    spread_anew = not any(tier[p] == "reclaimable" for p in before)
    for pool, n in before.items():
        if after.get(pool, 0) < n:
            # only a larger added unit can make a held one redundant, or reclaimable units newly
            # spread over min_pools pools can make committed units above the floor redundant
            assert any(cov[q] > cov[pool] for q in added) or (
                tier[pool] == "committed" and spread_anew), (pool, before, after)


@settings(max_examples=150)
@given(pools_strategy(), st.integers(2, 40), st.integers(1, 39), st.sampled_from(sorted(FLAVORS)),
       st.sampled_from((0.0, 0.05, 0.5)))
def test_a_shrunk_claim_gives_back_worst_keyed_units_first(
    pools: list[Pool], pods: int, fewer: int, flavor: str, premium: float
) -> None:
    pools = [replace(p, flavor=flavor, tier="reclaimable", depth=p.depth + 5) for p in pools]
    scores = {p.name: 0.5 + (i * 7 % 5) / 10 for i, p in enumerate(pools)}
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    pods = max(pods, fewer + 1)
    s = Scenario(pools, scores, frozenset(), make_claim("w", pods=pods, cpu=1, memory_gi=2),
                 loose, {}, {}, premium)
    first = s.plan()
    shrunk = replace(_acquired(s, first), claim=make_claim("w", pods=pods - fewer, cpu=1,
                                                           memory_gi=2))
    plan = shrunk.plan()
    check_invariants(shrunk, plan)
    before, after = first.units(), plan.units()
    assert all(after.get(p, 0) <= n for p, n in before.items()), "a shrunk claim adds nothing"
    rank = {p.pool: (-p.key, p.pool) for p in first.pools}
    lost = [p for p, n in before.items() if after.get(p, 0) < n]
    kept = list(after)
    for p in lost:
        for q in kept:
            assert q == p or rank[q] < rank[p], f"{q} kept while better-keyed {p} gave units back"


# --------------------------------------------------------------------------- plan_all


@st.composite
def fleets(draw: st.DrawFn, ample: bool = False):
    pools = draw(pools_strategy(max_pools=8))
    if ample:
        pools = [replace(p, depth=500) for p in pools]
    names = [p.name for p in pools]
    scores = {n: draw(st.sampled_from((0.5, 0.7, 0.9))) for n in names}
    contract_map = {"T1": draw(contracts("T1")), "T2": draw(contracts("T2")),
                    "T10": draw(contracts("T10"))}
    n = draw(st.integers(1, 5))
    claim_list = [draw(claims(f"w{i}", draw(st.sampled_from(sorted(contract_map)))))
                  for i in range(n)]
    current = {c.workload: {p: draw(st.integers(1, 3)) for p in names
                            if draw(st.integers(0, 3)) == 0}
               for c in claim_list}
    return pools, scores, contract_map, claim_list, current


def _plan_all(fleet, claim_list=None, **kw):
    pools, scores, contract_map, base_claims, current = fleet
    return plan_all(claim_list or base_claims, contract_map, pools, FLAVORS, scores, current,
                    **kw)


@settings(max_examples=120)
@given(fleets(), st.data())
def test_plans_share_pool_depth_in_tier_then_slug_order(fleet, data) -> None:
    pools, scores, contract_map, claim_list, current = fleet
    plans = _plan_all(fleet)
    assert list(plans) == [c.workload for c in planning_order(claim_list)]
    for pool in pools:
        new = sum(max(plans[c.workload].units().get(pool.name, 0)
                      - current[c.workload].get(pool.name, 0), 0) for c in claim_list)
        assert new <= pool.depth, pool.name
    # each workload's plan is what it gets alone with the depth its predecessors left (a
    # committed pool's less the units every workload holds there)
    depth_left = initial_depth(pools, current)
    for claim in planning_order(claim_list):
        alone = plan_workload(claim, contract_map[claim.contract], pools, FLAVORS, scores,
                              current[claim.workload], depth_left)
        assert alone == plans[claim.workload]
        for p in alone.pools:
            depth_left[p.pool] -= max(p.units - current[claim.workload].get(p.pool, 0), 0)


@settings(max_examples=120)
@given(fleets(), st.data())
def test_replanning_some_workloads_of_a_full_plan_changes_nothing(fleet, data) -> None:
    full = _plan_all(fleet)
    only = data.draw(st.sets(st.sampled_from(sorted(full))))
    assert _plan_all(fleet, only=only, previous=full) == full


@settings(max_examples=100)
@given(fleets(), st.data())
def test_replanning_the_last_workload_agrees_with_a_full_replan(fleet, data) -> None:
    pools, scores, contract_map, claim_list, current = fleet
    full = _plan_all(fleet)
    last = planning_order(claim_list)[-1]
    changed = [data.draw(claims(last.workload, last.contract)) if c is last else c
               for c in claim_list]
    incremental = _plan_all(fleet, changed, only={last.workload}, previous=full)
    assert incremental == _plan_all(fleet, changed)


@settings(max_examples=100)
@given(fleets(ample=True), st.data())
def test_with_ample_depth_any_one_replan_agrees_with_a_full_replan(fleet, data) -> None:
    pools, scores, contract_map, claim_list, current = fleet
    full = _plan_all(fleet)
    target = data.draw(st.sampled_from(claim_list))
    changed = [data.draw(claims(c.workload, c.contract)) if c is target else c
               for c in claim_list]
    incremental = _plan_all(fleet, changed, only={target.workload}, previous=full)
    assert incremental == _plan_all(fleet, changed)


@settings(max_examples=200)
@given(fleets(), st.data())
def test_no_generation_ever_holds_more_committed_units_than_the_pools_depth(fleet, data) -> None:
    """Generations over a fleet that acquires each plan: claims grow and shrink, notices
    exclude pools (and take the noticed unit away), some generations are incremental. A
    committed pool's depth is the reserved instances it holds, shared by every workload: the
    units all plans give it never exceed it (issue 28 item 8)."""
    pools, scores, contract_map, claim_list, _ = fleet
    names = [p.name for p in pools]
    claims_now = list(claim_list)
    current: dict[str, dict[str, int]] = {}  # the fleet holds what the last generation planned
    excluded: set[str] = set()
    plans: dict[str, WorkloadPlan] | None = None
    for _ in range(data.draw(st.integers(2, 5), label="generations")):
        changed: set[str] = set()
        if plans and data.draw(st.booleans(), label="a notice"):
            noticed = data.draw(st.sampled_from(names), label="noticed pool")
            excluded.add(noticed)
            holders = sorted(w for w, units in current.items() if units.get(noticed))
            if holders:
                slug = data.draw(st.sampled_from(holders), label="noticed workload")
                current[slug] = dict(current[slug], **{noticed: current[slug][noticed] - 1})
                changed.add(slug)
        if data.draw(st.booleans(), label="a claim changes"):
            target = data.draw(st.sampled_from(claims_now), label="changed claim")
            claims_now = [data.draw(claims(c.workload, c.contract)) if c is target else c
                          for c in claims_now]
            changed.add(target.workload)
        incremental = plans is not None and data.draw(st.booleans(), label="incremental")
        plans = plan_all(claims_now, contract_map, pools, FLAVORS, scores, current,
                         excluded=excluded, only=changed if incremental else None,
                         previous=plans if incremental else None)
        for pool in pools:
            if pool.tier == "committed":
                held = sum(plan.units().get(pool.name, 0) for plan in plans.values())
                assert held <= pool.depth, (pool.name, {w: p.units() for w, p in plans.items()})
        current = {slug: plan.units() for slug, plan in plans.items()}  # acquired
