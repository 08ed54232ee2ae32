"""Showback (`core.cost`): unit-hours and cost from unit lifetimes clipped to the window, the
pool's price over its flavor's times its tier's factor, and efficiency as the claim's
requested resource-hours over its units' allocatable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.cost import Lifetime, Prices, costs
from scoctl.core.model import Flavor, Pool
from scoctl.core.model.controls import ClaimStep

T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)
FLAVORS = {"f4": Flavor("f4", 4, 16 * 2**30, allocatable={"cpu": 4000, "memory": 16 * 2**30})}
POOLS = {"spot-a": Pool("spot-a", "r", "az1", "f4", "g1", "reclaimable", 10),
         "spot-b": Pool("spot-b", "r", "az2", "f4", "g2", "reclaimable", 10, price=0.05),
         "res": Pool("res", "r", "az1", "f4", "g1", "committed", 10)}
PRICES = Prices(flavors={"f4": 1.0}, pools={"spot-b": 0.05}, tier_factor={"reclaimable": 0.3})


def hours(n: float) -> timedelta:
    return timedelta(hours=n)


def test_a_unit_costs_its_hours_in_the_window_at_its_pools_price():
    lives = [Lifetime("web", "spot-a", T0 - hours(2), T0 + hours(0.5)),  # 0.5 h in the window
             Lifetime("web", "res", T0 + hours(0.25), None),  # alive: 0.75 h
             Lifetime("web", "spot-b", T0 + hours(0.5), T0 + hours(0.75))]  # 0.25 h
    [line] = costs(lives, pools=POOLS, flavors=FLAVORS, prices=PRICES, since=T0,
                   now=T0 + hours(1))
    assert line.unit_hours == 1.5
    assert line.cost == 0.5 * 0.3 + 0.75 * 1.0 + 0.25 * 0.05


def test_by_tier_and_by_pool_split_the_same_total():
    lives = [Lifetime("web", "spot-a", T0, None), Lifetime("api", "res", T0, None),
             Lifetime("api", "spot-b", T0, T0 + hours(0.5))]
    kw = {"pools": POOLS, "flavors": FLAVORS, "prices": PRICES, "since": T0,
          "now": T0 + hours(1)}
    tiers = {x.key: x.cost for x in costs(lives, by="tier", **kw)}  # type: ignore[arg-type]
    assert tiers == {"committed": 1.0, "reclaimable": 0.3 + 0.025}


def test_an_unpriced_unit_leaves_the_cost_unknown_but_counts_its_hours():
    [line] = costs([Lifetime("web", "spot-a", T0, None)], pools=POOLS, flavors=FLAVORS,
                   prices=Prices(), since=T0, now=T0 + hours(2))
    assert (line.unit_hours, line.cost) == (2.0, None)


def test_efficiency_is_requested_over_provisioned_with_the_claim_as_a_step_function():
    lives = [Lifetime("web", "spot-a", T0 - hours(1), None)]
    claims = [ClaimStep("web", T0 - hours(3), {"cpu": 4000, "memory": 8 * 2**30}),
              ClaimStep("web", T0 + hours(0.5), {"cpu": 1000, "memory": 8 * 2**30})]
    [line] = costs(lives, pools=POOLS, flavors=FLAVORS, prices=PRICES, since=T0,
                   now=T0 + hours(1), claims=claims)
    assert line.efficiency == {"cpu": (4 * 0.5 + 1 * 0.5) / 4, "memory": 0.5}


@given(st.lists(st.tuples(st.sampled_from(sorted(POOLS)), st.sampled_from(["web", "api"]),
                          st.integers(-120, 120), st.integers(0, 240)), max_size=12))
def test_every_grouping_adds_up_to_the_same_unit_hours_and_cost(spans):
    lives = [Lifetime(w, p, T0 + timedelta(minutes=a), T0 + timedelta(minutes=a + d))
             for p, w, a, d in spans]
    kw = {"pools": POOLS, "flavors": FLAVORS, "prices": PRICES, "since": T0,
          "now": T0 + hours(1)}
    totals = [(round(sum(x.unit_hours for x in lines), 9),
               round(sum(x.cost or 0.0 for x in lines), 9))
              for lines in (costs(lives, by=by, **kw) for by in ("workload", "pool", "tier"))]  # type: ignore[arg-type]
    assert totals[0] == totals[1] == totals[2]
    expected = sum(max(0, min(a + d, 60) - max(a, 0)) for _, _, a, d in spans) / 60
    assert abs(totals[0][0] - expected) < 1e-9
