"""The composer: the stages chained into `scoctl run`, and the compositions single commands need.

A stage never calls another stage (an import contract holds it); this module does:

- `acquire_with_fallback` (``scoctl acquire``): the acquire stage; then, in the same run, the
  workloads that lost a pool to a capacity fault are re-planned without it (plan stage) and
  launched again (acquire stage, scoped to them), at most `MAX_ROUNDS` rounds in all; the Slurm
  nodes of launches that failed for sure go back to powered-down (Slurm power stage).
- `reconcile_and_release` (``scoctl reconcile``): the reconcile stage, then the Slurm nodes it
  powered down leave their claims (Slurm power stage), then one batch of the rows the state no
  longer keeps is pruned (retention stage).
- `run_once` (``scoctl run``): watch (one pass) → the Slurm power stage (what Slurm's
  power-saving programs spooled; when Slurm is in use) → plan → acquire with fallback →
  reconcile with release → the notice stage on reconcile's server listing (its noticed Slurm
  nodes leave their claims; a new notice is planned and acquired again at once:
  ``notice-plan``, ``notice-acquire``), each called as a function (never a subprocess) and
  timed.

In `run_once` an API failure in one stage does not stop the others — every later stage is safe
on the state the earlier ones left (plan works on the claims already recorded, acquire on the
latest plan, reconcile on what Nova says) — but the pass is reported as failed and `exit_code`
is 1 (DESIGN §8). A ConfigError stops the pass (exit 2: a person must fix the input). Metrics are
written after every pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from scoctl.adapters.counting import CallCounter, CountingCloud
from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.core.model import NewEvent
from scoctl.errors import EXIT_FAILURE, EXIT_OK, ApiError
from scoctl.host.discovery import host_hints
from scoctl.services.join_tokens import JoinTokens
from scoctl.services.metrics import RunSample, StageSample
from scoctl.stages.acquire import (
    DEFAULT_POLL_S,
    DEFAULT_WATCH_S,
    AcquireResult,
    BootFiles,
    BudgetFactory,
    CloudFactory,
    Observer,
    default_budget,
    default_connect,
    run_acquire,
)
from scoctl.stages.notice import NoticeResult, run_notices
from scoctl.stages.plan import run_plan
from scoctl.stages.reconcile import ReconcileResult, run_reconcile
from scoctl.stages.retention import prune_state
from scoctl.stages.slurm_power import apply_requests, hand_back, release_nodes

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import Source
    from scoctl.host.budget import Budget
    from scoctl.state import Store

log = logging.getLogger(__name__)

MAX_ROUNDS = 3  # the first launch and at most two same-run fallbacks
DEADLINE_PASSED = "the pass's deadline (timeouts.run) passed: not run"


# --------------------------------------------------------------------------- compositions


class _RegionCache:
    """One token budget and one cloud per region for every round of a run (connected lazily:
    a run that launches nothing never connects)."""

    def __init__(self, connect: CloudFactory, budget: BudgetFactory) -> None:
        self._connect, self._budget = connect, budget
        self.budgets: dict[str, Budget] = {}
        self.clouds: dict[str, Cloud] = {}

    def budget(self, config: Config, region: Region) -> Budget:
        if region.name not in self.budgets:
            self.budgets[region.name] = self._budget(config, region)
        return self.budgets[region.name]

    def connect(self, config: Config, region: Region, budget: Budget) -> Cloud:
        if region.name not in self.clouds:
            self.clouds[region.name] = self._connect(config, region, budget)
        return self.clouds[region.name]


def _planable(store: Store, workloads: Collection[str]) -> list[str]:
    """The workloads with a claim that asks for something (those a re-plan can cover)."""
    return sorted(w for w in workloads if (claim := store.claim(w)) is not None and claim.requests)


def acquire_with_fallback(
    config: Config, store: Store, clock: Clock, *, region: str | None = None,
    dry_run: bool = False, connect: CloudFactory = default_connect,
    budget: BudgetFactory = default_budget, watch: float = DEFAULT_WATCH_S,
    poll: float = DEFAULT_POLL_S, sleep: Callable[[float], None] = time.sleep,
    observer: Observer | None = None, scheduler: BatchScheduler | None = None,
    join_tokens: JoinTokens | None = None, leads: Callable[[str], bool] | None = None,
) -> AcquireResult:
    """``scoctl acquire`` (DESIGN §6): launch what the plan needs, fall back in the same run
    from pools that fail with a capacity fault, and hand the Slurm nodes of launches that
    failed for sure back to Slurm (`scheduler`; without it they only leave their claims).

    Raises what `run_acquire` raises; `replanned` names the workloads re-planned in the run
    and `powered_down` the Slurm nodes handed back. `leads` as for `run_acquire`.
    """
    cache = _RegionCache(connect, budget)
    boot = BootFiles(config, join_tokens or JoinTokens(config, clock))  # for every round

    def round_of(round_no: int, scope: Collection[str] | None) -> AcquireResult:
        return run_acquire(config, store, clock, region=region, dry_run=dry_run,
                           connect=cache.connect, budget=cache.budget, watch=watch, poll=poll,
                           sleep=sleep, observer=observer, scope=scope, round_no=round_no,
                           boot=boot, leads=leads)

    result = round_of(0, None)
    for round_no in range(1, MAX_ROUNDS):
        planable = _planable(store, result.lost) if not dry_run else []
        if not planable:
            break
        replanned = run_plan(config, store, clock, only=planable).changed
        result = replace(result, replanned=result.replanned + replanned)
        if not replanned:
            break
        result = result.then(round_of(round_no, set(replanned)))
    if result.release and not dry_run:
        result = replace(result, powered_down=hand_back(store, scheduler, result.release),
                         release=())
    return result


def reconcile_and_release(config: Config, store: Store, clock: Clock,
                          **options: Any) -> ReconcileResult:
    """``scoctl reconcile``: `run_reconcile` (same options), then the Slurm nodes it powered
    down leave their claims so Slurm requeues their jobs, then the retention stage prunes
    (`pruned`; not on a dry run)."""
    result = run_reconcile(config, store, clock, **options)
    if result.dry_run:
        return result
    if result.released:
        release_nodes(store, result.released, suspend=False)
    if result.refused is not None:  # deposed in a region: exit 75, the rest recorded
        raise result.refused
    return replace(result, pruned=prune_state(config, store, clock))


def notices_and_release(config: Config, store: Store, clock: Clock,
                        listed: ReconcileResult | None, **options: Any) -> NoticeResult:
    """The notice stage on reconcile's server listing (`listed`; None: it lists for itself),
    with `run_notices`'s other options; then the noticed Slurm nodes leave their claims, so no
    second server is launched under their names (`run` and the controller both call this)."""
    servers = {r.region: r.servers for r in listed.regions} if listed is not None else None
    result = run_notices(config, store, clock, servers=servers, **options)
    if result.release:
        release_nodes(store, result.release, suspend=False)
    if result.refused is not None:  # deposed in a region: exit 75, the rest recorded
        raise result.refused
    return result


# --------------------------------------------------------------------------- one pass


@dataclass(frozen=True)
class StageReport:
    """One stage of a pass: how long it took, whether it succeeded, what it returned."""

    name: str
    seconds: float
    ok: bool
    errors: tuple[str, ...] = ()
    skipped: str = ""
    result: Any = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"stage": self.name, "seconds": round(self.seconds, 4),
                               "ok": self.ok, "errors": list(self.errors)}
        if self.skipped:
            out["skipped"] = self.skipped
        return out


@dataclass(frozen=True)
class RunResult:
    stages: tuple[StageReport, ...]
    seconds: float
    metrics_file: str | None = None

    @property
    def failed(self) -> tuple[str, ...]:
        """The stages whose API failed (after retries)."""
        return tuple(s.name for s in self.stages if not s.ok)

    @property
    def exit_code(self) -> int:
        """0, or 1 when a stage's API failed (DESIGN §8)."""
        return EXIT_FAILURE if self.failed else EXIT_OK

    def stage(self, name: str) -> StageReport | None:
        return next((s for s in self.stages if s.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": not self.failed, "failed": list(self.failed),
                "seconds": round(self.seconds, 4),
                "stages": [s.as_dict() for s in self.stages],
                **({"metrics_file": self.metrics_file} if self.metrics_file else {})}


@dataclass
class Systems:
    """The outside systems one pass talks to. Missing ones are built from the config."""

    cluster: Cluster | None = None
    scheduler: BatchScheduler | None = None
    clouds: Mapping[str, Cloud] | None = None
    sources: tuple[Source, ...] = ()  # what watch reads: "k8s", "slurm"
    owned: list[Any] = field(default_factory=list)

    def close(self) -> None:
        for item in self.owned:
            item.close()
        self.owned.clear()


def slurm_of(config: Config) -> BatchScheduler | None:
    """The Slurm adapter when `Config.sources` finds Slurm in use on this host (built, not
    called: it puts the CLOUD nodes of failed launches back to powered-down)."""
    if "slurm" not in config.sources(host_hints(config)):
        return None
    from scoctl.adapters.factory import scheduler_for

    return scheduler_for(config)


def connect_systems(config: Config) -> Systems:
    """Kubernetes and Slurm as `Config.sources` finds them in use on this host (clouds stay
    lazy)."""
    from scoctl.adapters.factory import cluster_for, scheduler_for

    sources = config.sources(host_hints(config))
    cluster = cluster_for(config) if "k8s" in sources else None
    scheduler = scheduler_for(config) if "slurm" in sources else None
    systems = Systems(cluster=cluster, scheduler=scheduler, sources=sources)
    if cluster is not None:
        systems.owned.append(cluster)
    return systems


class _Pass:
    """One pass of `run_once`: the stages in order, their reports, and what they shared."""

    def __init__(self, config: Config, store: Store, clock: Clock, systems: Systems,
                 budget: BudgetFactory, leads: Callable[[str], bool] | None = None) -> None:
        self.config, self.store, self.clock, self.systems = config, store, clock, systems
        self.leads = leads
        self.counter = CallCounter()
        self.reports: list[StageReport] = []
        self.cache = _RegionCache(self._connect, budget)
        self.deadline = time.monotonic() + config.timeouts.run  # no Nova call or stage after

    def _connect(self, config: Config, region: Region, budget: Budget) -> Cloud:
        given = (self.systems.clouds or {}).get(region.name)
        if given is None:
            from scoctl.adapters.factory import cloud_for

            given = cloud_for(config, region, budget=budget, deadline=self.deadline)
        return CountingCloud(given, region.name, self.counter)

    def cloud(self, config: Config, region: Region) -> Cloud:
        """The region's (counted) cloud, for reconcile."""
        return self.cache.connect(config, region, self.cache.budget(config, region))

    def stage(self, name: str, body: Callable[[], tuple[Any, list[str]]],
              skip: str = "") -> Any:
        """Run one stage, timed; an API failure is reported and the pass goes on."""
        if skip:
            self.reports.append(StageReport(name, 0.0, True, skipped=skip))
            return None
        if time.monotonic() >= self.deadline:
            self.reports.append(StageReport(name, 0.0, False, (DEADLINE_PASSED,)))
            return None
        t0 = time.perf_counter()
        try:
            result, errors = body()
        except ApiError as exc:
            log.warning("run: %s failed: %s", name, exc)
            self.reports.append(StageReport(name, time.perf_counter() - t0, False, (str(exc),)))
            return None
        self.reports.append(StageReport(name, time.perf_counter() - t0, not errors,
                                        tuple(errors), result=result))
        return result

    def record_deadline(self, run: RunResult) -> None:
        """The pass ran out of time: say so in the event log, with what it did and did not."""
        if time.monotonic() < self.deadline:
            return
        limit = self.config.timeouts.run
        log.warning("run: the pass took longer than timeouts.run (%gs); stopped", limit)
        self.store.append_event(NewEvent(None, "RUN_DEADLINE_EXCEEDED", "warning", {
            "timeout": limit, "seconds": round(run.seconds, 3),
            "ran": [s.name for s in run.stages
                    if s.errors != (DEADLINE_PASSED,) and not s.skipped],
            "not_run": [s.name for s in run.stages if s.errors == (DEADLINE_PASSED,)],
            "failed": list(run.failed)}))

    def write_metrics(self, watch: Any, plan: Any, run: RunResult) -> RunResult:
        """Write the metrics textfile (config `metrics.textfile`) for this pass."""
        if self.config.metrics_file is None:
            return run
        from scoctl.host.metrics import write_atomically
        from scoctl.services.metrics import collect

        budgets = self.cache.budgets
        sample = RunSample(
            stages=[StageSample(s.name, s.seconds, s.ok) for s in self.reports],
            plan_seconds=getattr(plan, "seconds", None), calls=self.counter.snapshot(),
            tokens_available={name: b.available() for name, b in budgets.items()},
            tokens_spent={name: b.spent for name, b in budgets.items()},
            succeeded_at=self.clock.now().timestamp() if not run.failed else None,
            pending={name: c.pending for name, c in getattr(watch, "sources", {}).items()
                     if c.error is None},
            leader={r.name: self.leads is None or self.leads(r.name)
                    for r in self.config.regions})
        write_atomically(self.config.metrics_file, collect(self.store, sample))
        return replace(run, metrics_file=str(self.config.metrics_file))


def run_once(config: Config, store: Store, clock: Clock, systems: Systems, *,
             teardown: bool = True, region: str | None = None,
             acquire_watch: float | None = None,
             sleep: Callable[[float], None] = time.sleep,
             budget: BudgetFactory | None = None,
             leads: Callable[[str], bool] | None = None) -> RunResult:
    """One pass of the loop; the caller holds the run lock. Writes metrics when configured.

    After `timeouts.run` no Nova call starts and no further stage runs: the pass ends failed
    (exit 1) with what it did recorded, and a `RUN_DEADLINE_EXCEEDED` event. With `leads`
    (several runners on a shared state), acquire and reconcile act only for the regions this
    runner leads; watch and plan run anywhere.
    """
    started = time.perf_counter()
    this_pass = _Pass(config, store, clock, systems, budget or default_budget, leads)

    def watch() -> tuple[Any, list[str]]:
        from scoctl.stages.watch import run_pass

        result = run_pass(config, store, clock, sources=systems.sources, teardown=teardown,
                          cluster=systems.cluster, scheduler=systems.scheduler)
        return result, list(result.errors)

    def slurm_power() -> tuple[Any, list[str]]:
        result = apply_requests(config, store, systems.scheduler)
        return result, list(result.errors)

    def plan() -> tuple[Any, list[str]]:
        return run_plan(config, store, clock), []

    def acquire() -> tuple[Any, list[str]]:
        result = acquire_with_fallback(
            config, store, clock, region=region, connect=this_pass.cache.connect,
            budget=this_pass.cache.budget,
            watch=DEFAULT_WATCH_S if acquire_watch is None else acquire_watch, sleep=sleep,
            scheduler=systems.scheduler, leads=leads)
        return result, list(result.errors)

    def reconcile() -> tuple[Any, list[str]]:
        result = reconcile_and_release(config, store, clock, region=region, teardown=teardown,
                                       connect=this_pass.cloud, cluster=systems.cluster,
                                       scheduler=systems.scheduler, discover=False,
                                       leads=leads)
        return result, list(result.errors)

    def notice(listed: ReconcileResult | None) -> tuple[Any, list[str]]:
        result = notices_and_release(config, store, clock, listed, region=region,
                                     connect=this_pass.cloud, cluster=systems.cluster,
                                     scheduler=systems.scheduler, sleep=sleep, leads=leads)
        return result, list(result.errors)

    watched = this_pass.stage("watch", watch,
                        "" if systems.sources else "no Kubernetes or Slurm configured")
    if "slurm" in systems.sources:  # what Slurm's power-saving programs spooled
        this_pass.stage("slurm-power", slurm_power)
    planned = this_pass.stage("plan", plan)
    this_pass.stage("acquire", acquire)
    reconciled = this_pass.stage("reconcile", reconcile)
    noticed = this_pass.stage("notice", lambda: notice(reconciled))
    if noticed is not None and noticed.replan:  # replace the noticed units in this pass
        this_pass.stage("notice-plan", plan)
        this_pass.stage("notice-acquire", acquire)
    run = RunResult(stages=tuple(this_pass.reports), seconds=time.perf_counter() - started)
    this_pass.record_deadline(run)
    return this_pass.write_metrics(watched, planned, run)
