"""The plan stage's pure inputs: which pools a claim could use, which workloads changed."""

from __future__ import annotations

from scoctl.core.model import Claim, Flavor, PlanWorkloadRecord, Pool
from scoctl.core.plan_inputs import changed_workloads, eligible_pools

FLAVORS = {"small": Flavor("small", vcpus=2, ram=4 * 2**30),
           "big": Flavor("big", vcpus=16, ram=64 * 2**30)}
POOLS = (Pool("small.spot", "r", "az", "small", "g1", "reclaimable", 10),
         Pool("big.spot", "r", "az", "big", "g2", "reclaimable", 10),
         Pool("big.res", "r", "az", "big", "g3", "committed", 10))


def claim(cpu: int = 4000, *, tolerates: bool = True, version: int = 1) -> Claim:
    return Claim("web", "T1", {"cpu": cpu * 4}, {"cpu": cpu}, 4, version,
                 tolerates_reclaimable=tolerates)


def stored(*, version: int = 1, exclusions: tuple[str, ...] = ()) -> PlanWorkloadRecord:
    return PlanWorkloadRecord(workload="web", generation=1, claim_version=version,
                              contract="T1", ranking="r", feasible=True, degraded=False,
                              reasons=(), pools=(), exclusions=exclusions)


def test_eligible_pools_hold_the_largest_pod_and_respect_the_taint() -> None:
    assert eligible_pools(claim(1000), POOLS, FLAVORS) == {"small.spot", "big.spot", "big.res"}
    assert eligible_pools(claim(4000), POOLS, FLAVORS) == {"big.spot", "big.res"}
    assert eligible_pools(claim(4000, tolerates=False), POOLS, FLAVORS) == {"big.res"}


def changed(c: Claim, previous: PlanWorkloadRecord | None, *,
            scores: dict[str, float] | None = None, last: dict[str, float] | None = None,
            excluded: set[str] | None = None,
            dirty: dict[str, str] | None = None) -> dict[str, str]:
    return changed_workloads([c], {"web": previous} if previous else {}, POOLS, FLAVORS,
                             scores or {}, last or {}, excluded or set(), dirty or {})


def test_new_claims_and_new_versions_are_replanned() -> None:
    assert changed(claim(), None) == {"web": "new claim"}
    assert changed(claim(version=2), stored()) == {"web": "claim v1 → v2"}
    assert changed(claim(), stored()) == {}


def test_only_score_and_exclusion_changes_of_eligible_pools_replan() -> None:
    big = claim(4000)  # small.spot cannot hold its pods
    assert changed(big, stored(), scores={"small.spot": 0.9}, last={"small.spot": 0.1}) == {}
    assert changed(big, stored(), scores={"big.spot": 0.9}, last={"big.spot": 0.1}) == {
        "web": "ranking changed"}
    assert changed(big, stored(), excluded={"small.spot"}) == {}
    assert changed(big, stored(exclusions=("big.spot",))) == {"web": "exclusions changed"}


def test_lost_units_replan_with_their_reason() -> None:
    assert changed(claim(), stored(), dirty={"web": "units lost to a reclaim"}) == {
        "web": "units lost to a reclaim"}
