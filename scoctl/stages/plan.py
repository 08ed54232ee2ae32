"""The plan stage (placement steps 4-8): changed claims in, one new plan generation out.

read: claims (the state's, or a --claims file), ranking, contracts, exclusions, current units,
the previous plans · decide: which workloads changed (`core.plan_inputs`), then
`core.planner.plan_all` (pure) · record: one generation in one transaction, rewriting only the
changed workloads' rows.

``--claims FILE`` with ``--dry-run`` is a what-if over the file's claims alone (written nowhere;
with no state file, over an empty one). Without ``--dry-run`` it commits (design: CLI): the
file's claims are recorded as those workloads' claims (source ``file``, a new claim version when
the demand changed) and planned in the same transaction, so the next ``plan`` keeps them; a
later watch pass that observes the workload replaces them as usual.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from scoctl.adapters.ranking import load_ranking
from scoctl.bulk import collector_paused
from scoctl.clock import Clock
from scoctl.config.claims_file import load_claims
from scoctl.config.ranking import Ranking
from scoctl.config.schema import Config, is_url
from scoctl.core import planner, rebalance
from scoctl.core.blast import Blast, blast_radii
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES, idle_units_of, units_of
from scoctl.core.model import (
    Claim,
    Contract,
    InstanceRecord,
    NewEvent,
    PlanWorkloadRecord,
    RankingCache,
)
from scoctl.core.plan_inputs import (
    changed_workloads,
    claims_of,
    same_plan,
    to_record,
    to_workload_plan,
    why_excluded,
)
from scoctl.errors import UsageError
from scoctl.services import rebalance as services_rebalance
from scoctl.services.claims import record_claim
from scoctl.state import Store, open_store

FILE_SOURCE = "file"
REBALANCE_PENDING = "rebalance pending"  # the reason a workload is re-planned for its rebalance


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
    # design: Rebalance: each re-planned workload's rebalance this run (recorded unless a dry run)
    rebalances: Mapping[str, rebalance.Decision] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanView:
    """What ``scoctl plan`` shows: the run, and the plans it is about (every stored plan with
    this run's on top; a claims file's own only), with the `--explain` workload explained."""

    result: PlanResult
    records: Mapping[str, PlanWorkloadRecord]
    explain: str | None = None
    blasts: Mapping[str, Blast] = field(default_factory=dict)  # when asked: per workload
    rebalance: rebalance.Decision | None = None  # the `explain` workload's (design: Rebalance)


@dataclass(frozen=True)
class _Inputs:
    ranking: Ranking
    cache_entry: RankingCache | None
    last_scores: Mapping[str, float]
    claims: list[Claim]
    excluded: set[str]
    previous: Mapping[str, PlanWorkloadRecord]


@contextlib.contextmanager
def what_if_store(path: Path | str, clock: Clock | None = None, *,
                  password_file: Path | None = None) -> Iterator[Store]:
    """The state a dry run reads: the file (or database) at `path` (no lock: a dry run writes
    nothing), or, when there is no file yet, an empty state in a temporary directory removed
    afterwards."""
    if is_url(path) or Path(path).exists():
        with contextlib.closing(open_store(path, clock=clock,
                                           password_file=password_file)) as store:
            yield store
        return
    with tempfile.TemporaryDirectory(prefix="scoctl-what-if-") as tmp:
        with contextlib.closing(open_store(Path(tmp) / "what-if.db", clock=clock,
                                           create=True)) as store:
            yield store


def record_file_claims(store: Store, claims: Sequence[Claim]) -> list[str]:
    """Record a claims file's claims as those workloads' claims (source ``file``); returns
    the workloads whose claim got a new version."""
    changed = []
    with store.transaction():
        for claim in claims:
            _, new = record_claim(store, claim.workload, contract=claim.contract,
                                     requests=claim.requests, largest_pod=claim.largest_pod,
                                     pods=claim.pods, source=FILE_SOURCE,
                                     tolerates_reclaimable=claim.tolerates_reclaimable,
                                     gang=claim.gang)
            if new:
                changed.append(claim.workload)
    return changed


def _read(config: Config, store: Store, clock: Clock,
          what_if: Sequence[Claim] | None) -> _Inputs:
    ranking, cache_entry = load_ranking(config.ranking, now=clock.now(),
                                        cache=store.last_good_ranking())
    claims = list(what_if) if what_if is not None else claims_of(store.claims())
    limits = {w.name: w.limits for w in config.workloads if w.limits}
    claims = [replace(c, limits=limits[c.workload]) if c.workload in limits else c
              for c in claims]
    known = {c.name for c in config.pools}
    return _Inputs(ranking=ranking, cache_entry=cache_entry, last_scores=store.last_scores(),
                   claims=claims,
                   excluded={e.pool for e in store.exclusions()} & known,
                   previous=store.plans(units=False))  # enough to tell what changed


def _reasons(config: Config, store: Store, inputs: _Inputs, *, only: Collection[str],
             full: bool, why: str) -> dict[str, str]:
    """Which workloads to re-plan, and why."""
    if full:
        return {c.workload: "full re-plan" for c in inputs.claims}
    if only:
        return dict.fromkeys(only, why)
    return changed_workloads(inputs.claims, inputs.previous, config.pools, config.flavors,
                             inputs.ranking.scores, inputs.last_scores,
                             inputs.excluded, store.dirty())


def _decide(config: Config, store: Store, inputs: _Inputs, reasons: Mapping[str, str],
            removed: Sequence[str], *, full: bool, explain: Collection[str],
            instances: Sequence[InstanceRecord],
            fresh: dict[str, planner.WorkloadPlan] | None) -> dict[str, planner.WorkloadPlan]:
    current = units_of(instances, store.launches(status=IN_FLIGHT_LAUNCHES))
    idle = idle_units_of(instances)  # a shrunk claim gives these back first (design: Disruption)
    if full:
        return planner.plan_all(
            inputs.claims, config.contracts, config.pools, config.flavors,
            inputs.ranking.scores, current, excluded=inputs.excluded,
            depth_premium=config.depth_premium, explain=set(explain), idle_by_workload=idle,
            fresh=fresh, gang_policy=config.gang.policy(), moves_again=_moves_again(config))
    # Incremental: plan just the changed claims. Every kept plan's new units arrive as
    # `promised` depth (one pass over plain rows), and the plans being replaced or removed
    # give theirs back, so the 10,000s of kept plans are never rebuilt as values.
    replan = [c for c in inputs.claims if c.workload in reasons]
    previous = {k: to_workload_plan(v)
                for k, v in store.plans(only=set(reasons) | set(removed)).items()}
    return planner.plan_all(
        replan, config.contracts, config.pools, config.flavors, inputs.ranking.scores,
        current, excluded=inputs.excluded, depth_premium=config.depth_premium,
        only=set(reasons), previous=previous, explain=set(explain),
        promised=planner.promised_depth(store.planned_units(), current),
        idle_by_workload=idle, fresh=fresh, gang_policy=config.gang.policy(),
        moves_again=_moves_again(config))


def _moves_again(config: Config) -> Callable[[planner.WorkloadPlan, planner.WorkloadPlan,
                                              Contract], bool]:
    """Whether a rebalance would move a plan to its fresh plan (`core.rebalance.triggers`,
    the workload's own `rebalance.min_gain`): a shrunk plan it would move is planned toward
    the fresh one at once (`core.planner.plan_all`'s `moves_again`)."""
    def moves_again(plan: planner.WorkloadPlan, fresh: planner.WorkloadPlan,
                    contract: Contract) -> bool:
        gain = config.disruption_of(plan.workload).rebalance.min_gain
        return bool(rebalance.triggers(plan, fresh, contract, gain))
    return moves_again


def _commit(store: Store, inputs: _Inputs, records: Mapping[str, PlanWorkloadRecord],
            removed: Sequence[str], reasons: Mapping[str, str], *, full: bool) -> int | None:
    """Record the new generation (None when nothing changed) and the ranking bookkeeping."""
    generation = None
    with store.transaction():
        if records or removed:
            generation = store.commit_plan(ranking=inputs.ranking.id,
                                           plans=list(records.values()), full=full,
                                           removed=removed)
            for name in removed:
                store.append_event(NewEvent(name, "PLAN_REMOVED", "info",
                                            {"generation": generation, "reason": "claim gone"}))
            for name, record in records.items():
                _plan_events(store, generation, record, reasons.get(name, ""))
        if inputs.cache_entry:
            store.save_last_good_ranking(inputs.cache_entry)
        if dict(inputs.ranking.scores) != inputs.last_scores:
            store.save_last_scores(inputs.ranking.scores)
        store.clear_dirty(set(records))
    return generation


def _plan_events(store: Store, generation: int, record: PlanWorkloadRecord, why: str) -> None:
    store.append_event(NewEvent(record.workload, "PLAN_UPDATED", "info", {
        "generation": generation, "claim_version": record.claim_version,
        "units": sum(u.units for u in record.pools), "pools": len(record.pools), "why": why}))
    if not record.feasible or record.degraded:
        store.append_event(NewEvent(
            record.workload, "PLAN_INFEASIBLE" if not record.feasible else "PLAN_DEGRADED",
            "warning", {"generation": generation, "reasons": list(record.reasons)}))


@collector_paused()  # 1,000s of claims over 1,000s of pools: full collections free nothing
def _plan(config: Config, store: Store, clock: Clock, *, only: Collection[str], full: bool,
          what_if: Sequence[Claim] | None, dry_run: bool, explain: Collection[str],
          option: str, why: str) -> PlanResult:
    started = clock.monotonic()
    inputs = _read(config, store, clock, what_if)
    names = {c.workload for c in inputs.claims}
    for slug in only:
        if slug not in names:
            raise UsageError(f"{option} {slug}: no claim for this workload")
    full = full or what_if is not None
    reasons = _reasons(config, store, inputs, only=only, full=full, why=why)
    stored = store.rebalances() if what_if is None else {}
    if what_if is None and not only and not full:
        # a rebalance waiting out its stabilize window is decided again each run: its
        # workload is re-planned, and kept as it is when the plan comes out the same
        for name in stored:
            if name in names and name not in reasons:
                reasons[name] = REBALANCE_PENDING
    removed = sorted(set(inputs.previous) - names) if what_if is None else []
    instances = store.instances()
    fresh: dict[str, planner.WorkloadPlan] | None = {} if what_if is None else None
    plans = _decide(config, store, inputs, reasons, removed, full=full, explain=explain,
                    instances=instances, fresh=fresh)
    by_name = {c.workload: c for c in inputs.claims}
    records = {name: to_record(plan, by_name[name], inputs.ranking.id, inputs.excluded)
               for name, plan in plans.items() if name in reasons}
    records = _without_unchanged(store, records, reasons)
    decided = (services_rebalance.decide_all(config, instances, plans, fresh, stored,
                                             now=clock.now()) if fresh is not None else {})
    changed = tuple(sorted(set(records) | set(removed)))
    latest = store.latest_generation()
    generation = latest.generation if latest else 0
    if dry_run and changed:  # name the generation a commit would take
        generation += 1
        records = {name: replace(r, generation=generation) for name, r in records.items()}
    committed = None
    if not dry_run and (changed or inputs.cache_entry):
        committed = _commit(store, inputs, records, removed, reasons, full=full)
    if not dry_run and fresh is not None:
        with store.transaction():
            services_rebalance.record(store, decided, stored,
                                      gone=[n for n in stored if n not in names])
    return PlanResult(generation=committed or generation, ranking=inputs.ranking,
                      changed=changed, plans=plans, records=records,
                      committed=committed is not None, seconds=clock.monotonic() - started,
                      reasons_for_change=reasons, rebalances=decided)


def _without_unchanged(store: Store, records: Mapping[str, PlanWorkloadRecord],
                       reasons: Mapping[str, str]) -> dict[str, PlanWorkloadRecord]:
    """`records` less those of workloads re-planned only for a pending rebalance whose plan
    came out as stored (the stable planner's usual answer): no generation for no change."""
    again = {n for n in records if reasons.get(n) == REBALANCE_PENDING}
    if not again:
        return dict(records)
    stored = store.plans(only=again)
    return {n: r for n, r in records.items()
            if n not in again or n not in stored or not same_plan(r, stored[n])}


def run_plan(config: Config, store: Store, clock: Clock, *, only: Collection[str] = (),
             full: bool = False, claims_path: Path | None = None, dry_run: bool = False,
             explain: Collection[str] = (), option: str = "--workload") -> PlanResult:
    """Re-plan what changed (or `only`, or everything with `full`) and commit a generation.

    With `claims_path`: a what-if over the file's claims (`dry_run`), or the file's claims
    recorded and planned in one transaction (see the module docstring). Raises ConfigError for
    a bad claims file (before anything is written) and UsageError when `only` names a workload
    without a claim (`option` names the flag in the message).
    """
    if claims_path is None:
        return _plan(config, store, clock, only=only, full=full, what_if=None,
                     dry_run=dry_run, explain=explain, option=option, why="asked")
    from_file = load_claims(claims_path, config.contracts)
    if dry_run:
        return _plan(config, store, clock, only=only, full=True, what_if=from_file,
                     dry_run=True, explain=explain, option=option, why="asked")
    with store.transaction():
        record_file_claims(store, from_file)
        return _plan(config, store, clock, full=full, what_if=None, dry_run=False,
                     explain=explain, option=option, why="claims file",
                     only=sorted({c.workload for c in from_file} | set(only)))


def plan_view(config: Config, store: Store, clock: Clock, *, only: Collection[str] = (),
              full: bool = False, claims_path: Path | None = None, dry_run: bool = False,
              explain: str | None = None, blast: bool = False) -> PlanView:
    """``scoctl plan``: `run_plan`, then the plans to show. An `explain` workload the run did
    not re-plan is explained by a dry re-plan of just that workload (an unchanged claim
    re-plans to the very same plan: no churn). The blast radius (`core.blast`) of the `explain`
    workload's plan, and with `blast` of every shown plan; of no other (it is most of the cost
    of a large plan's output). Raises UsageError when `explain` has no plan."""
    result = run_plan(config, store, clock, only=only, full=full, claims_path=claims_path,
                      dry_run=dry_run, explain=[explain] if explain else [])
    if claims_path is not None:
        records = dict(result.records)
    else:
        records = dict(store.plans()) if not dry_run else {}
        records.update(result.records)
    explained = result.records.get(explain) if explain else None
    planned = result  # the run that planned the `explain` workload now
    if explain and explained is None and claims_path is None:
        planned = run_plan(config, store, clock, only=[explain], dry_run=True,
                           explain=[explain], option="--explain")
        explained = planned.records.get(explain)
    if explained is not None:
        stored = records.get(explained.workload)
        records[explained.workload] = replace(
            explained, generation=stored.generation if stored else explained.generation,
            explain=why_excluded(explained.explain, store.exclusions()))
    if explain and explain not in records:
        raise UsageError(f"--explain {explain}: no plan for this workload")
    asked = records if blast else {explain: records[explain]} if explain else {}
    blasts = blast_radii(asked, claims_of(store.claims()), result.plans, config.flavors,
                         config.pools, {name: c.floor for name, c in config.contracts.items()}
                         ) if asked else {}
    moving = (rebalance_of(config, store, clock, explain, planned)
              if explain and claims_path is None else None)
    return PlanView(result=result, records=dict(sorted(records.items())), explain=explain,
                    blasts=blasts, rebalance=moving)


def rebalance_of(config: Config, store: Store, clock: Clock, slug: str,
                 planned: PlanResult | None = None) -> rebalance.Decision:
    """What a rebalance (design: Rebalance) does for one workload now: its plan as the planner gives
    it now (`planned`, the run that planned it, else a dry re-plan: an unchanged claim
    re-plans to its stored plan) against its fresh plan (`planner.plan_fresh`: the same
    claim, exclusions, depth and scores, as if it held no unit), with its ready units and the
    trigger's since as the last run recorded it."""
    if planned is None or slug not in planned.rebalances:
        planned = run_plan(config, store, clock, only=[slug], dry_run=True)
    return planned.rebalances.get(slug) or rebalance.Decision(None)
