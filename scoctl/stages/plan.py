"""The plan stage (placement steps 4-8): changed claims in, one new plan generation out.

read: claims (state or --claims file), ranking, contracts, exclusions, current units, the
previous plans · decide: which workloads changed, then `core.planner.plan_all` (pure) ·
record: one generation in one transaction, rewriting only the changed workloads' rows.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from scoctl.adapters.ranking import load_ranking
from scoctl.clock import Clock
from scoctl.config.claims_file import load_claims
from scoctl.config.ranking import Ranking
from scoctl.config.schema import Config
from scoctl.core import planner
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES, units_of
from scoctl.core.model import (
    Claim,
    Flavor,
    PlanUnitRecord,
    PlanWorkloadRecord,
    Pool,
    flavor_allocatable,
)
from scoctl.core.quantity import fits
from scoctl.errors import UsageError
from scoctl.state import Store


@dataclass(frozen=True)
class PlanResult:
    generation: int  # the new generation, or the latest one when nothing changed
    ranking: Ranking
    changed: tuple[str, ...]
    plans: Mapping[str, planner.WorkloadPlan]
    records: Mapping[str, PlanWorkloadRecord]
    committed: bool
    seconds: float
    reasons_for_change: Mapping[str, str] = field(default_factory=dict)


def claims_from_state(store: Store, config: Config) -> list[Claim]:
    out = []
    for record in store.claims():
        if not record.requests:
            continue
        out.append(Claim(workload=record.workload, contract=record.contract,
                         requests=dict(record.requests), largest_pod=dict(record.largest_pod),
                         pods=record.pods, version=record.version,
                         tolerates_reclaimable=record.tolerates_reclaimable))
    return out


def eligible_pools(claim: Claim, pools: Collection[Pool], flavors: Mapping[str, Flavor]
                   ) -> set[str]:
    """Pools whose flavor holds the claim's largest pod (ranking and exclusions aside)."""
    out = set()
    for pool in pools:
        flavor = flavors.get(pool.flavor)
        if flavor is None:
            continue
        if not claim.tolerates_reclaimable and pool.tier == "reclaimable":
            continue
        if fits(claim.largest_pod, flavor_allocatable(flavor)):
            out.add(pool.name)
    return out


def changed_workloads(claims: list[Claim], previous: Mapping[str, PlanWorkloadRecord],
                      config: Config, scores: Mapping[str, float],
                      last_scores: Mapping[str, float], excluded: set[str],
                      dirty: Mapping[str, str]) -> dict[str, str]:
    """Which workloads to re-plan, and why (pure): claim version, contract, the ranking of an
    eligible pool, an exclusion of an eligible pool, or lost units.

    Eligibility is computed only when scores or exclusions moved, once per pod shape."""
    moved = {name for name in set(scores) | set(last_scores)
             if scores.get(name) != last_scores.get(name)}
    eligible_by_shape: dict[tuple[object, ...], set[str]] = {}

    def eligible(claim: Claim) -> set[str]:
        shape = (tuple(sorted(claim.largest_pod.items())), claim.tolerates_reclaimable)
        if shape not in eligible_by_shape:
            eligible_by_shape[shape] = eligible_pools(claim, config.pools, config.flavors)
        return eligible_by_shape[shape]

    out: dict[str, str] = {}
    for claim in claims:
        old = previous.get(claim.workload)
        if old is None:
            out[claim.workload] = "new claim"
            continue
        if old.claim_version != claim.version:
            out[claim.workload] = f"claim v{old.claim_version} → v{claim.version}"
            continue
        if old.contract != claim.contract:
            out[claim.workload] = "contract changed"
            continue
        if moved and moved & eligible(claim):
            out[claim.workload] = "ranking changed"
            continue
        flipped = set(old.exclusions) ^ excluded
        if flipped and flipped & eligible(claim):
            out[claim.workload] = "exclusions changed"
            continue
        if claim.workload in dirty:
            out[claim.workload] = dirty[claim.workload]
    return out


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


def promised_depth(rows: Iterable[tuple[str, str, int]],
                   current: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """Per pool, the new units (beyond each workload's current units) the stored plans take
    from its depth — `core.planner.promised_depth` over plain (workload, pool, units) rows."""
    out: dict[str, int] = {}
    empty: Mapping[str, int] = {}
    for workload, pool, units in rows:
        new = units - current.get(workload, empty).get(pool, 0)
        if new > 0:
            out[pool] = out.get(pool, 0) + new
    return out


def to_record(plan: planner.WorkloadPlan, claim: Claim, ranking: str,
              excluded: set[str]) -> PlanWorkloadRecord:
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


def run_plan(config: Config, store: Store, clock: Clock, *, only: Collection[str] = (),
             full: bool = False, claims_path: Path | None = None, dry_run: bool = False,
             explain: Collection[str] = (), option: str = "--workload") -> PlanResult:
    """Re-plan what changed (or `only`, or everything with `full`) and commit a generation."""
    started = time.perf_counter()
    now = clock.now()
    ranking, cache_entry = load_ranking(config.ranking, now=now,
                                        cache=store.last_good_ranking())
    known = {c.name for c in config.pools}
    if claims_path is not None:
        claims = load_claims(claims_path, config.contracts)
    else:
        claims = claims_from_state(store, config)
    names = {c.workload for c in claims}
    for slug in only:
        if slug not in names:
            raise UsageError(f"{option} {slug}: no claim for this workload")
    excluded = {e.pool for e in store.exclusions()} & known
    previous_records = store.plans(units=False)  # enough to tell what changed
    dirty = store.dirty()
    last_scores = store.last_scores()
    if full or claims_path is not None:
        reasons = {c.workload: "full re-plan" for c in claims}
    elif only:
        reasons = dict.fromkeys(only, "asked")
    else:
        reasons = changed_workloads(claims, previous_records, config, ranking.scores,
                                    last_scores, excluded, dirty)
    removed = sorted(set(previous_records) - names) if claims_path is None else []
    current = units_of(store.instances(), store.launches(status=IN_FLIGHT_LAUNCHES))
    if full or claims_path is not None:
        plans = planner.plan_all(
            claims, config.contracts, config.pools, config.flavors, ranking.scores, current,
            excluded=excluded, depth_premium=config.depth_premium, explain=set(explain))
    else:
        # Incremental: plan just the changed claims. Every kept plan's new units arrive as
        # `promised` depth (one pass over plain rows), and the plans being replaced or removed
        # give theirs back, so the 10,000s of kept plans are never rebuilt as values.
        replan = [c for c in claims if c.workload in reasons]
        previous = {k: to_workload_plan(v)
                    for k, v in store.plans(only=set(reasons) | set(removed)).items()}
        plans = planner.plan_all(
            replan, config.contracts, config.pools, config.flavors, ranking.scores, current,
            excluded=excluded, depth_premium=config.depth_premium, only=set(reasons),
            previous=previous, explain=set(explain),
            promised=promised_depth(store.planned_units(), current))
    by_name = {c.workload: c for c in claims}
    records = {name: to_record(plan, by_name[name], ranking.id, excluded)
               for name, plan in plans.items() if name in reasons}
    changed = tuple(sorted(set(records) | set(removed)))
    latest = store.latest_generation()
    generation = latest.generation if latest else 0
    if dry_run and changed:  # name the generation a commit would take
        generation += 1
        records = {name: replace(r, generation=generation) for name, r in records.items()}
    committed = False
    if not dry_run and (changed or cache_entry):
        with store.transaction():
            if changed:
                generation = store.commit_plan(ranking=ranking.id, plans=list(records.values()),
                                               full=full or claims_path is not None,
                                               removed=removed)
                committed = True
                for name in removed:
                    store.append_event(name, "PLAN_REMOVED", "info", None,
                                       {"generation": generation, "reason": "claim gone"})
                for name, record in records.items():
                    store.append_event(name, "PLAN_UPDATED", "info", None, {
                        "generation": generation, "claim_version": record.claim_version,
                        "units": sum(u.units for u in record.pools), "pools": len(record.pools),
                        "why": reasons.get(name, "")})
                    if not record.feasible or record.degraded:
                        store.append_event(
                            name, "PLAN_INFEASIBLE" if not record.feasible else "PLAN_DEGRADED",
                            "warning", None,
                            {"generation": generation, "reasons": list(record.reasons)})
            if cache_entry:
                store.save_last_good_ranking(cache_entry)
            if dict(ranking.scores) != last_scores:
                store.save_last_scores(ranking.scores)
            store.clear_dirty(set(records))
    return PlanResult(generation=generation, ranking=ranking, changed=changed, plans=plans,
                      records=records, committed=committed,
                      seconds=time.perf_counter() - started, reasons_for_change=reasons)
