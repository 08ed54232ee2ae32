"""Blast radius (design: Notices): what one pool or one correlation group reclaimed at once costs a
workload's plan, and whether its floor and coverage hold."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.blast import Holding, blast_radii, blast_radius, holdings_of_record
from scoctl.core.model import PlanUnitRecord, PlanWorkloadRecord
from scoctl.core.planner import plan_workload
from tests.core.builders_planner import T1, make_claim, make_flavor, make_pool


def test_each_pool_and_group_with_the_share_lost_and_what_still_holds() -> None:
    holdings = [Holding("res.a", "committed", "row-a", 2, 0.4),
                Holding("spot.a", "reclaimable", "row-a", 1, 0.2),
                Holding("spot.b", "reclaimable", "row-b", 3, 0.6)]
    blast = blast_radius(holdings, floor=0.3)
    assert (blast.coverage, blast.committed) == (1.2, 0.4)
    by_pool = {b.name: b for b in blast.pools}
    assert [b.name for b in blast.pools] == ["spot.b", "res.a", "spot.a"]  # biggest loss first
    assert math.isclose(by_pool["spot.b"].lost, 0.5)
    assert by_pool["spot.a"].coverage_holds and by_pool["spot.a"].floor_holds  # 1.0 left
    assert not by_pool["spot.b"].coverage_holds and by_pool["spot.b"].floor_holds
    assert not by_pool["res.a"].coverage_holds
    assert math.isclose(by_pool["res.a"].coverage_after, 0.8)
    assert not by_pool["res.a"].floor_holds  # committed 0.4 → 0: below the 30% floor
    groups = {b.name: b for b in blast.groups}
    assert groups["row-a"].units == 3 and math.isclose(groups["row-a"].lost, 0.5)
    assert math.isclose(groups["row-a"].coverage_after, 0.6) and not groups["row-a"].floor_holds
    assert blast.as_json()["groups"][0] == {
        "group": "row-a", "units": 3, "lost": 0.5, "coverage_after": 0.6,
        "committed_after": 0.0, "coverage_holds": False, "floor_holds": False}


def test_a_stored_plan_is_measured_with_its_claim_and_flavors() -> None:
    claim = make_claim("web", pods=8, cpu=4, memory_gi=16)
    flavors = {"c16": make_flavor("c16", 16, 64, reserve=False)}
    pools = [make_pool("a", flavor="c16", group="g1"), make_pool("b", flavor="c16", group="g2")]
    record = PlanWorkloadRecord(
        workload="web", generation=1, claim_version=1, contract="T1", ranking="r", feasible=True,
        degraded=False, reasons=(),
        pools=(PlanUnitRecord("a", "reclaimable", "g1", 1, 0.5, 0.9),
               PlanUnitRecord("b", "reclaimable", "g2", 1, 0.5, 0.8)))
    [a, b] = holdings_of_record(record, claim, flavors, pools)
    assert (a.coverage, b.coverage) == (0.5, 0.5)  # 4 of the 8 pods per instance
    radii = blast_radii({"web": record, "lost": record}, [claim], {}, flavors, pools,
                        {"T1": 0.0})
    assert set(radii) == {"web"}  # a plan without its claim gets no blast radius
    assert [round(line.lost, 3) for line in radii["web"].pools] == [0.5, 0.5]


@given(st.integers(4, 60), st.sampled_from([1, 2, 4]))
def test_property_losses_add_up_and_what_is_left_is_the_rest(pods: int, cpu: int) -> None:
    flavors = {f.name: f for f in (make_flavor("m8", 8, 32), make_flavor("l16", 16, 64))}
    pools = [make_pool(f"p{i}.az{i % 3}.x", flavor="m8" if i % 2 else "l16", group=f"g{i % 3}",
                       tier="committed" if i == 0 else "reclaimable") for i in range(9)]
    plan = plan_workload(make_claim("w", pods=pods, cpu=cpu, memory_gi=cpu * 2), T1, pools,
                         flavors, {p.name: 0.5 + i / 100 for i, p in enumerate(pools)}, {},
                         {p.name: 10 for p in pools}, frozenset(), 0.05)
    holdings = [Holding(p.pool, p.tier, p.group, p.units, p.coverage) for p in plan.pools]
    assert holdings  # the depth always covers these claims
    blast = blast_radius(holdings, T1.floor)
    assert math.isclose(sum(b.lost for b in blast.pools), 1.0)
    assert math.isclose(sum(b.lost for b in blast.groups), 1.0)
    for line in (*blast.pools, *blast.groups):
        assert math.isclose(line.coverage_after, blast.coverage * (1 - line.lost),
                            abs_tol=1e-9)
        assert line.coverage_holds == (line.coverage_after >= 1 - 1e-9)
