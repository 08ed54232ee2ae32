"""The `Store` Protocol: the state as the stages and commands see it (design: State).

Stages and commands type against `Store` and never know the backend; `open_store` picks one from
the config's ``state`` value (today SQLite, `scoctl.state.sqlite.SqliteStore`). A Store loads and
saves the value types of `scoctl.core.model`; it saves what a stage decided and decides nothing.

Transactions: every method that writes runs in a transaction of its own unless the caller holds
one; a stage groups its writes with ``with store.transaction():`` (re-entrant, one per stage
pass), so a crash leaves the previous state, never half a plan.

Errors: opening raises `StateError` (exit 2) for a state that cannot be used. Unless a method
says otherwise it raises nothing of its own: a failure of the database itself (disk full, a lock
held past the busy timeout, a constraint the caller broke) surfaces as the backend's exception,
rolls the enclosing transaction back and ends the stage.

The Protocol is split by concern (`Lifecycle`, `WorkloadState`, `PlanState`, `FleetState`,
`LatencyState`, `NoticeState`); `Store` is all of them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol, Self

if TYPE_CHECKING:  # the interface names its rows; a store builds them on first use
    from scoctl.core.claims import ClaimWrite
    from scoctl.core.model import (
        ClaimRecord,
        DisruptionBlock,
        EventRecord,
        ExclusionRecord,
        GangRecord,
        Histogram,
        InstanceRecord,
        InstanceUpdate,
        LatencySample,
        LaunchRecord,
        MetricCounters,
        NewEvent,
        NoticedRecord,
        NoticeRecord,
        PlanGeneration,
        PlanWorkloadRecord,
        RankingCache,
        RebalanceRecord,
        Sighting,
        TokenRecord,
        WorkloadRecord,
    )
    from scoctl.core.model.controls import ClaimStep, Pause
    from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus, PauseScope


class Lifecycle(Protocol):
    """An open state: its schema, its transactions, its clock."""

    @property
    def migrated_from(self) -> int | None:
        """The schema version opening migrated from, or None when it was already current."""
        ...

    def schema_version(self) -> int:
        """The schema version the state is at (the number of migrations applied)."""
        ...

    def transaction(self) -> AbstractContextManager[object]:
        """One write transaction; re-entrant (an inner one joins the outer).

        Any exception inside rolls the whole outermost transaction back and is re-raised.
        """
        ...

    def now(self) -> str:
        """The store clock's time, RFC 3339 UTC: what ``updated`` fields and events get."""
        ...

    def counts(self) -> dict[str, int]:
        """Row counts of the main tables, for the `status` and `init` summaries."""
        ...

    def close(self) -> None:
        """Release the connection; the store is unusable afterwards."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...


class WorkloadState(Protocol):
    """Workloads (one active row per slug), the append-only event log, claims."""

    def active_workload(self, slug: str) -> WorkloadRecord | None:
        """The active (pending, queued, preparing, running) row of `slug`, if any."""
        ...

    def latest_workload(self, slug: str) -> WorkloadRecord | None:
        """The newest row of `slug`, active or not."""
        ...

    def latest_by_id(self, workload_id: int) -> WorkloadRecord | None:
        """The row `workload_id` as it is now."""
        ...

    def workload_by_job(self, job_id: str) -> WorkloadRecord | None:
        """The newest row tracking Slurm job `job_id`."""
        ...

    def workloads(self, *, active_only: bool = False) -> list[WorkloadRecord]:
        """The newest row of every slug (or only the active rows), by slug."""
        ...

    def ensure_workload(self, slug: str, *, kind: str, source: str, contract: str,
                        job_id: str | None = None,
                        namespace: str | None = None) -> WorkloadRecord:
        """The active row of `slug` (taking `job_id` when it names a new job), or a new
        ``pending`` one (a resubmission is a new row)."""
        ...

    def set_status(self, workload_id: int, status: str) -> None:
        """Set a row's status as the caller decided (the gate's over-capacity verdict)."""
        ...

    def save_token(self, record: TokenRecord) -> WorkloadRecord | None:
        """Save what a token does, as `core.tokens.decide_token` decided: the row's status,
        last token and pending reason when `record.update_row`, and the event. Returns the row
        after it (None for an event logged against the slug only)."""
        ...

    def append_event(self, event: NewEvent) -> int:
        """Append one event and return its id. Secrets in its `detail` are scrubbed first; its
        `ts` (RFC 3339, any offset) is stored in UTC, an unreadable one becomes now."""
        ...

    def events(self, *, workload: str | None = None, since: str | None = None,
               after_id: int = 0, limit: int | None = None,
               tokens: Sequence[str] | None = None,
               levels: Sequence[str] | None = None) -> list[EventRecord]:
        """Events in order, filtered by workload, time (RFC 3339, inclusive), id, token and
        level (any of those given)."""
        ...

    def prune_events(self, before: str, limit: int) -> int:
        """Delete up to `limit` of the oldest events older than `before` (RFC 3339); returns
        how many went. The only way an event ever leaves: the schema refuses any other delete,
        any update, and the delete of an event within a day of the newest one."""
        ...

    def claim(self, workload: str) -> ClaimRecord | None:
        """The claim of `workload`, if it has one."""
        ...

    def claims(self) -> list[ClaimRecord]:
        """Every claim, by workload."""
        ...

    def save_claim(self, write: ClaimWrite) -> ClaimRecord:
        """Save a claim as `core.claims.claim_write` decided (a new version, or the stored
        version's new pod count); returns the stored claim."""
        ...


class PlanState(Protocol):
    """Plan generations, the current plan per workload, and the plan stage's bookkeeping."""

    def latest_generation(self) -> PlanGeneration | None:
        """The newest plan generation, None before the first plan."""
        ...

    def plans(self, *, explain: bool = False, units: bool = True,
              only: Collection[str] | None = None) -> dict[str, PlanWorkloadRecord]:
        """The current plan of every workload (or of those in `only`). Explain lines only with
        `explain`; without `units` the plans carry no pools."""
        ...

    def planned_units(self) -> list[tuple[str, str, int]]:
        """(workload, pool, units) of every current plan row."""
        ...

    def commit_plan(self, *, ranking: str | None, plans: Sequence[PlanWorkloadRecord],
                    full: bool, removed: Sequence[str] = ()) -> int:
        """Write one new generation holding `plans` and dropping `removed`; every other
        workload keeps its rows. Returns the generation number."""
        ...

    def mark_dirty(self, workloads: Iterable[str], reason: str) -> None:
        """Ask the next `plan` to re-plan these workloads; a new reason replaces an old one."""
        ...

    def dirty(self) -> dict[str, str]:
        """Workloads marked for re-planning, with the reason."""
        ...

    def clear_dirty(self, names: Iterable[str]) -> None:
        """The plan stage re-planned these workloads."""
        ...

    def last_scores(self) -> dict[str, float]:
        """The ranking scores the last plan pass used, by pool ({} before any)."""
        ...

    def save_last_scores(self, scores: Mapping[str, float]) -> None:
        """Replace the scores the last plan pass used."""
        ...

    def last_good_ranking(self) -> RankingCache | None:
        """The last ranking read from a URL, None when none was ever read."""
        ...

    def save_last_good_ranking(self, cache: RankingCache) -> None:
        """Replace the last good URL ranking."""
        ...


class FleetState(Protocol):
    """Launch intents, instances, pool exclusions, and what reconcile and Slurm power keep."""

    def add_launch(self, launch: LaunchRecord) -> None:
        """Record a launch intent, before the cloud call (crash safety). A `launch_id` already
        recorded is a constraint failure of the backend."""
        ...

    def update_launch(self, launch_id: str, *, status: LaunchStatus,
                      reservation_id: str | None = None,
                      error: str | None = None) -> None:
        """Move a launch on; `reservation_id` and `error` keep their old value when None."""
        ...

    def launches(self, *, status: Sequence[str] | None = None) -> list[LaunchRecord]:
        """Launches (with one of `status`), oldest first."""
        ...

    def upsert_instance(self, instance: InstanceRecord) -> None:
        """Insert the instance, or replace the row with its id."""
        ...

    def update_instance(self, update: InstanceUpdate) -> None:
        """Set the fields `update` names of its instance (``updated`` becomes now)."""
        ...

    def instances(self, *, region: str | None = None, workload: str | None = None,
                  include_deleted: bool = False) -> list[InstanceRecord]:
        """Instances of `region` / `workload`, deleted ones only with `include_deleted`."""
        ...

    def instance(self, instance_id: str) -> InstanceRecord | None:
        """The instance `instance_id`, deleted or not."""
        ...

    def prune_instances(self, statuses: Sequence[InstanceStatus], before: str, limit: int
                        ) -> int:
        """Delete up to `limit` of the oldest instances with one of `statuses` last updated
        before `before` (RFC 3339); returns how many went."""
        ...

    def prune_launches(self, statuses: Sequence[LaunchStatus], before: str, limit: int
                       ) -> int:
        """Delete up to `limit` of the oldest launches with one of `statuses` last updated
        before `before` (RFC 3339); returns how many went."""
        ...

    def disrupted(self, since: str) -> list[InstanceRecord]:
        """Instances of every region whose disruption is in flight (a reason set, not
        deleted), and those whose disruption started at `since` (RFC 3339) or later, deleted
        or not (the budgets' rates), by start."""
        ...

    def disruption_blocks(self) -> list[DisruptionBlock]:
        """The (workload, reason)s a disruption budget holds back now, by workload, reason."""
        ...

    def save_disruption_blocks(self, workloads: Iterable[str],
                               blocks: Iterable[DisruptionBlock]) -> None:
        """Replace the blocks of `workloads` with `blocks` (other workloads keep theirs)."""
        ...

    def rebalances(self) -> dict[str, RebalanceRecord]:
        """Each workload's rebalance that waits out its stabilize window or is planned
        (design: Rebalance), by workload."""
        ...

    def save_rebalances(self, workloads: Iterable[str],
                        records: Iterable[RebalanceRecord]) -> None:
        """Replace the rebalances of `workloads` with `records` (others keep theirs)."""
        ...

    def gangs(self) -> dict[str, GangRecord]:
        """Each gang's record between passes (design: Gangs), by workload."""
        ...

    def gang_claims(self) -> dict[str, tuple[int, int]]:
        """(members per gang, pods) of each gang claim that asks for something, by workload
        (one narrow query: reconcile asks every pass)."""
        ...

    def save_gangs(self, workloads: Iterable[str], records: Iterable[GangRecord]) -> None:
        """Replace the gang records of `workloads` with `records` (others keep theirs)."""
        ...

    def exclude(self, pool: str, reason: str, until: str) -> None:
        """Exclude `pool` from planning until `until` (RFC 3339); of the pool's exclusions the
        later `until` (and its reason) stays: a shorter one never cuts a longer one short."""
        ...

    def exclusions(self, now: str | None = None) -> list[ExclusionRecord]:
        """Exclusions still in force at `now` (default: the store clock), by pool."""
        ...

    def orphans_seen(self, region: str) -> dict[str, str]:
        """When each orphan server of `region` was first seen (server id → RFC 3339)."""
        ...

    def orphan_counts(self) -> dict[str, int]:
        """How many orphan servers each region has (regions with none are left out)."""
        ...

    def save_orphans_seen(self, region: str, seen: Mapping[str, str]) -> None:
        """Replace `region`'s orphan sightings with `seen`."""
        ...

    def save_launch_specs(self, specs: Mapping[str, Mapping[str, Any]]) -> None:
        """Record each launch spec hash's canonical values (design: Drift; a hash recorded once
        keeps its first values)."""
        ...

    def launch_specs(self, hashes: Iterable[str]) -> dict[str, dict[str, Any]]:
        """The recorded canonical values of those of `hashes` that were recorded."""
        ...

    def save_image_id(self, region: str, name: str, image_id: str) -> None:
        """Record the id `region`'s image `name` resolved to when last asked (now)."""
        ...

    def image_ids(self, region: str) -> dict[str, str]:
        """The last recorded id of each of `region`'s image names."""
        ...

    def suspended_nodes(self) -> frozenset[str]:
        """Slurm nodes handed back by SuspendProgram / ResumeFailProgram whose servers are
        not yet confirmed gone."""
        ...

    def mark_suspended(self, nodes: Iterable[str]) -> None:
        """Add `nodes` to the suspended Slurm nodes."""
        ...

    def clear_suspended(self, nodes: Iterable[str]) -> None:
        """Remove `nodes` from the suspended Slurm nodes (resumed, or their server is gone)."""
        ...

    def node_shapes(self) -> dict[str, dict[str, int]]:
        """The shape (resource → amount, as a claim counts it) of every Slurm node seen."""
        ...

    def save_node_shapes(self, shapes: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the shapes of the nodes named in `shapes`; other nodes keep theirs."""
        ...


class LatencyState(Protocol):
    """Placement latency (design: Controller): demand first seen and not yet placed, the histograms
    of
    the time to a committed plan and to Ready nodes, and their latest samples."""

    def sightings(self) -> list[Sighting]:
        """Every open sighting of demand, by workload."""
        ...

    def save_sightings(self, sightings: Iterable[Sighting], drop: Iterable[str] = ()) -> None:
        """Store (replace) these sightings and end those of the `drop` workloads."""
        ...

    def histograms(self) -> dict[str, Histogram]:
        """Every latency histogram, by metric (`core.model.latency.METRICS`)."""
        ...

    def save_latency(self, histograms: Mapping[str, Histogram],
                     samples: Sequence[LatencySample]) -> None:
        """Replace these histograms and add the samples (the latest 1,000 per metric stay)."""
        ...

    def latency_samples(self, metric: str) -> list[LatencySample]:
        """The latest samples of `metric`, oldest first."""
        ...


class NoticeState(Protocol):
    """Reclaim notices (design: Notices): what ``scoctl notice`` announced, and each noticed
    instance from the notice to its end (kept afterwards for the reclaim metrics)."""

    def add_notice(self, notice: NoticeRecord) -> None:
        """Record an announced reclaim; a later one for the same (kind, target) replaces it."""
        ...

    def notices(self) -> list[NoticeRecord]:
        """Every announced reclaim still recorded, by kind and target."""
        ...

    def drop_notices(self, keys: Iterable[tuple[str, str]]) -> None:
        """Forget announced reclaims by (kind, target)."""
        ...

    def save_noticed(self, row: NoticedRecord) -> None:
        """Insert or replace one noticed instance, keyed by (server_id, noticed_at). A second
        open row for one server is a constraint failure of the backend."""
        ...

    def noticed(self, *, region: str | None = None, awaiting_since: str | None = None,
                every: bool = False) -> list[NoticedRecord]:
        """The open noticed instances (of `region`); with `awaiting_since` (RFC 3339) also
        those closed since then whose replacement is not Ready yet; with `every`, all of them.
        Oldest notice first."""
        ...


class ControlState(Protocol):
    """Operator controls and showback: pauses of launches or disruptions (`scoctl pause`,
    `resume`), and the claims' versions over time (`scoctl cost`)."""

    def pauses(self) -> list[Pause]:
        """Every recorded pause (lapsed ones too, until dropped), by scope."""
        ...

    def save_pause(self, pause: Pause) -> None:
        """Record `pause`, replacing a pause of the same scope."""
        ...

    def drop_pauses(self, scopes: Iterable[PauseScope]) -> list[Pause]:
        """Drop the pauses of `scopes`; returns those that were recorded."""
        ...

    def claim_history(self, since: str) -> list[ClaimStep]:
        """Each claim version written since `since` (RFC 3339), and for each workload the
        version that held at `since`, oldest first (showback; versions age out with the
        events, the latest of each workload stays)."""
        ...


class Store(Lifecycle, WorkloadState, PlanState, FleetState, LatencyState, NoticeState,
            ControlState, Protocol):
    """The whole state interface every stage and command uses."""

    def metric_counters(self) -> MetricCounters:
        """The counters `scoctl run` keeps across runs (zero before the first)."""
        ...

    def save_metric_counters(self, counters: MetricCounters) -> None:
        """Replace the counters with `counters` (the run stage added this pass)."""
        ...
