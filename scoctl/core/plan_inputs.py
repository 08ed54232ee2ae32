"""What the plan stage decides before and after the planner runs (pure): which workloads
changed and why, which pools a claim could use, and the conversions between stored rows and
the planner's values.

No I/O: the plan stage reads the state and the ranking, calls these and `core.planner`, then
records the result.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from scoctl.core import planner
from scoctl.core.model import (
    Claim,
    ClaimRecord,
    ExclusionRecord,
    Flavor,
    PlanUnitRecord,
    PlanWorkloadRecord,
    Pool,
    flavor_allocatable,
)
from scoctl.core.quantity import fits


def eligible_pools(claim: Claim, pools: Collection[Pool], flavors: Mapping[str, Flavor]
                   ) -> set[str]:
    """Pools whose flavor holds the claim's largest pod, committed ones only for workloads
    that do not tolerate the reclaimable taint (ranking and exclusions aside)."""
    out = set()
    for pool in pools:
        flavor = flavors.get(pool.flavor)
        if flavor is None:
            continue
        if not claim.tolerates_reclaimable and pool.tier == "reclaimable":
            continue
        if pool.name in claim.ineligible:
            continue
        if fits(claim.largest_pod, flavor_allocatable(flavor)):
            out.add(pool.name)
    return out


def changed_workloads(claims: Iterable[Claim], previous: Mapping[str, PlanWorkloadRecord],
                      pools: Collection[Pool], flavors: Mapping[str, Flavor],
                      scores: Mapping[str, float], last_scores: Mapping[str, float],
                      excluded: set[str], dirty: Mapping[str, str]) -> dict[str, str]:
    """Which workloads to re-plan, and why: a new claim or claim version, a new contract, a
    score change or an exclusion change of an eligible pool, or units lost (`dirty`).

    Eligibility is computed only when scores or exclusions moved, once per pod shape."""
    moved = {name for name in set(scores) | set(last_scores)
             if scores.get(name) != last_scores.get(name)}
    by_shape: dict[tuple[object, ...], set[str]] = {}
    out: dict[str, str] = {}
    for claim in claims:
        old = previous.get(claim.workload)
        if old is None:
            out[claim.workload] = "new claim"
        elif old.claim_version != claim.version:
            out[claim.workload] = f"claim v{old.claim_version} → v{claim.version}"
        elif old.contract != claim.contract:
            out[claim.workload] = "contract changed"
        elif moved and moved & _eligible(claim, pools, flavors, by_shape):
            out[claim.workload] = "ranking changed"
        elif ((flipped := set(old.exclusions) ^ excluded)
              and flipped & _eligible(claim, pools, flavors, by_shape)):
            out[claim.workload] = "exclusions changed"
        elif claim.workload in dirty:
            out[claim.workload] = dirty[claim.workload]
    return out


def _eligible(claim: Claim, pools: Collection[Pool], flavors: Mapping[str, Flavor],
              cache: dict[tuple[object, ...], set[str]]) -> set[str]:
    shape = (tuple(sorted(claim.largest_pod.items())), claim.tolerates_reclaimable,
             tuple(sorted(claim.ineligible)))
    if shape not in cache:
        cache[shape] = eligible_pools(claim, pools, flavors)
    return cache[shape]


def claims_of(records: Iterable[ClaimRecord]) -> list[Claim]:
    """The stored claims that ask for something, as the planner's values."""
    return [Claim(workload=r.workload, contract=r.contract, requests=dict(r.requests),
                  largest_pod=dict(r.largest_pod), pods=r.pods, version=r.version,
                  tolerates_reclaimable=r.tolerates_reclaimable, ineligible=dict(r.ineligible),
                  zone_spread=r.zone_spread,
                  overhead={f: dict(o) for f, o in r.overhead.items()}, parts=r.parts,
                  preferred=dict(r.preferred), gang=r.gang)
            for r in records if r.requests]


def to_workload_plan(record: PlanWorkloadRecord) -> planner.WorkloadPlan:
    """A stored plan as the planner's value (for `previous`)."""
    return planner.WorkloadPlan(
        workload=record.workload, contract=record.contract, feasible=record.feasible,
        degraded=record.degraded, reasons=record.reasons,
        pools=tuple(planner.PoolPlan(pool=u.pool, tier=u.tier,  # type: ignore[arg-type]
                                     group=u.group, units=u.units, share=u.share,
                                     score=u.score, key=0.0, coverage=0.0)
                    for u in record.pools),
        coverage=0.0, committed_coverage=0.0, floor_shortfall=0.0)


def same_plan(new: PlanWorkloadRecord, old: PlanWorkloadRecord) -> bool:
    """Whether a re-planned workload's record plans what its stored one does (the same claim
    version, units per pool, feasibility, degradation and reasons): no new generation."""
    return (new.claim_version, new.feasible, new.degraded, new.reasons, new.pools) == (
        old.claim_version, old.feasible, old.degraded, old.reasons, old.pools)


def to_record(plan: planner.WorkloadPlan, claim: Claim, ranking: str,
              excluded: set[str]) -> PlanWorkloadRecord:
    """A plan as the row the state stores (its generation is set when committed)."""
    return PlanWorkloadRecord(
        workload=plan.workload, generation=0, claim_version=claim.version,
        contract=plan.contract, ranking=ranking, feasible=plan.feasible,
        degraded=plan.degraded, reasons=plan.reasons,
        pools=tuple(PlanUnitRecord(pool=p.pool, tier=p.tier, group=p.group, units=p.units,
                                   share=p.share, score=p.score)
                    for p in plan.pools if p.units > 0),
        exclusions=tuple(sorted(excluded)),
        explain=tuple({"pool": e.pool, "units": e.units, "reason": e.reason}
                      for e in plan.explain))


def why_excluded(lines: Sequence[Mapping[str, Any]],
                 exclusions: Sequence[ExclusionRecord]) -> tuple[Mapping[str, Any], ...]:
    """`plan --explain`'s lines with each excluded pool's exclusion told: until when, and why
    (a capacity fault, a gang's NoValidHost zone, a reclaim notice)."""
    told = {e.pool: f"until {e.until}: {e.reason}" for e in exclusions}
    return tuple({**line, "reason": f"{line['reason']} {told[str(line.get('pool'))]}"}
                 if str(line.get("reason", "")).startswith("excluded")
                 and str(line.get("pool")) in told else line for line in lines)
