"""`scoctl run --follow`: the controller (design: Controller).

One process that does what the timer does, as soon as something changes. The pure
`core.controller` decides what runs when; this module does the I/O around it:

* read — the pod and node watches (`services.informer`: list-then-watch, resume from the last
  resourceVersion, re-list on 410, reconnect with back-off), the spool (listed every second),
  Slurm (polled by the intake every `slurm.poll`);
* act — one *pass* at a time under the run lock (held per pass, never for the process's life,
  so hooks, `status`, dry-runs and a timer's ``run --once`` keep working beside it): the steps
  `core.controller.next_step` says are due — intake (`stages.watch.run_pass` over the cached
  pods), then plan and acquire (`stages.plan`, `stages.acquire`), then reconcile — each a
  transaction of its stage, so a crash mid-pass loses nothing (the next pass re-plans the claims
  recorded, adopts the launches begun);
* record — placement latency (`services.latency`), one warning event per API outage, and the
  metrics textfile after every pass.

Several hosts on one PostgreSQL state (design: Runners): the controller competes for every region it
serves through its `Leadership` (`services.leadership`: a lease keeper that renews every
``lease.ttl / 3`` from a thread of its own, so an idle controller keeps its terms), acquires and
reconciles only the regions it leads, its writes fenced by its terms, and plans and acquires at
once when it comes to lead a region (`core.controller.leader_gained`). A standby keeps its
watches, intake and plans current and makes no mutating Nova call. With SQLite
(`LocalLeadership`) the host's run lock is the lease: it leads every region.

Signals: SIGTERM / SIGINT finish the pass in hand and stop (exit 0); SIGHUP reloads the config
(an invalid one is refused, naming file, line and field, and the old one kept). Both are normal
operations, told at info level (`inform`); a reload is a ``CONFIG_RELOADED`` event, a refusal a
``CONFIG_RELOAD_REFUSED`` warning event and a warning line, and the metric
``scoctl_config_last_reload_successful`` says 0 until a reload succeeds. systemd is told
READY, STATUS, WATCHDOG (`host.notify`).
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.core import controller as decide
from scoctl.core.demand import demand_shape, is_provisionable, workload_of
from scoctl.core.intake.k8s import is_managed_pod
from scoctl.core.model import NewEvent, NodeEvent, PodEvent, PodInfo
from scoctl.core.model.problems import Api, Problem, first_of
from scoctl.core.model.vocabulary import ConfigReload
from scoctl.core.timefmt import parse_rfc3339, rfc3339
from scoctl.errors import (
    ConfigError,
    LockHeld,
    NotLeader,
    ScoctlError,
    StateUnavailable,
    TemporaryError,
)
from scoctl.host.notify import Notifier
from scoctl.host.spool import NOTICE_KIND, POWER_KIND, TOKEN_KIND, notice_dir, pending_events
from scoctl.runner.compose import (
    Deps,
    Pass,
    PassReport,
    Regions,
    StepReport,
    fleet_view,
    pending_of,
    write_metrics,
)
from scoctl.runner.serve import serve as run_serve
from scoctl.runner.signals import Signals
from scoctl.services.gangs import retry_due
from scoctl.services.informer import CachedCluster, Informer
from scoctl.services.kube_events import EventWriter
from scoctl.services.latency import claim_sizes, record_progress, record_sightings
from scoctl.services.leadership import Leadership, LocalLeadership
from scoctl.stages.watch import Follower, Source

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.adapters.kube_events import EventRecorder
    from scoctl.host.budget import Budget
    from scoctl.state import Store

log = logging.getLogger(__name__)

TICK_S = 0.2  # the longest the loop sleeps before it looks at the signals again
INTAKE_OWED = "new demand's intake is due when the batch window closes: that pass writes them"
MAX_STEPS = 6  # steps per pass: intake → act → reconcile → act again when it asks, …
LOCK_RETRY_S = 1.0
# Kubernetes Events the controller writes in one go (a pass's, or one drain while it idles): the
# rest wait for the next go, at most the rate limit's tenth of a second away, so that the loop
# looks at a closing batch window between them (ten writes at once held it up to 0.6 s)
EVENT_WRITES_AT_ONCE = 2
THAW_S = 600.0  # how often the frozen objects are collected again (`freeze_after_pass`)
STATE_RETRY_S = (0.5, 10.0)  # back-off while the state's database is unreachable: first, most


def freeze_long_lived() -> None:
    """Move what the process holds now — the pod cache a (re)list just filled, 40,000 pods
    and more — out of the cyclic garbage collector's sight (`gc.freeze`), after one full
    collection so no garbage is kept. Otherwise every full collection walks the whole cache
    again: 16 of them, up to 0.49 s each, paused a 40,000-pod controller for 3.8 s in
    bench/fleet_intake_bench.py, and a demand change that came meanwhile waited. Cached pods
    the watch replaces later are still freed (by reference counting: they hold no cycles)."""
    gc.collect()
    gc.freeze()


def freeze_after_pass(thaw: bool) -> None:
    """After a pass: collect the young generations (what the pass made and dropped in cycles),
    then freeze what survived — the memos a pass keeps for the next one (each pending pod's
    Event entry and the intake's buckets: 40,000 and more objects after a burst) — so that the
    full collection their growth brings on (CPython's rule: once the objects new to the oldest
    generation pass a quarter of it) never walks them as a batch window closes (one took
    0.18 s at 43,400 pods, on a decision's path). With `thaw` (every `THAW_S`, while no demand
    waits), everything frozen is collected once more (`freeze_long_lived`), so that garbage a
    pass left in cycles and froze is freed within that time."""
    if thaw:
        gc.unfreeze()
        freeze_long_lived()
        return
    gc.collect(1)
    gc.freeze()


def timers_of(config: Config, sources: tuple[Source, ...]) -> decide.Timers:
    """The controller's timers from the config."""
    return decide.Timers(batch_idle=config.intake.batch_idle,
                         batch_max=config.intake.batch_max, poll=config.slurm.poll,
                         reconcile=config.timeouts.reconcile_interval,
                         notice=config.timeouts.notice_poll,
                         gap=min(1.0, config.intake.batch_idle) or 0.5,
                         slurm="slurm" in sources, held=config.timeouts.negative_cache)


class Controller:
    """The loop of ``run --follow``. `run` until `signals.stop`; see the module docstring."""

    def __init__(self, config: Config, store: Store, clock: Clock, *,
                 sources: tuple[Source, ...], cluster: Cluster | None,
                 scheduler: BatchScheduler | None,
                 lock: Callable[[], AbstractContextManager[object]],
                 reload: Callable[[], Config] | None = None,
                 on_pass: Callable[[PassReport], None] = lambda report: None,
                 report: Callable[[str], None] = log.warning,
                 inform: Callable[[str], None] = log.info,
                 notifier: Notifier | None = None, teardown: bool = True,
                 clouds: Mapping[str, Cloud] | None = None,
                 budget: Callable[[Config, Region], Budget] | None = None,
                 watch_timeout: float = 30.0, lead: Leadership | None = None) -> None:
        self.config, self.store, self.clock = config, store, clock
        self.lead = lead or LocalLeadership()
        self.lead.fence(store)  # launch intents and deletes check this controller's terms
        self.led: frozenset[str] = frozenset()  # the regions led when last looked
        self.competing: frozenset[str] = frozenset()
        self.sources, self.cluster, self.scheduler = sources, cluster, scheduler
        self.lock, self.reload_config, self.on_pass, self.report = lock, reload, on_pass, report
        self.inform = inform  # normal operations (a reload): info, not a warning
        self.notifier = notifier or Notifier({})
        self.watch_timeout = watch_timeout
        self.informer: Informer | None = None
        self.follower = Follower(config, store, clock, sources=sources, teardown=teardown,
                                 cluster=cluster, scheduler=scheduler)
        self.cached: Cluster | None = None
        if cluster is not None and "k8s" in sources:
            self.cached = CachedCluster(cluster, self.live_pods, self._nodes)
        self.steps = Steps(self, teardown=teardown, clouds=clouds, budget=budget)
        self.timers = timers_of(config, sources)
        self.schedule = decide.start(clock.monotonic())
        self.outages = decide.Outages()
        self.outage_events: list[decide.OutageEvent] = []
        self.first_seen: dict[str, float] = {}  # workload → Unix time of its new demand
        self.demand_owed = False  # new demand arrived since the last Kubernetes intake
        self.thawed = clock.monotonic()  # when everything frozen was last collected again
        self.held: list[Any] = []  # watch items `demand_waiting` took off the queue mid-pass
        self.sizes = claim_sizes(store)
        self.lock_retry_at = 0.0
        self.lock_busy = False  # the last pass found the lock held (reported once per streak)
        self.state_retry = 0.0  # the back-off of a state outage (0: the state answers)
        self.passes = 0
        self.recovered = 0  # stalls ended so far (`_answered_again`)
        # whether the last config (re)load succeeded, and when one last did (the metrics)
        self.config_loaded = (True, clock.now().timestamp())
        self.noted: list[NewEvent] = []  # events to record with the next pass (a reload's)

    # -- caches ----------------------------------------------------------------------------

    def live_pods(self) -> list[Any] | None:
        """The cached unfinished pods (None until the pod watch has synced)."""
        return list(self.follower.pods.values()) if self.follower.synced else None

    def _nodes(self) -> list[Any] | None:
        informer = self.informer
        return list(informer.nodes.values()) if informer and informer.nodes_synced else None

    def api(self, api: str, error: str | None) -> None:
        """Fold one outcome of `api` into the outages (one event per outage start / end)."""
        self.outages, event = decide.api_result(self.outages, api, self.clock.monotonic(),
                                                error=error)
        if event is not None:
            event = replace(event, at=rfc3339(self.clock.now()))  # a state outage: written late
            self.outage_events.append(event)
            if event.starts:
                self.report(f"{api} unavailable: {event.detail} (retrying with back-off)")
            else:
                self.report(f"{api} available again after {event.seconds:.0f} s")

    def _take(self, items: list[Any]) -> None:
        now = self.clock.monotonic()
        for item in items:
            if isinstance(item, Exception):
                self.api("kubernetes", f"watch: {item}")
                continue
            self.api("kubernetes", None)
            self.schedule = decide.recovered(self.schedule, "intake")
            if isinstance(item, NodeEvent):
                if self.informer is not None and self.informer.apply_nodes(item):
                    self.schedule = decide.reconcile_wanted(self.schedule)
            elif isinstance(item, PodEvent):
                arrived, left = self._delta(item)
                self.follower.handle(item)  # the pod cache
                if item.type == "RESYNC":
                    freeze_long_lived()
                if arrived:
                    self.demand_owed = True
                    self.schedule = decide.demand_changed(self.schedule, now)
                    self._saw(arrived)
                elif left:
                    self.schedule = decide.demand_left(self.schedule, now)

    def _is_demand(self, pod: PodInfo | None) -> bool:
        return (pod is not None and is_provisionable(pod)
                and is_managed_pod(pod, self.follower.policy))

    def _delta(self, event: PodEvent) -> tuple[list[PodInfo], bool]:
        """The pods whose demand this event brings (new, or a changed request), and whether
        some demand left with it (bound, deleted, no longer provisionable)."""
        cache = self.follower.pods
        if event.type == "RESYNC":
            before, after = dict(cache), {(p.namespace, p.name): p for p in event.pods}
        elif event.pod is not None:
            key = (event.pod.namespace, event.pod.name)
            before = {key: cache[key]} if key in cache else {}
            after = {} if event.type == "DELETED" else {key: event.pod}
        else:
            return [], False
        arrived = [p for k, p in after.items() if self._is_demand(p) and not (
            self._is_demand(before.get(k)) and demand_shape(before[k]) == demand_shape(p))]
        left = any(self._is_demand(p) and not self._is_demand(after.get(k))
                   for k, p in before.items())
        return arrived, left

    def demand_waiting(self) -> bool:
        """Whether new demand waits for an intake: it arrived since the last one, or it is on
        the watch's queue now. What this takes off the queue is held, in order, for the next
        `_idle` (the caches do not change mid-pass). A reconcile's drains stop waiting once
        this answers True, so that a drain a disruption budget holds never holds a launch."""
        if not self.demand_owed and self.informer is not None:
            items = self.informer.drain(0.0)
            self.held.extend(items)
            self.demand_owed = any(isinstance(item, PodEvent) and self._delta(item)[0]
                                   for item in items)
        return self.demand_owed

    def _saw(self, pods: list[PodInfo]) -> None:
        """Remember when each workload's new demand was first seen (for the latency)."""
        stamp = self.clock.now().timestamp()
        label = self.config.kubernetes.workload_label
        for pod in pods:
            ref = workload_of(pod, label)
            if ref is not None:
                self.first_seen.setdefault(ref.name, stamp)

    # -- leadership (design: Runners) -------------------------------------------------------------

    def follow_lead(self, *, now: bool = False) -> None:
        """Compete for the regions served (a reload may add some; `now`: ask the lease keeper
        again at once, after a fenced write was refused), and plan and acquire at once for a
        region this controller came to lead."""
        served = frozenset(r.name for r in self.config.regions)
        if now or served != self.competing:
            self.lead.compete(sorted(served))
            self.competing = served
        led = frozenset(r for r in served if self.lead.leads(r))
        if led - self.led:
            self.schedule = decide.leader_gained(self.schedule)
        self.led = led

    def refused(self, exc: ScoctlError) -> None:
        """A step raised: when a fenced write was refused, this controller's term ended."""
        if isinstance(exc, NotLeader):
            self.follow_lead(now=True)

    # -- the loop --------------------------------------------------------------------------

    def run(self, signals: Signals) -> int:
        """Run until asked to stop; the pass in hand is finished first. Returns 0."""
        if self.cluster is not None and "k8s" in self.sources:
            self.informer = Informer(self.cluster, self.config.kubernetes.namespaces,
                                     timeout=self.watch_timeout).start()
        self.notifier.ready("watching")
        last_ping = 0.0
        try:
            while not signals.stop:
                if signals.reload:
                    signals.reload.clear()
                    self.reload()
                self.follow_lead()
                self._answered_again()
                self._idle(signals)
                now = self.clock.monotonic()
                if not signals.stop and now >= self.lock_retry_at and decide.next_step(
                        self.schedule, self.timers, now).step is not None:
                    self._pass()
                if self.notifier.watchdog and time.monotonic() - last_ping > 1.0:
                    self.notifier.ping()
                    last_ping = time.monotonic()
        finally:
            self.notifier.stopping()
            if self.informer is not None:
                self.informer.stop()
            self.steps.close()
        return 0

    def stalled(self) -> dict[str, str]:
        """What stalls now (`adapters.guard`): ``nova`` per region (``nova:REGION``) and the
        Kubernetes API, with the unanswered call's error."""
        out = {f"nova:{name}": why for name, why in self.steps.regions.stalled().items()}
        guard = getattr(self.cluster, "guard", None)
        if guard is not None and (why := guard.stalled) is not None:
            out["kubernetes"] = why
        return out

    def _answered_again(self) -> None:
        """A stalled region or API answered its guard's probe (or the informer's watch): act
        and reconcile at once, so what waited on it is not left to the next timer."""
        guard = getattr(self.cluster, "guard", None)
        seen = self.steps.regions.recoveries() + (guard.cleared if guard is not None else 0)
        if seen != self.recovered:
            self.recovered = seen
            self.schedule = decide.answered_again(self.schedule)

    def _idle(self, signals: Signals) -> None:
        """Wait for events until a step is due (at most TICK_S), and list the spool when due."""
        if self.held:  # what the last pass's `demand_waiting` took: before the queue, in order
            held, self.held = self.held, []
            self._take(held)
        now = self.clock.monotonic()
        due = decide.next_step(self.schedule, self.timers, now)
        wait = 0.0 if due.step is not None and now >= self.lock_retry_at else min(
            max(due.wait, self.lock_retry_at - now, 0.0), TICK_S)
        events = self.steps.events
        backlog = events.next_drain()
        if backlog is not None:
            wait = min(wait, backlog)
        if self.informer is not None:
            self._take(self.informer.drain(wait if not signals.stop else 0.0))
        elif wait > 0 and not signals.stop:
            time.sleep(wait)
        if backlog is not None and not signals.stop and self.cached is not None \
                and events.next_drain() == 0.0:
            self._drain_events()
        now = self.clock.monotonic()
        if decide.spool_due(self.schedule, now):
            waiting = any(next(iter(pending_events(self.config.spool, kind)), None) is not None
                          for kind in (TOKEN_KIND, POWER_KIND))
            notices = next(pending_events(notice_dir(self.config.spool), NOTICE_KIND),
                           None) is not None
            self.schedule = decide.spool_looked(self.schedule, self.timers, now,
                                                waiting=waiting, notices=notices)

    def _drain_events(self) -> None:
        """Write the Kubernetes Events the last pass left for the rate limit (design: Visibility),
        as the bucket allows now; like the pass's own writes, this never fails the loop."""
        try:
            self.steps.events.drain(cast("EventRecorder", self.cached))
        except Exception as exc:  # noqa: BLE001 - a bug here must not stop the controller
            log.exception("kubernetes events: %s", exc)

    def _pass(self) -> None:
        """One pass under the run lock: every step due, in order, then the metrics."""
        try:
            with self.lock():
                self._record_outages()
                one = Pass(self.steps.deps())
                for _ in range(MAX_STEPS):
                    due = decide.next_step(self.schedule, self.timers, self.clock.monotonic())
                    if due.step is None:
                        break
                    self.steps.run(due, one)
                self._record_outages()  # what this pass found out, before anyone stops it
                # last, never failing the pass (design: Visibility); not while new demand waits for
                # its intake: that pass, due when the batch window closes, syncs the Events on
                # fresher facts, and a sync here (a full one takes 0.3–0.6 s at 40,000 pending
                # pods) would only hold it
                owed = self.demand_owed and self.schedule.window is not None
                one.kube_events(self.live_pods(), skip=INTAKE_OWED if owed else "")
                report = one.report()
                self.steps.write_metrics(one.deps, report)
        except LockHeld as exc:  # another writer (a timer's run --once, a stage): soon again
            if not self.lock_busy:
                self.report(f"{exc}; the pass waits for it")
            self.lock_busy = True
            self.lock_retry_at = self.clock.monotonic() + LOCK_RETRY_S
            return
        except TemporaryError as exc:  # the state is gone (a restart, a full disk): wait
            self._state_lost(exc)
            return
        if self.state_retry:
            self.api("state", None)
        self.state_retry = 0.0
        self.lock_busy = False
        self.passes += 1
        self.notifier.status(f"pass {self.passes}: {'ok' if report.ok else 'degraded'}")
        now = self.clock.monotonic()
        thaw = not self.demand_owed and now - self.thawed >= THAW_S
        freeze_after_pass(thaw)
        if thaw:
            self.thawed = now
        self.on_pass(report)

    def _state_lost(self, exc: TemporaryError) -> None:
        """Try the next pass after a back-off (doubling, bounded): the store opens a new
        connection then. The lease keeper renews on its own connection; until it has, this
        controller leads nothing (`Leadership.leads`)."""
        self.api("state", str(exc))  # one line and one STATE_UNAVAILABLE per outage
        first, most = STATE_RETRY_S
        self.state_retry = min(most, self.state_retry * 2 or first)
        self.lock_retry_at = self.clock.monotonic() + self.state_retry

    def _record_outages(self) -> None:
        """The outages' start and end events, and the events noted since the last pass (a
        reload's), recorded under the pass's lock; kept for the next pass when the state
        cannot take them (its own outage among them)."""
        events = list(self.outage_events)
        noted = list(self.noted)
        if not events and not noted:
            return
        with self.store.transaction():
            for event in noted:
                self.store.append_event(event)
            for e in events:
                detail: dict[str, Any] = {"api": e.api}
                if e.starts:
                    detail["error"] = e.detail
                else:
                    detail["seconds"] = round(e.seconds, 1)
                self.store.append_event(NewEvent(None, e.token, "warning" if e.starts
                                                 else "info", detail, ts=e.at))
        del self.outage_events[:len(events)]
        del self.noted[:len(noted)]

    def reload(self) -> bool:
        """SIGHUP: load the config again; an invalid one is refused and the old one kept.
        Either way an event is noted and a reconcile pass asked for, which records it and
        the metrics at once."""
        if self.reload_config is None:
            return False
        self.notifier.reloading()
        self.schedule = decide.reconcile_wanted(self.schedule)
        try:
            config = self.reload_config()
        except ScoctlError as exc:
            self.report(f"SIGHUP: config refused, the old one stays: {exc}")
            self.noted.append(NewEvent(None, ConfigReload.REFUSED, "warning",
                                       refusal_detail(exc, self.config.source_name)))
            self.config_loaded = (False, self.config_loaded[1])
            self.notifier.ready("watching (config refused)")
            return False
        before = self.config
        kept = [name for name, old, new in (
            ("kubernetes", (before.kubernetes.kubeconfig, before.kubernetes.context,
                            before.kubernetes.namespaces),
             (config.kubernetes.kubeconfig, config.kubernetes.context,
              config.kubernetes.namespaces)),
            ("slurm", before.slurm, replace(config.slurm, poll=before.slurm.poll)),
            ("state", before.state, config.state)) if old != new]
        if kept:
            self.report(f"SIGHUP: {', '.join(kept)} changed: the connections and the state "
                        "stay as started until a restart")
        self.config = config
        self.follower = replace_follower(self.follower, config)
        self.timers = timers_of(config, self.sources)
        self.steps.reset()
        self.schedule = decide.reloaded(self.schedule)  # what the old config held back
        self.inform(f"SIGHUP: config reloaded from {config.source_name}")
        self.noted.append(NewEvent(None, ConfigReload.RELOADED, "info",
                                   {"file": config.source_name}))
        self.config_loaded = (True, self.clock.now().timestamp())
        self.notifier.ready("watching (config reloaded)")
        return True


def refusal_detail(exc: ScoctlError, source: str) -> dict[str, Any]:
    """A refused reload's event detail: the file, line and field at fault (those the error
    knows; the config's own file otherwise) and the whole message."""
    detail: dict[str, Any] = {"file": source}
    if isinstance(exc, ConfigError):
        found = {"file": exc.file, "line": exc.line, "field": exc.field}
        detail.update({key: value for key, value in found.items() if value is not None})
    detail["error"] = str(exc)
    return detail


def replace_follower(follower: Follower, config: Config) -> Follower:
    """The pod cache under a new config: same pods, the new intake policy."""
    fresh = Follower(config, follower.store, follower.clock, sources=follower.sources,
                     teardown=follower.teardown, cluster=follower.cluster,
                     scheduler=follower.scheduler)
    fresh.pods, fresh.synced, fresh.window = follower.pods, follower.synced, follower.window
    return fresh


class Steps:
    """The controller's side of the composer's steps: which stages a due step runs
    (`runner.compose.Pass`), and how their outcome folds into the schedule, the outages and
    the metrics. Keeps the Nova connections and token budgets (`Regions`) between passes."""

    def __init__(self, owner: Controller, *, teardown: bool,
                 clouds: Mapping[str, Cloud] | None,
                 budget: Callable[[Config, Region], Budget] | None) -> None:
        self.owner = owner
        self.teardown = teardown
        self.regions = Regions(clouds=clouds, budget=budget, probe=True)
        self.last: dict[str, StepReport] = {}  # each stage's latest report, for the metrics
        self.pending: dict[str, int] = {}
        self.plan_seconds: float | None = None
        self.acquired: int | None = None  # the plan generation of the last acquire that ran
        self.excluded_at_plan: set[str] | None = None  # the pools excluded at the last plan
        # the Kubernetes Event series, kept between passes; no pass waits for its rate limit:
        # what a pass cannot write is drained while the controller idles (`Controller._idle`)
        self.events = EventWriter(wait=0.0, most=EVENT_WRITES_AT_ONCE)

    def deps(self) -> Deps:
        """What the steps of one pass use: the cached cluster, no per-pass deadline, and no
        wait on Nova builds (ERROR servers are left to the reconcile right after the launch,
        and every follow-up while they boot)."""
        o = self.owner
        return Deps(o.config, o.store, o.clock, regions=self.regions, cluster=o.cached,
                    scheduler=o.scheduler, sources=o.sources, leads=o.lead.leads,
                    teardown=self.teardown, acquire_watch=0.0, events=self.events,
                    intake_memo=o.follower.memo,
                    hurry=o.demand_waiting if o.cached is not None else None)

    def close(self) -> None:
        self.regions.close()

    def reset(self) -> None:
        """After a reload: connect again with the new config."""
        self.regions.close()

    def run(self, due: decide.Due, one: Pass) -> None:
        """Run the stages of the step `due` names and fold their outcome into the schedule."""
        assert due.step is not None
        step = {"intake": self.intake, "act": self.act, "reconcile": self.reconcile}[due.step]
        mark = len(one.reports)
        started = time.perf_counter()
        try:
            step(due, one)
        except StateUnavailable:  # the pass ends: `Controller._state_lost` waits and retries
            raise
        except ScoctlError as exc:  # unusable input, or a lease lost mid-step
            self.owner.report(f"{due.step}: {exc}")
            self.owner.schedule = _failed(self.owner, due)
            self.owner.refused(exc)
            one.reports.append(StepReport(due.step, time.perf_counter() - started, False,
                                          (Problem.of(exc, what=due.step),)))
        for report in one.reports[mark:]:
            self.last[report.name] = report

    def intake(self, due: decide.Due, one: Pass) -> None:
        o = self.owner
        sources: list[Source] = []
        if due.kubernetes and o.cached is not None:
            sources.append("k8s")
        if due.slurm and o.scheduler is not None:
            sources.append("slurm")
        seen, o.first_seen = (o.first_seen, {}) if "k8s" in sources else ({}, o.first_seen)
        if "k8s" in sources:
            o.demand_owed = False
        mark = len(one.reports)
        watched = one.intake(sources, live_pods=o.live_pods())
        problems = problems_of(one.reports[mark:])
        self.heard(problems, ["kubernetes" if name == "k8s" else "slurm" for name in sources])
        self.pending.update(pending_of(watched))
        changed = watched.changed if watched is not None else []
        # the objects' own times over the watch events' (design: Controller)
        if watched is not None:
            seen = {**seen, **watched.seen}
        record_sightings(o.store, changed, o.sizes, seen, o.clock.now().timestamp())
        o.schedule = decide.after_intake(o.schedule, o.timers, o.clock.monotonic(), due,
                                         failed=bool(problems), changed=bool(changed),
                                         replan=bool(o.store.dirty()) or self.plans_behind()
                                         or self.plan_unacquired() or self.plans_stale()
                                         or self.gang_due())

    def act(self, _due: decide.Due, one: Pass) -> None:
        o = self.owner
        mark = len(one.reports)
        excluded = {e.pool for e in o.store.exclusions()}
        planned, acquired = one.act(on_planned=self.progress)
        problems = problems_of(one.reports[mark:])
        if planned is not None:
            self.plan_seconds = planned.seconds
            self.excluded_at_plan = excluded
        # no launch, no call: no news about Nova
        self.heard(problems, ["nova"] if acquired is None or acquired.problems
                   or acquired.launches else [])
        if acquired is not None and planned is not None:
            self.acquired = planned.generation
        o.schedule = decide.after_act(o.schedule, o.timers, o.clock.monotonic(),
                                      failed=self.failed(problems),
                                      launched=acquired is not None and acquired.launched > 0,
                                      replan=acquired is not None and bool(o.store.dirty()),
                                      held=acquired is not None and bool(acquired.held))

    def reconcile(self, _due: decide.Due, one: Pass) -> None:
        o = self.owner
        mark = len(one.reports)
        one.reconcile()
        problems = problems_of(one.reports[mark:])
        apis: list[Api] = ["nova"]
        apis += ["kubernetes"] if o.cached else []
        apis += ["slurm"] if o.scheduler else []
        self.heard(problems, apis)
        view = one.view if one.view is not None else fleet_view(o.config, o.store)
        self.progress()
        o.schedule = decide.after_reconcile(o.schedule, o.timers, o.clock.monotonic(),
                                            failed=self.failed(problems),
                                            booting=view.booting or view.noticed,
                                            replan=bool(o.store.dirty())
                                            or self.plans_stale() or self.gang_due(),
                                            reclaimable=view.reclaimable)

    def failed(self, problems: Sequence[Problem]) -> bool:
        """Whether a step failed so that it must be retried with back-off: problems of a
        region or API that stalls do not count — its guard probes it and the controller acts
        again once it answers (`Controller._answered_again`) —, so one stalled region never
        slows the retries of the others; nor do names a region lacks (``config``: an image,
        a flavor …): those launches are tried again on their own (`decide.after_act`)."""
        stalled = self.owner.stalled()
        return any(not (f"nova:{p.region}" in stalled if p.api == "nova" else
                        p.api == "config" or
                        p.api == "kubernetes" and "kubernetes" in stalled)
                   for p in problems)

    def heard(self, problems: Sequence[Problem], apis: Sequence[Api]) -> None:
        """Fold what a step learnt of `apis` into the outages: each API a problem names is
        down; the others answered — unless the state itself failed, which cut the step short
        before they were asked (no news of them then). The state is always heard of."""
        o = self.owner
        state = first_of(problems, "state")
        o.api("state", None if state is None else str(state))
        stalled = o.stalled()
        for api in apis:
            found = first_of(problems, api)
            if found is None:  # no news of a region that stalls is not its recovery
                held = next((why for key, why in sorted(stalled.items())
                             if key.split(":")[0] == api), None)
                found = None if held is None else Problem(api, None, "", held)
            if found is not None or state is None:
                o.api(api, None if found is None else str(found))

    def gang_due(self) -> bool:
        """A failed gang's back-off ended (design: Gangs): plan and acquire for its retry."""
        o = self.owner
        return retry_due(o.store, o.config.gang.policy(), o.clock.now().timestamp())

    def plans_stale(self) -> bool:
        """An exclusion lapsed since the last plan step, or a pending rebalance may be
        planned now (`core.controller.plans_stale`)."""
        o = self.owner
        now = o.clock.now()
        due = [parse_rfc3339(r.since).timestamp()
               + o.config.disruption_of(r.workload).rebalance.stabilize
               for r in o.store.rebalances().values() if r.planned is None]
        return decide.plans_stale(self.excluded_at_plan, {e.pool for e in o.store.exclusions()},
                                  due, now.timestamp())

    def plan_unacquired(self) -> bool:
        """A plan generation another runner committed that no acquire here has run after."""
        latest = self.owner.store.latest_generation()
        return decide.plan_unacquired(latest.generation if latest else None, self.acquired)

    def plans_behind(self) -> bool:
        """Claims written by other processes (Slurm's resume and suspend programs,
        ``plan --claims``) that no plan has caught up with yet."""
        store = self.owner.store
        planned = {w: p.claim_version for w, p in store.plans(units=False).items()}
        return decide.plans_behind(((c.workload, c.version, bool(c.requests))
                                    for c in store.claims()), planned)

    def progress(self) -> None:
        o = self.owner
        t = o.config.timeouts
        record_progress(o.store, o.clock.now().timestamp(), give_up=t.launch + t.registration)

    def write_metrics(self, deps: Deps, report: PassReport) -> None:
        """The metrics textfile, refreshed after every pass."""
        o = self.owner
        try:
            write_metrics(deps, list(self.last.values()), ok=report.ok and not o.outages.down,
                          plan_seconds=self.plan_seconds, pending=self.pending,
                          controller_at=o.clock.now().timestamp(),
                          config_loaded=o.config_loaded)
        except OSError as exc:  # the textfile directory is gone or read-only: keep placing
            o.api("metrics textfile", f"{o.config.metrics_file}: {exc.strerror or exc}")
        else:
            if o.config.metrics_file is not None:
                o.api("metrics textfile", None)


def problems_of(reports: Sequence[StepReport]) -> list[Problem]:
    return [p for r in reports for p in r.problems]


def _failed(owner: Controller, due: decide.Due) -> decide.Schedule:
    """A step that raised: the same schedule change as a step that reported a failure."""
    now = owner.clock.monotonic()
    s, t = owner.schedule, owner.timers
    if due.step == "intake":
        return decide.after_intake(s, t, now, due, failed=True, changed=False, replan=False)
    if due.step == "act":
        return decide.after_act(s, t, now, failed=True, launched=False, replan=False)
    return decide.after_reconcile(s, t, now, failed=True, booting=False, replan=False)


def serve(config: Config, state: Path | str, clock: Clock, *, lock_path: Path, lock_wait: float,
          reload: Callable[[], Config], on_pass: Callable[[PassReport], None],
          report: Callable[[str], None], inform: Callable[[str], None] = log.info,
          teardown: bool = True,
          lead: Leadership | None = None) -> int:
    """``scoctl run --follow``: the controller lock of the state on this host (standing by
    while another controller holds it: `runner.standby`), `runner.serve.serve` (the sources
    connected, the state created or migrated once under the run lock), then the controller
    until SIGTERM / SIGINT (exit 0). `lead` (the caller ends it) is the controller's
    leadership of the regions."""
    from scoctl.runner.standby import standing_by

    with standing_by(lock_path, inform=inform) as standby:
        if standby.stopped:
            return 0
        if standby.reload:  # a SIGHUP while it stood by: the config as it is now
            try:
                config = reload()
            except ScoctlError as exc:
                report(f"SIGHUP: config refused, the old one stays: {exc}")
        return _serve(config, state, clock, lock_path=lock_path, lock_wait=lock_wait,
                      reload=reload, on_pass=on_pass, report=report, inform=inform,
                      teardown=teardown, lead=lead)


def _serve(config: Config, state: Path | str, clock: Clock, *, lock_path: Path,
           lock_wait: float, reload: Callable[[], Config],
           on_pass: Callable[[PassReport], None], report: Callable[[str], None],
           inform: Callable[[str], None], teardown: bool, lead: Leadership | None) -> int:
    from scoctl.host.lock import run_lock
    from scoctl.stages.watch import available_sources

    sources = tuple(available_sources(config))
    passes = 0

    def control(store: Store, cluster: Cluster | None, scheduler: BatchScheduler | None,
                signals: Signals) -> int:
        nonlocal passes
        controller = Controller(
            config, store, clock, sources=sources, cluster=cluster, scheduler=scheduler,
            lock=lambda: run_lock(lock_path, wait=lock_wait), reload=reload, on_pass=on_pass,
            report=report, inform=inform, notifier=Notifier(), teardown=teardown, lead=lead)
        try:
            return controller.run(signals)
        finally:
            passes = controller.passes
            inform(f"{signals.stop[0] if signals.stop else 'stop'}: stopped after "
                   f"{passes} passes")

    return run_serve(config, state, sources=sources, lock_path=lock_path,
                     lock_wait=lock_wait, body=control, reload=True)
