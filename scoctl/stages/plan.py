"""The plan stage (placement steps 4-8): changed claims in, one new plan generation out.

read: claims (state or --claims file), ranking, contracts, exclusions, current units, the
previous plans · decide: which workloads changed, then `core.planner.plan_all` (pure) ·
record: one generation in one transaction, rewriting only the changed workloads' rows.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scoctl.adapters.ranking import CACHE_KEY, load_ranking
from scoctl.clock import Clock
from scoctl.config.claims_file import load_claims
from scoctl.config.ranking import Ranking
from scoctl.config.schema import Config
from scoctl.core import planner
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES, units_of
from scoctl.core.model import PlanWorkloadRecord
from scoctl.core.plan_inputs import changed_workloads, claims_of, to_record, to_workload_plan
from scoctl.errors import UsageError
from scoctl.state import Store

SCORES_KEY = "ranking:last_scores"


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


def run_plan(config: Config, store: Store, clock: Clock, *, only: Collection[str] = (),
             full: bool = False, claims_path: Path | None = None, dry_run: bool = False,
             explain: Collection[str] = (), option: str = "--workload") -> PlanResult:
    """Re-plan what changed (or `only`, or everything with `full`) and commit a generation."""
    started = time.perf_counter()
    now = clock.now()
    ranking, cache_entry = load_ranking(config.ranking, now=now,
                                        cache=store.get_kv(CACHE_KEY))
    known = {c.name for c in config.pools}
    if claims_path is not None:
        claims = load_claims(claims_path, config.contracts)
    else:
        claims = claims_of(store.claims())
    names = {c.workload for c in claims}
    for slug in only:
        if slug not in names:
            raise UsageError(f"{option} {slug}: no claim for this workload")
    excluded = {e.pool for e in store.exclusions()} & known
    previous_records = store.plans(units=False)  # enough to tell what changed
    dirty = store.dirty()
    last_scores = store.get_kv(SCORES_KEY, {})
    if full or claims_path is not None:
        reasons = {c.workload: "full re-plan" for c in claims}
    elif only:
        reasons = dict.fromkeys(only, "asked")
    else:
        reasons = changed_workloads(claims, previous_records, config.pools, config.flavors,
                                    ranking.scores, last_scores, excluded, dirty)
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
            promised=planner.promised_depth(store.planned_units(), current))
    by_name = {c.workload: c for c in claims}
    records = {name: to_record(plan, by_name[name], ranking.id, excluded)
               for name, plan in plans.items() if name in reasons}
    changed = tuple(sorted(set(records) | set(removed)))
    latest = store.latest_generation()
    generation = latest.generation if latest else 0
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
                store.set_kv(CACHE_KEY, cache_entry)
            store.set_kv(SCORES_KEY, dict(ranking.scores))
            store.clear_dirty(set(records))
    return PlanResult(generation=generation, ranking=ranking, changed=changed, plans=plans,
                      records=records, committed=committed,
                      seconds=time.perf_counter() - started, reasons_for_change=reasons)
