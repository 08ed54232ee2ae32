"""`scoctl run`: watch (one pass) → plan → acquire → reconcile → notice (and, on a new reclaim
notice, plan and acquire again), under the caller's run lock.

Each stage is called as a function (never a subprocess) and timed. An API failure in one stage
does not stop the others — every later stage is safe on the state the earlier ones left (plan
works on the claims already recorded, acquire on the latest plan, reconcile on what Nova says) —
but the pass is reported as failed and `exit_code` is 1 (DESIGN §8). A ConfigError stops the
pass (exit 2: a person must fix the input). Metrics are written after every pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scoctl.adapters.counting import CallCounter, CountingCloud
from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.errors import EXIT_FAILURE, EXIT_OK, ApiError
from scoctl.stages.metrics import RunSample, StageSample

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.host.budget import TokenBudget
    from scoctl.stages.watch import Source
    from scoctl.state import Store

log = logging.getLogger(__name__)

STAGES = ("watch", "plan", "acquire", "reconcile", "notice")
# when the notice stage finds a new reclaim notice, the pass plans and acquires again at once
NOTICE_FOLLOW_UP = ("notice-plan", "notice-acquire")


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


def connect_systems(config: Config) -> Systems:
    """Kubernetes and Slurm as the watch stage finds them configured (clouds stay lazy)."""
    from scoctl.stages.watch import available_sources, connect

    sources = tuple(available_sources(config))
    cluster, scheduler = connect(config, sources)
    systems = Systems(cluster=cluster, scheduler=scheduler, sources=sources)
    if cluster is not None:
        systems.owned.append(cluster)
    return systems


def run_once(config: Config, store: Store, clock: Clock, systems: Systems, *,
             teardown: bool = True, region: str | None = None,
             acquire_watch: float | None = None,
             sleep: Callable[[float], None] = time.sleep,
             budget: Callable[[Config, Region], TokenBudget] | None = None) -> RunResult:
    """One pass of the loop; the caller holds the run lock. Writes metrics when configured."""
    started = time.perf_counter()
    counter = CallCounter()
    if budget is None:
        from scoctl.host.budget import budget_for

        budget = budget_for
    budgets: dict[str, TokenBudget] = {}

    def tokens(cfg: Config, reg: Region) -> TokenBudget:
        if reg.name not in budgets:
            assert budget is not None
            budgets[reg.name] = budget(cfg, reg)
        return budgets[reg.name]

    clouds: dict[str, Cloud] = {}

    def cloud(cfg: Config, reg: Region, spend: TokenBudget | None = None) -> Cloud:
        if reg.name not in clouds:
            given = (systems.clouds or {}).get(reg.name)
            if given is None:
                from scoctl.adapters.factory import cloud_for

                given = cloud_for(cfg, reg, budget=spend or tokens(cfg, reg))
            clouds[reg.name] = CountingCloud(given, reg.name, counter)
        return clouds[reg.name]

    reports: list[StageReport] = []

    def stage(name: str, body: Callable[[], tuple[Any, list[str]]], skip: str = "") -> Any:
        if skip:
            reports.append(StageReport(name, 0.0, True, skipped=skip))
            return None
        t0 = time.perf_counter()
        try:
            result, errors = body()
        except ApiError as exc:
            log.warning("run: %s failed: %s", name, exc)
            reports.append(StageReport(name, time.perf_counter() - t0, False, (str(exc),)))
            return None
        reports.append(StageReport(name, time.perf_counter() - t0, not errors,
                                   tuple(errors), result=result))
        return result

    def watch() -> tuple[Any, list[str]]:
        from scoctl.stages.watch import run_pass

        result = run_pass(config, store, clock, sources=systems.sources,
                          teardown=teardown, cluster=systems.cluster,
                          scheduler=systems.scheduler)
        return result, list(result.errors)

    def notice(listed: Any) -> tuple[Any, list[str]]:
        from scoctl.stages.notice import run_notices
        from scoctl.stages.reconcile import power_release

        servers = {r.region: r.servers for r in listed.regions} if listed is not None else None
        result = run_notices(config, store, clock, region=region,
                             connect=lambda cfg, reg: cloud(cfg, reg),
                             cluster=systems.cluster, scheduler=systems.scheduler,
                             servers=servers, sleep=sleep)
        if result.release:
            power_release(store, result.release, "reclaim notice", suspend=False)
        return result, list(result.errors)

    def plan() -> tuple[Any, list[str]]:
        from scoctl.stages.plan import run_plan

        result = run_plan(config, store, clock)
        return result, []

    def acquire() -> tuple[Any, list[str]]:
        from scoctl.stages.acquire import DEFAULT_WATCH_S, run_acquire

        result = run_acquire(config, store, clock, region=region,
                             connect=lambda cfg, reg, spend: cloud(cfg, reg, spend),
                             budget=tokens,
                             watch=DEFAULT_WATCH_S if acquire_watch is None else acquire_watch,
                             sleep=sleep, scheduler=systems.scheduler)
        return result, list(result.errors)

    def reconcile() -> tuple[Any, list[str]]:
        from scoctl.stages.reconcile import run_reconcile

        result = run_reconcile(config, store, clock, region=region, teardown=teardown,
                               connect=lambda cfg, reg: cloud(cfg, reg),
                               cluster=systems.cluster, scheduler=systems.scheduler,
                               discover=False)
        return result, list(result.errors)

    watch_result = stage("watch", watch,
                         "" if systems.sources else "no Kubernetes or Slurm configured")
    plan_result = stage("plan", plan)
    stage("acquire", acquire)
    reconciled = stage("reconcile", reconcile)
    noticed = stage("notice", lambda: notice(reconciled))  # on reconcile's server listing
    if noticed is not None and noticed.replan:  # replace the noticed units in this pass
        stage(NOTICE_FOLLOW_UP[0], plan)
        stage(NOTICE_FOLLOW_UP[1], acquire)
    seconds = time.perf_counter() - started
    run = RunResult(stages=tuple(reports), seconds=seconds)
    if config.metrics_file is not None:
        from scoctl.host.metrics import write_atomically
        from scoctl.stages.metrics import collect

        sample = RunSample(
            stages=[StageSample(s.name, s.seconds, s.ok) for s in reports],
            plan_seconds=getattr(plan_result, "seconds", None),
            calls=counter.snapshot(),
            tokens_available={name: b.available() for name, b in budgets.items()},
            tokens_spent={name: b.spent for name, b in budgets.items()},
            succeeded_at=clock.now().timestamp() if not run.failed else None,
            pending={name: c.pending for name, c in getattr(watch_result, "sources", {}).items()
                     if c.error is None})
        write_atomically(config.metrics_file, collect(store, sample))
        run = RunResult(stages=run.stages, seconds=seconds,
                        metrics_file=str(config.metrics_file))
    return run
