"""The one composer: the steps of a pass, and the compositions single commands need.

A stage never calls another stage (an import contract holds it); this module chains them, for
every driver alike — ``run --once``, ``run --interval`` (`runner.loop`) and ``run --follow``
(`runner.controller`, which only decides *when* a step is due, by `core.controller`'s rules):

- `Deps`: what every step uses — the config, the state, the clock (with `sleep`), the clouds
  and token budgets per region (`Regions`), the Kubernetes and Slurm adapters, the sources in
  use, the leadership test and the pass's deadline.
- `Pass`: one pass of steps, each a method that runs its stages in order, times them and keeps
  their reports (`StepReport`): `intake` (watch, then what Slurm's power-saving programs
  spooled), `act` (plan, then acquire with its same-run fallback), `reconcile` (reconcile, then
  the reclaim notices on reconcile's own server listing). `run_once` is intake → act →
  reconcile, and act again when a new notice left workloads to re-plan.
- the compositions: `acquire_with_fallback` (``scoctl acquire``), `reconcile_and_release` and
  `reconcile_with_notices` (``scoctl reconcile``: a timer that runs the stages one by one
  handles reclaim notices too, design: Reconciler), `notices_and_release`.

An API failure in one stage does not stop the others — every later stage is safe on the state
the earlier ones left (plan works on the claims already recorded, acquire on the latest plan,
reconcile on what Nova says) — but the pass is reported as failed and its exit code is 1
(design: CLI). A ConfigError (exit 2) or a lost lease (NotLeader, exit 75) stops the pass.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from scoctl.adapters.counting import CallCounter, CountingCloud
from scoctl.adapters.guard import Guard, GuardedCloud, cloud_guard
from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.core import controller as schedule
from scoctl.core.intake.k8s import IntakeMemo
from scoctl.core.model import NewEvent
from scoctl.core.model.problems import Api, Problem
from scoctl.core.reconcile import BOOTING, LIVE
from scoctl.errors import EXIT_FAILURE, EXIT_OK, ApiError, ScoctlError, StateUnavailable
from scoctl.host.discovery import host_hints
from scoctl.services.join_tokens import JoinTokens
from scoctl.services.kube_events import EventWriter, SyncResult, facts_of
from scoctl.services.latency import claim_sizes, record_progress, record_sightings
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
from scoctl.stages.plan import PlanResult, run_plan
from scoctl.stages.reconcile import ReconcileResult, run_reconcile
from scoctl.stages.retention import prune_state
from scoctl.stages.slurm_power import apply_requests, hand_back, release_nodes
from scoctl.stages.watch import WatchResult, run_pass

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import PodInfo, Source
    from scoctl.host.budget import Budget
    from scoctl.state import Store

log = logging.getLogger(__name__)

MAX_ROUNDS = 3  # the first launch and at most two same-run fallbacks
DEADLINE_PASSED = "the pass's deadline (timeouts.run) passed: not run"


# --------------------------------------------------------------------------- dependencies


class Regions:
    """One token budget and one counted cloud per region, connected on first use (a pass that
    launches nothing never connects). The controller keeps one for its life; ``run --once``
    and ``--interval`` take a fresh one each pass, its Nova calls bound to the pass's deadline.

    Clouds come from `clouds` (by region name), else `connect(config, region, budget)`, else
    the config's clouds.yaml entry spending the region's budget. Each passes its region's
    `Guard` (`adapters.guard`): once a call to a region goes unanswered, the region's other
    calls fail at once, and the other regions go on; `probe` (the controller): a thread of
    the guard's own looks for the region's answer."""

    def __init__(self, *, clouds: Mapping[str, Cloud] | None = None,
                 connect: CloudFactory | None = None, budget: BudgetFactory | None = None,
                 deadline: float | None = None, probe: bool = False) -> None:
        self.given = dict(clouds or {})
        self._connect, self._budget = connect, budget or default_budget
        self.deadline = deadline
        self.counter = CallCounter()
        self.budgets: dict[str, Budget] = {}
        self.clouds: dict[str, Cloud] = {}
        self.guards: dict[str, Guard] = {}
        self._probe = probe
        self._counted: dict[tuple[str, str], int] = {}
        self._spent: dict[str, int] = {}

    def budget(self, config: Config, region: Region) -> Budget:
        if region.name not in self.budgets:
            self.budgets[region.name] = self._budget(config, region)
        return self.budgets[region.name]

    def cloud(self, config: Config, region: Region, budget: Budget | None = None) -> Cloud:
        """The region's counted cloud (both the acquire and the reconcile signature)."""
        if region.name not in self.clouds:
            given = self.given.get(region.name)
            if given is None:
                spend = budget or self.budget(config, region)
                if self._connect is not None:
                    given = self._connect(config, region, spend)
                else:
                    from scoctl.adapters.factory import cloud_for

                    given = cloud_for(config, region, budget=spend, deadline=self.deadline)
            counted = CountingCloud(given, region.name, self.counter)
            guard = cloud_guard(region.name, counted, probe=self._probe)
            self.guards[region.name] = guard
            self.clouds[region.name] = GuardedCloud(counted, guard)
        return self.clouds[region.name]

    def stalled(self) -> dict[str, str]:
        """The regions whose Nova stalls now, with the unanswered call's error."""
        return {name: why for name, guard in self.guards.items()
                if (why := guard.stalled) is not None}

    def recoveries(self) -> int:
        """How many regional stalls have ended (grows when a region answers again)."""
        return sum(guard.cleared for guard in self.guards.values())

    def usage(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """The calls (by region and outcome) and tokens (by region) spent since last asked."""
        calls = self.counter.snapshot()
        delta = {k: n - self._counted.get(k, 0) for k, n in calls.items()
                 if n != self._counted.get(k, 0)}
        spent = {name: b.spent - self._spent.get(name, 0) for name, b in self.budgets.items()}
        self._counted = calls
        self._spent = {name: b.spent for name, b in self.budgets.items()}
        return delta, spent

    def close(self) -> None:
        """Close the clouds this connected (given ones are the caller's); a reload connects
        again with the new config."""
        for guard in self.guards.values():
            guard.close()
        for name, cloud in self.clouds.items():
            inner: Any = cloud
            while hasattr(inner, "inner"):  # the guard's, then the counter's
                inner = inner.inner
            close = getattr(inner, "close", None)
            if name not in self.given and callable(close):
                close()
        self.clouds.clear()
        self.guards.clear()
        self.budgets.clear()


@dataclass
class Deps:
    """What every step of a pass uses. `leads` (a shared state): acquire and reconcile act only
    for the regions this runner leads; None: every region. `deadline` (monotonic): no stage
    starts after it."""

    config: Config
    store: Store
    clock: Clock
    regions: Regions = field(default_factory=Regions)
    cluster: Cluster | None = None
    scheduler: BatchScheduler | None = None
    sources: tuple[Source, ...] = ()
    leads: Callable[[str], bool] | None = None
    teardown: bool = True
    region: str | None = None
    acquire_watch: float = DEFAULT_WATCH_S
    deadline: float | None = None
    events: EventWriter | None = None  # the Kubernetes Event series (None: a fresh writer)
    intake_memo: IntakeMemo | None = None  # what intake read of the cached pods (a follower's)
    hurry: Callable[[], bool] | None = None  # new demand waits: reconcile's drains stop waiting


def sources_in_use(config: Config) -> tuple[Source, ...]:
    """Kubernetes and Slurm as `Config.sources` finds them in use on this host."""
    return tuple(config.sources(host_hints(config)))


def slurm_of(config: Config) -> BatchScheduler | None:
    """The Slurm adapter when Slurm is in use on this host (built, not called: it puts the
    CLOUD nodes of failed launches back to powered-down)."""
    if "slurm" not in sources_in_use(config):
        return None
    from scoctl.adapters.factory import scheduler_for

    return scheduler_for(config)


# --------------------------------------------------------------------------- compositions


def _planable(store: Store, workloads: Collection[str]) -> list[str]:
    """The workloads with a claim that asks for something (those a re-plan can cover)."""
    return sorted(w for w in workloads if (claim := store.claim(w)) is not None and claim.requests)


def acquire_with_fallback(
    config: Config, store: Store, clock: Clock, *, region: str | None = None,
    dry_run: bool = False, connect: CloudFactory = default_connect,
    budget: BudgetFactory = default_budget, watch: float = DEFAULT_WATCH_S,
    poll: float = DEFAULT_POLL_S, observer: Observer | None = None,
    scheduler: BatchScheduler | None = None, join_tokens: JoinTokens | None = None,
    leads: Callable[[str], bool] | None = None,
) -> AcquireResult:
    """``scoctl acquire`` (design: Acquirer): launch what the plan needs, fall back in the same run
    from pools that fail with a capacity fault (re-planned without them, at most `MAX_ROUNDS`
    rounds in all), and hand the Slurm nodes of launches that failed for sure back to Slurm
    (`scheduler`; without it they only leave their claims).

    Raises what `run_acquire` raises; `replanned` names the workloads re-planned in the run
    and `powered_down` the Slurm nodes handed back. `leads` as for `run_acquire`.
    """
    regions = Regions(connect=connect, budget=budget)
    boot = BootFiles(config, join_tokens or JoinTokens(config, clock))  # for every round

    def round_of(round_no: int, scope: Collection[str] | None) -> AcquireResult:
        return run_acquire(config, store, clock, region=region, dry_run=dry_run,
                           connect=regions.cloud, budget=regions.budget, watch=watch,
                           poll=poll, observer=observer, scope=scope, round_no=round_no,
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
    """`run_reconcile` (same options), then the Slurm nodes it powered down leave their claims
    so Slurm requeues their jobs, then the retention stage prunes (`pruned`; not on a dry
    run)."""
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
    second server is launched under their names."""
    servers = {r.region: r.servers for r in listed.regions} if listed is not None else None
    result = run_notices(config, store, clock, servers=servers, **options)
    if result.release:
        release_nodes(store, result.release, suspend=False)
    if result.refused is not None:  # deposed in a region: exit 75, the rest recorded
        raise result.refused
    return result


def reconcile_with_notices(config: Config, store: Store, clock: Clock, *,
                           region: str | None = None, dry_run: bool = False,
                           teardown: bool = True, connect: Callable[..., Cloud] | None = None,
                           cluster: Cluster | None = None,
                           scheduler: BatchScheduler | None = None,
                           leads: Callable[[str], bool] | None = None,
                           ) -> tuple[ReconcileResult, NoticeResult | None]:
    """``scoctl reconcile`` (design: Reconciler, Notices): reconcile, then — on the same server
    listing —
    take in spooled notices and carry every reclaim notice one step on (record it, exclude the
    pool, cordon and drain, delete at the deadline); the replacements follow in the next plan
    and acquire. Adapters not passed in are built from the config (and closed here). A dry run
    reconciles only: the notice flow acts."""
    regions = Regions(connect=None if connect is None else (
        lambda cfg, reg, _budget: connect(cfg, reg)))
    owned: list[Any] = []
    unreachable: list[Problem] = []
    if cluster is None or scheduler is None:
        from scoctl.adapters.factory import cluster_for, scheduler_for

        sources = sources_in_use(config)
        if cluster is None and "k8s" in sources:
            try:
                cluster = cluster_for(config)
                owned.append(cluster)
            except ScoctlError as exc:  # no Kubernetes this run: Nova is still reconciled
                unreachable.append(Problem.of(exc, api="kubernetes"))
        if scheduler is None and "slurm" in sources:
            scheduler = scheduler_for(config)
    try:
        reconciled = reconcile_and_release(
            config, store, clock, region=region, dry_run=dry_run, teardown=teardown,
            connect=regions.cloud, cluster=cluster, scheduler=scheduler, discover=False,
            leads=leads)
        if unreachable:
            reconciled = replace(reconciled, problems=(*unreachable, *reconciled.problems))
        if dry_run:
            return reconciled, None
        noticed = notices_and_release(config, store, clock, reconciled, region=region,
                                      connect=regions.cloud, cluster=cluster,
                                      scheduler=scheduler, leads=leads)
        return reconciled, noticed
    finally:
        regions.close()
        for item in owned:
            item.close()


# --------------------------------------------------------------------------- one pass


@dataclass(frozen=True)
class StepReport:
    """One stage of a pass: how long it took, whether it succeeded, what went wrong (typed
    `problems`), what it did (`detail`, printed) and what it returned (`result`)."""

    name: str
    seconds: float
    ok: bool
    problems: tuple[Problem, ...] = ()
    skipped: str = ""
    detail: Mapping[str, Any] = field(default_factory=dict)
    result: Any = field(default=None, repr=False, compare=False)

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(str(p) for p in self.problems)

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.name, "seconds": round(self.seconds, 4),
                               "ok": self.ok, "errors": list(self.errors), **self.detail}
        if self.skipped:
            out["skipped"] = self.skipped
        return out


@dataclass(frozen=True)
class PassReport:
    """Every step of one pass, in order."""

    steps: tuple[StepReport, ...]
    seconds: float
    metrics_file: str | None = None

    @property
    def failed(self) -> tuple[str, ...]:
        """The steps whose API failed (after retries)."""
        return tuple(s.name for s in self.steps if not s.ok)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def exit_code(self) -> int:
        """0, or 1 when a step's API failed (design: CLI)."""
        return EXIT_FAILURE if self.failed else EXIT_OK

    def step(self, name: str) -> StepReport | None:
        """The last report of the step `name` (a pass may act twice)."""
        return next((s for s in reversed(self.steps) if s.name == name), None)

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "failed": list(self.failed), "seconds": round(self.seconds, 4),
                "steps": [s.as_dict() for s in self.steps],
                **({"metrics_file": self.metrics_file} if self.metrics_file else {})}


@dataclass(frozen=True)
class FleetView:
    """What the controller's schedule needs to know of the fleet after a reconcile."""

    booting: bool  # an instance is still on its way to ready
    noticed: bool  # a reclaim notice is open: its drain advances once a pass
    reclaimable: bool  # a live instance sits in a reclaimable pool (notices may come)


def fleet_view(config: Config, store: Store) -> FleetView:
    instances = store.instances()
    return FleetView(
        booting=any(i.status in BOOTING for i in instances), noticed=bool(store.noticed()),
        reclaimable=schedule.holds_reclaimable((i.pool for i in instances if i.status in LIVE),
                                               {p.name: p.tier for p in config.pools}))


Body = Callable[[], tuple[Any, Sequence[Problem], Mapping[str, Any]]]


def _blocked_detail(blocked: Any) -> str:
    """What holds a disruption back, as a person reads it (`core.disruption.Blocked.text`)."""
    return f"workload {blocked.disruption.workload}'s disruption {blocked.text()}"


class Pass:
    """One pass of steps; the caller holds the run lock. See the module docstring."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.reports: list[StepReport] = []
        self.started = time.perf_counter()
        self.view: FleetView | None = None  # the fleet after this pass's last notice step

    def past_deadline(self) -> bool:
        return self.deps.deadline is not None and time.monotonic() >= self.deps.deadline

    def stage(self, name: str, body: Body, skip: str = "", api: Api = "scoctl") -> Any:
        """Run one stage, timed; an API failure (the stage's `api` when nothing said which)
        is reported and the pass goes on."""
        if skip:
            self.reports.append(StepReport(name, 0.0, True, skipped=skip))
            return None
        if self.past_deadline():
            self.reports.append(StepReport(name, 0.0, False, (
                Problem("scoctl", None, "", DEADLINE_PASSED),)))
            return None
        t0 = time.perf_counter()
        try:
            result, problems, detail = body()
        except StateUnavailable:  # the state is gone: the pass ends (its caller waits)
            raise
        except ApiError as exc:
            log.warning("%s failed: %s", name, exc)
            self.reports.append(StepReport(name, time.perf_counter() - t0, False,
                                           (Problem.of(exc, api=api),)))
            return None
        self.reports.append(StepReport(name, time.perf_counter() - t0, not problems,
                                       tuple(problems), detail=detail, result=result))
        return result

    # -- the steps ---------------------------------------------------------------------------

    def intake(self, sources: Collection[Source] | None = None,
               live_pods: Sequence[PodInfo] | None = None) -> WatchResult | None:
        """watch (the spool, then `sources`, default every source in use; `live_pods` a watch
        cache of the unfinished pods), then the Slurm power requests spooled."""
        d = self.deps
        chosen = tuple(d.sources if sources is None else sources)

        def watch() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = run_pass(d.config, d.store, d.clock, sources=chosen, teardown=d.teardown,
                              cluster=d.cluster, scheduler=d.scheduler, live_pods=live_pods,
                              memo=d.intake_memo)
            return result, result.problems, {"sources": list(chosen),
                                             "changed": sorted(result.changed),
                                             "spool_events": result.spool_events}

        def slurm_power() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = apply_requests(d.config, d.store, d.scheduler)
            return result, result.problems, {"power_requests": result.applied}

        skip = "no Kubernetes or Slurm configured" if sources is None and not d.sources else ""
        watched: WatchResult | None = self.stage("watch", watch, skip)
        if "slurm" in d.sources:  # what Slurm's power-saving programs spooled
            self.stage("slurm-power", slurm_power)
        return watched

    def act(self, on_planned: Callable[[], None] | None = None,
            ) -> tuple[PlanResult | None, AcquireResult | None]:
        """plan (the claims that changed), then acquire with its same-run fallback;
        `on_planned` is called between the two (the controller times its decisions there)."""
        d = self.deps

        def plan() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = run_plan(d.config, d.store, d.clock)
            return result, (), {"generation": result.generation,
                                "planned": list(result.changed)}

        def acquire() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = acquire_with_fallback(
                d.config, d.store, d.clock, region=d.region, connect=d.regions.cloud,
                budget=d.regions.budget, watch=d.acquire_watch, scheduler=d.scheduler,
                leads=d.leads)
            detail: dict[str, Any] = {"launched": result.launched}
            if result.paused:
                detail["paused"] = result.paused
            return result, result.problems, detail

        planned: PlanResult | None = self.stage("plan", plan, api="state")
        if on_planned is not None:
            on_planned()
        acquired: AcquireResult | None = self.stage("acquire", acquire, api="nova")
        return planned, acquired

    def reconcile(self) -> tuple[ReconcileResult | None, NoticeResult | None]:
        """reconcile, then the notice stage on reconcile's own server listing (design: Notices):
        a new notice leaves its workloads to re-plan (`NoticeResult.replan`)."""
        d = self.deps
        self.view = None

        def reconcile() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = reconcile_and_release(
                d.config, d.store, d.clock, region=d.region, teardown=d.teardown,
                connect=d.regions.cloud, cluster=d.cluster, scheduler=d.scheduler,
                discover=False, leads=d.leads, hurry=d.hurry)
            return result, result.problems, {}

        reconciled: ReconcileResult | None = self.stage("reconcile", reconcile, api="nova")

        def notice() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            result = notices_and_release(
                d.config, d.store, d.clock, reconciled, region=d.region,
                connect=d.regions.cloud, cluster=d.cluster, scheduler=d.scheduler,
                leads=d.leads)
            self.view = fleet_view(d.config, d.store)
            return result, result.problems, {"replan": bool(result.replan),
                                             **dataclasses.asdict(self.view)}

        noticed: NoticeResult | None = self.stage("notice", notice, api="nova")
        return reconciled, noticed

    # -- last: Kubernetes Events (design: Visibility)
    # -----------------------------------------------

    def kube_events(self, live_pods: Sequence[PodInfo] | None = None, *, skip: str = ""
                    ) -> SyncResult | None:
        """Write the Kubernetes Events this pass's facts call for (`services.kube_events`),
        last, as a step that never fails the pass: a failed write is logged and counted in the
        step's detail. `live_pods`: the watch cache; else the pending pods are listed. The
        disruptions the budget held back are this pass's reconcile's, else the last one's
        (kept by the writer even when `skip` says why this pass writes none)."""
        from scoctl.adapters.kube_events import EventRecorder
        from scoctl.core.kube_events import Blocked
        from scoctl.services.informer import CachedCluster
        from scoctl.stages.watch import k8s_policy

        d = self.deps
        cluster = d.cluster
        if d.events is None:
            d.events = EventWriter()
        writer = d.events
        inner = cluster.cluster if isinstance(cluster, CachedCluster) else cluster
        if "k8s" not in d.sources or cluster is None or not isinstance(inner, EventRecorder):
            return None
        recorder: Any = cluster
        reconciled = self.step_result("reconcile")
        if reconciled is not None:
            instances = {i.id: i for i in d.store.instances()}
            writer.blocked = tuple(
                Blocked(b.disruption.server_id, (inst.node_name if (inst := instances.get(
                    b.disruption.server_id)) is not None else None) or b.disruption.name,
                    str(b.disruption.reason), _blocked_detail(b))
                for region in reconciled.regions for b in region.decision.blocked)

        def write() -> tuple[Any, Sequence[Problem], Mapping[str, Any]]:
            pods = live_pods
            if pods is None:
                pods = [p for ns in (d.config.kubernetes.namespaces or (None,))
                        for p in cluster.pods(ns, field_selector="status.phase=Pending")]
            facts = facts_of(pods, k8s_policy(d.config), d.store.plans(units=True),
                             d.store.workloads(active_only=False), d.store.instances(),
                             d.store.noticed(), writer.blocked)
            try:
                result = writer.sync(recorder, facts)
            except Exception as exc:  # noqa: BLE001 - a bug here must not stop the controller
                log.exception("kubernetes events: %s", exc)
                return None, (), {"kube_events": {"error": f"{type(exc).__name__}: {exc}"}}
            return result, (), {"kube_events": result.as_dict()}

        late = "the pass's deadline (timeouts.run) passed" if self.past_deadline() else ""
        synced: SyncResult | None = self.stage("kube-events", write, skip or late,
                                               api="kubernetes")
        if self.reports and self.reports[-1].name == "kube-events" and not self.reports[-1].ok:
            failed = self.reports.pop()  # the pod list failed: reported, not a failed pass
            self.reports.append(replace(failed, ok=True, problems=(),
                                        detail={"kube_events": {"error": failed.errors}}))
        return synced

    def step_result(self, name: str) -> Any:
        """The result of this pass's last `name` step (None: it did not run, or failed)."""
        return next((s.result for s in reversed(self.reports) if s.name == name), None)

    # -- after -------------------------------------------------------------------------------

    def report(self) -> PassReport:
        return PassReport(steps=tuple(self.reports), seconds=time.perf_counter() - self.started)

    def record_deadline(self, run: PassReport) -> None:
        """The pass ran out of time: say so in the event log, with what it did and did not."""
        if not self.past_deadline():
            return
        limit = self.deps.config.timeouts.run
        log.warning("run: the pass took longer than timeouts.run (%gs); stopped", limit)
        not_run = [s.name for s in run.steps if s.errors and s.problems[0].error ==
                   DEADLINE_PASSED]
        self.deps.store.append_event(NewEvent(None, "RUN_DEADLINE_EXCEEDED", "warning", {
            "timeout": limit, "seconds": round(run.seconds, 3),
            "ran": [s.name for s in run.steps if s.name not in not_run and not s.skipped],
            "not_run": not_run, "failed": list(run.failed)}))


def write_metrics(deps: Deps, steps: Sequence[StepReport], *, ok: bool,
                  plan_seconds: float | None, pending: Mapping[str, int],
                  controller_at: float | None = None,
                  config_loaded: tuple[bool, float] | None = None) -> str | None:
    """Write the metrics textfile (config `metrics.textfile`) after a pass: the stages' times
    (`steps`), the calls and tokens spent since the last write, the pending demand. Returns
    the file written, or None when none is configured. Raises OSError when it cannot be."""
    config = deps.config
    if config.metrics_file is None:
        return None
    from scoctl.host.metrics import write_atomically
    from scoctl.services.metrics import collect, day2_gauges, disruption_sample, showback

    calls, spent = deps.regions.usage()
    budgets = deps.regions.budgets
    started, eligible = disruption_sample(
        r.decision for s in steps if s.name == "reconcile" and s.result is not None
        for r in s.result.regions)
    now = deps.clock.now()
    cost, used = showback(config, deps.store, now, deps.store.metric_counters().cost_at)
    sample = RunSample(
        stages=[StageSample(s.name, s.seconds, s.ok) for s in steps],
        plan_seconds=plan_seconds, calls=calls,
        tokens_available={name: b.available() for name, b in budgets.items()},
        tokens_spent=spent, succeeded_at=deps.clock.now().timestamp() if ok else None,
        pending=dict(pending), controller_at=controller_at, now=now,
        disruptions=started, eligible=eligible, day2=day2_gauges(config, deps.store, now),
        cost=cost, cost_at=now.timestamp(), efficiency=used, config_loaded=config_loaded,
        leader={r.name: deps.leads is None or deps.leads(r.name) for r in config.regions})
    write_atomically(config.metrics_file, collect(deps.store, sample))
    return str(config.metrics_file)


def pending_of(watched: WatchResult | None) -> dict[str, int]:
    """The waiting pods / jobs per source a watch pass counted (the sources that answered)."""
    if watched is None:
        return {}
    return {name: c.pending for name, c in watched.sources.items() if c.error is None}


def progress(deps: Deps) -> None:
    """Observe the placement latency reached so far: decisions after a plan, Ready fleets
    after a reconcile (`services.latency`)."""
    t = deps.config.timeouts
    record_progress(deps.store, deps.clock.now().timestamp(), give_up=t.launch + t.registration)


def run_once(deps: Deps) -> PassReport:
    """One pass of the loop (intake → act → reconcile, and act again when a new reclaim notice
    left workloads to re-plan, so their replacements launch in the same pass); the caller holds
    the run lock. Writes metrics when configured.

    After `deps.deadline` no Nova call starts and no further stage runs: the pass ends failed
    (exit 1) with what it did recorded, and a `RUN_DEADLINE_EXCEEDED` event.
    """
    one = Pass(deps)
    # the placement latency (design: Controller), as the controller's
    sizes = claim_sizes(deps.store)
    watched = one.intake()
    if watched is not None:
        record_sightings(deps.store, watched.changed, sizes, watched.seen,
                         deps.clock.now().timestamp())
    planned, _ = one.act(on_planned=lambda: progress(deps))
    _, noticed = one.reconcile()
    progress(deps)
    if noticed is not None and noticed.replan:  # replace the noticed units in this pass
        planned, _ = one.act(on_planned=lambda: progress(deps))
    one.kube_events()
    run = one.report()
    one.record_deadline(run)
    written = write_metrics(deps, run.steps, ok=run.ok,
                            plan_seconds=planned.seconds if planned is not None else None,
                            pending=pending_of(watched))
    return replace(run, metrics_file=written)
