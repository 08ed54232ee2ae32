"""One target after a shrink (design: Rebalance, Truth): the seed's 42 → 10 pods on the bundled demo
config. The stable planner used to shrink 22 units in 11 pools to 4 committed units in 2 pools
(committed units alone covered the claim, so every reclaimable one went), a plan the fresh plan
(1 committed unit and 8 reclaimable pools: `min_pools`) disagreed with — so rebalance launched
a second wave after consolidation. Now the shrunk plan is the plan a rebalance leaves alone."""

from __future__ import annotations

from importlib import resources

from scoctl.config.schema import load_config
from scoctl.core.model import Claim, Contract
from scoctl.core.planner import WorkloadPlan, plan_all
from scoctl.core.rebalance import triggers

GI = 2**30
CONFIG = load_config(resources.files("scoctl.data") / "demo.yaml")  # type: ignore[arg-type]
T1 = CONFIG.contracts["T1"]


def claim(pods: int) -> Claim:
    return Claim("orders-daily", "T1", {"cpu": 4000 * pods, "memory": 16 * GI * pods},
                 {"cpu": 4000, "memory": 16 * GI}, pods=pods)


def moves_again(plan: WorkloadPlan, fresh: WorkloadPlan, contract: Contract) -> bool:
    return bool(triggers(plan, fresh, contract, 0.1))


def plan(pods: int, current: dict[str, int], fresh: dict[str, WorkloadPlan] | None = None,
         **kw: object) -> WorkloadPlan:
    return plan_all([claim(pods)], CONFIG.contracts, CONFIG.pools, CONFIG.flavors,
                    CONFIG.ranking.scores or {}, {"orders-daily": current},
                    depth_premium=CONFIG.depth_premium, fresh=fresh,
                    **kw)["orders-daily"]  # type: ignore[arg-type]


def reclaimable_pools(p: WorkloadPlan) -> int:
    return sum(1 for row in p.pools if row.tier == "reclaimable" and row.units)


def test_42_to_10_shrinks_onto_the_plan_a_rebalance_leaves_alone() -> None:
    before = plan(42, {}).units()
    assert sum(before.values()) == 22
    fresh: dict[str, WorkloadPlan] = {}
    shrunk = plan(10, before, fresh, idle_by_workload={"orders-daily": before},
                  moves_again=moves_again)
    assert reclaimable_pools(shrunk) >= T1.min_pools  # min_pools kept, as the fresh plan does
    assert triggers(shrunk, fresh["orders-daily"], T1, 0.1) == ()  # rebalance: nothing to do
    assert shrunk.units() == fresh["orders-daily"].units()
    # consolidation done (the live units are the plan): a re-plan keeps it, nothing moves
    again = plan(10, dict(shrunk.units()), {}, moves_again=moves_again)
    assert again.units() == shrunk.units()


def test_without_the_target_the_stable_shrink_is_one_a_rebalance_moves_again() -> None:
    """The old behaviour, kept where no one asks (`moves_again` None): 4 committed units."""
    before = plan(42, {}).units()
    fresh: dict[str, WorkloadPlan] = {}
    shrunk = plan(10, before, fresh, idle_by_workload={"orders-daily": before})
    assert reclaimable_pools(shrunk) == 0
    assert triggers(shrunk, fresh["orders-daily"], T1, 0.1) != ()
