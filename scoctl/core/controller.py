"""The controller's scheduling decisions (design: Controller), pure: what runs now, given the
timers,
the deltas seen and the clock — and what the last step changes.

The controller (`scoctl.runner.controller`) feeds this module facts: a demand delta from the
pod watch (`demand_changed`), events waiting in the spool (`spool_waiting`), a node that
changed or a stage that wants a reconcile (`reconcile_wanted`), a region it came to lead
(`leader_gained`, design: Runners), and how each step it ran went
(`after_intake`, `after_act`, `after_reconcile`). `next_step` answers with the one step due now
(or how long to wait until one is):

* ``intake`` — a watch pass: when the batch window closed (1 s after the last delta, 5 s after
  the first: `core.intake.batch.window_due`), when the spool holds events, and every `poll`
  seconds (Slurm's squeue / slurmrestd, and the Kubernetes objects beyond pods: quota blocks,
  availability); `Due.kubernetes` / `Due.slurm` say which sources it reads;
* ``act`` — plan and acquire, at once after an intake that changed a claim, after a stage left
  workloads to re-plan (an exclusion, a reclaim), and again after a failed acquire;
* ``reconcile`` — every `reconcile` seconds (every `notice` seconds while the fleet holds
  reclaimable capacity: the server listing is where a `sco:reclaim-at` notice shows, design:
  Notices), right after launches, every `follow_up` seconds while launched servers boot or a
  noticed instance drains, and when asked (at most once per `gap`).

A step that failed (an API down) is retried with exponential back-off (`backoff`), never in a
tight loop; `recovered` ends the back-off at once when the API answers again (the pod watch is
back). `Outages` turns per-step success and failure into one warning per outage and one
notice when it ends. Time is the caller's monotonic clock, passed in.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from scoctl.core.intake.batch import BatchWindow, extend_window, window_deadline

Step = Literal["intake", "act", "reconcile"]
STEPS: tuple[Step, ...] = ("intake", "act", "reconcile")
BACKOFF_BASE_S = 1.0
BACKOFF_MAX_S = 60.0


@dataclass(frozen=True)
class Timers:
    """The controller's periods, in seconds (from the config: `intake`, `slurm.poll`,
    `timeouts.reconcile_interval`, `timeouts.notice_poll`; a `notice` of 0 is off)."""

    batch_idle: float = 1.0
    batch_max: float = 5.0
    poll: float = 5.0
    spool: float = 1.0
    reconcile: float = 15.0
    follow_up: float = 2.0
    notice: float = 0.0
    gap: float = 1.0
    slurm: bool = False  # Slurm is a source: the periodic intake reads it
    held: float = 180.0  # launches a region lacked a name for are tried again this often


@dataclass(frozen=True)
class Schedule:
    """Where the timers stand. Start with `start(now)`."""

    window: BatchWindow | None = None
    next_poll: float = 0.0
    next_spool: float = 0.0
    next_reconcile: float = 0.0
    last_reconcile: float = -math.inf
    spool: bool = False  # events wait in the spool
    act: bool = False  # plan + acquire owed
    reconcile: bool = False  # a reconcile was asked for
    failures: Mapping[Step, int] = field(default_factory=dict)
    retry_at: Mapping[Step, float] = field(default_factory=dict)
    recheck_at: float = math.inf  # launches held for a name their region lacks: try again


@dataclass(frozen=True)
class Due:
    """The step to run now (None: nothing is due; wait `wait` seconds, or until a delta)."""

    step: Step | None
    wait: float = 0.0
    kubernetes: bool = False  # an intake reads Kubernetes (pods from the cache, other objects)
    slurm: bool = False  # an intake polls Slurm


def start(now: float) -> Schedule:
    """The schedule of a controller that just started: a full intake (and with it a plan, an
    acquire and a reconcile) is due at once."""
    return Schedule(next_poll=now, next_spool=now, next_reconcile=now)


def backoff(failures: int) -> float:
    """Seconds to wait after `failures` failures in a row: 1, 2, 4 … at most 60."""
    if failures <= 0:
        return 0.0
    return min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2.0 ** min(failures - 1, 16))


def _ready(s: Schedule, step: Step, now: float) -> bool:
    return now >= s.retry_at.get(step, -math.inf)


def _window_closed(s: Schedule, t: Timers, now: float) -> bool:
    return s.window is not None and now >= window_deadline(s.window, t.batch_idle, t.batch_max)


def _reconcile_at(s: Schedule, t: Timers) -> float:
    at = s.next_reconcile
    if s.reconcile:
        at = min(at, s.last_reconcile + t.gap)
    return max(at, s.retry_at.get("reconcile", -math.inf))


def next_step(s: Schedule, t: Timers, now: float) -> Due:
    """The step due now, in order intake → act → reconcile (an intake that changes a claim is
    followed by its plan at once; a launch by its reconcile); else how long until one is."""
    polled = now >= s.next_poll
    if _ready(s, "intake", now) and (polled or s.spool or _window_closed(s, t, now)):
        return Due("intake", kubernetes=polled or _window_closed(s, t, now),
                   slurm=polled and t.slurm)
    if (s.act or now >= s.recheck_at) and _ready(s, "act", now):
        return Due("act")
    if now >= _reconcile_at(s, t):
        return Due("reconcile")
    intake_at = [s.next_poll]
    if s.window is not None:
        intake_at.append(window_deadline(s.window, t.batch_idle, t.batch_max))
    if s.spool:
        intake_at.append(now)
    intake_retry = s.retry_at.get("intake", -math.inf)
    times = [max(x, intake_retry) for x in intake_at]
    times += [_reconcile_at(s, t), s.next_spool]
    if s.act:
        times.append(s.retry_at.get("act", now))
    if s.recheck_at < math.inf:
        times.append(max(s.recheck_at, s.retry_at.get("act", -math.inf)))
    return Due(None, wait=max(0.0, min(times) - now))


def spool_due(s: Schedule, now: float) -> bool:
    """Time to list the spool (the caller does, outside a pass, then calls `spool_looked`)."""
    return now >= s.next_spool


def demand_changed(s: Schedule, now: float) -> Schedule:
    """New demand arrived (a pod turned pending and provisionable, or changed its request):
    open the batch window or extend it (Karpenter's batcher: idle since the last arrival)."""
    return replace(s, window=extend_window(s.window, now))


def demand_left(s: Schedule, now: float) -> Schedule:
    """Demand went (a pending pod was bound, deleted or no longer provisionable): open the
    window when none is open, but never extend one — demand that leaves does not hold back
    the demand that arrived."""
    return s if s.window is not None else replace(s, window=extend_window(None, now))


def spool_looked(s: Schedule, t: Timers, now: float, *, waiting: bool,
                 notices: bool = False) -> Schedule:
    """The spool was listed at `now`; `waiting`: it holds events (an intake is due);
    `notices`: its notice folder holds a ``scoctl notice`` (a reconcile is due: the notice
    stage runs on reconcile's listing)."""
    return replace(s, next_spool=now + t.spool, spool=s.spool or waiting,
                   reconcile=s.reconcile or notices)


def reconcile_wanted(s: Schedule) -> Schedule:
    """A managed node changed, or a stage asked for a reconcile (a reclaim notice)."""
    return replace(s, reconcile=True)


def leader_gained(s: Schedule) -> Schedule:
    """This controller came to lead a region (its first term, or a take-over from a leader
    that died or froze): plan and acquire at once, then reconcile, so what the old leader left
    in flight is adopted as after a crash and what the plan still needs is launched."""
    return replace(s, act=True, reconcile=True)


def _failed(s: Schedule, step: Step, now: float) -> Schedule:
    n = s.failures.get(step, 0) + 1
    return replace(s, failures={**s.failures, step: n},
                   retry_at={**s.retry_at, step: now + backoff(n)})


def _succeeded(s: Schedule, step: Step) -> Schedule:
    if step not in s.failures and step not in s.retry_at:
        return s
    return replace(s, failures={k: v for k, v in s.failures.items() if k != step},
                   retry_at={k: v for k, v in s.retry_at.items() if k != step})


def recovered(s: Schedule, step: Step) -> Schedule:
    """The API behind `step` answers again: end its back-off now."""
    return _succeeded(s, step)


def answered_again(s: Schedule) -> Schedule:
    """A stalled region answers again: plan, acquire and reconcile at once — what waited on
    it goes now, not after the back-off its failed steps earned while it stalled."""
    out = recovered(recovered(s, "act"), "reconcile")
    return reconcile_wanted(leader_gained(out))


def reloaded(s: Schedule) -> Schedule:
    """The config was reloaded (a fixed image, flavor, …): plan, acquire and reconcile at once."""
    return replace(reconcile_wanted(leader_gained(s)), recheck_at=math.inf)


def after_intake(s: Schedule, t: Timers, now: float, due: Due, *, failed: bool,
                 changed: bool, replan: bool) -> Schedule:
    """An intake ran. `changed`: a claim got a new version; `replan`: workloads wait to be
    re-planned (they are planned and acquired at once)."""
    out = replace(s, spool=False, act=s.act or changed or replan)
    if due.kubernetes:
        out = replace(out, window=None)
    if now >= s.next_poll:
        out = replace(out, next_poll=now + t.poll)
    return _failed(out, "intake", now) if failed else _succeeded(out, "intake")


def after_act(s: Schedule, t: Timers, now: float, *, failed: bool, launched: bool,
              replan: bool, held: bool = False) -> Schedule:
    """Plan and acquire ran. A launch asks for a reconcile right away; a failed acquire is
    tried again after its back-off; `replan` (the acquire excluded a pool) plans again;
    `held` (launches a region lacked an image, flavor, … for) tries again every `t.held`
    seconds — not a failure: no back-off, nothing else waits for it."""
    out = replace(s, act=failed or replan, reconcile=s.reconcile or launched,
                  recheck_at=now + t.held if held else math.inf)
    if launched:
        out = replace(out, next_reconcile=min(out.next_reconcile, now))
    return _failed(out, "act", now) if failed else _succeeded(out, "act")


def reconcile_period(t: Timers, *, booting: bool, reclaimable: bool) -> float:
    """Seconds until the next reconcile: `follow_up` while servers boot (or a noticed instance
    drains), else `reconcile` — or `notice`, when shorter and on, while reclaimable capacity is
    held (its notice, in the server listing, is seen that much sooner)."""
    if booting:
        return t.follow_up
    if reclaimable and t.notice > 0:
        return min(t.reconcile, t.notice)
    return t.reconcile


def holds_reclaimable(pools: Iterable[str | None], tiers: Mapping[str, str]) -> bool:
    """Some live instance (given by its pool) sits in a pool of the reclaimable tier."""
    return any(tiers.get(p or "") == "reclaimable" for p in pools)


def after_reconcile(s: Schedule, t: Timers, now: float, *, failed: bool, booting: bool,
                    replan: bool, reclaimable: bool = False) -> Schedule:
    """A reconcile ran. `booting`: launched servers are not Ready yet, or a noticed instance
    drains (look again in `follow_up` seconds); `reclaimable`: the fleet holds reclaimable
    capacity (look again in `notice` seconds); `replan`: it left workloads to re-plan (lost
    units, exclusions)."""
    period = reconcile_period(t, booting=booting, reclaimable=reclaimable)
    out = replace(s, reconcile=False, last_reconcile=now, next_reconcile=now + period,
                  act=s.act or replan)
    return _failed(out, "reconcile", now) if failed else _succeeded(out, "reconcile")


def plans_behind(claims: Iterable[tuple[str, int, bool]], planned: Mapping[str, int]) -> bool:
    """Some claim (workload, version, has demand) is newer than its committed plan, or a plan
    outlives its claim's demand: claims another process wrote (``scoctl slurm resume``,
    ``plan --claims``) want a plan too."""
    demand: set[str] = set()
    for workload, version, has_demand in claims:
        if has_demand:
            demand.add(workload)
            if planned.get(workload, 0) < version:
                return True
    return any(workload not in demand for workload in planned)


def plans_stale(excluded_then: Collection[str] | None, excluded: Collection[str],
                rebalances_due: Iterable[float], now: float) -> bool:
    """A pool excluded when the plan step last ran (`excluded_then`; None: it has not run) is
    no longer (the exclusion lapsed or was lifted: the stable re-plan may differ now, and the
    fresh plan with it, design: Rebalance), or a pending rebalance's stabilize window has run out
    (`rebalances_due`: when each waiting one may be planned, on the `now` clock): the plan
    step runs again though no claim changed."""
    if excluded_then is not None and any(pool not in excluded for pool in excluded_then):
        return True
    return any(at <= now for at in rebalances_due)


def plan_unacquired(latest: int | None, acquired: int | None) -> bool:
    """A plan generation newer than the last one this controller acquired after: another
    runner (a standby, a leader since deposed, ``scoctl plan``) committed it, so no claim looks
    behind here, yet its units are this controller's to launch where it leads."""
    return latest is not None and (acquired is None or latest > acquired)


# --- outages -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutageEvent:
    """One event to record: ``API_UNAVAILABLE`` (warning) when an outage starts,
    ``API_RECOVERED`` (info) with how long it lasted when it ends. The state's own outage (its
    database lost, its filesystem full) is not an API's: ``STATE_UNAVAILABLE`` and
    ``STATE_RECOVERED``."""

    token: Literal["API_UNAVAILABLE", "API_RECOVERED", "STATE_UNAVAILABLE", "STATE_RECOVERED"]
    api: str
    detail: str = ""
    seconds: float = 0.0
    at: str | None = None  # when it was seen (RFC 3339; None: when recorded)

    @property
    def starts(self) -> bool:
        """Whether this event starts an outage (else it ends one)."""
        return self.token in ("API_UNAVAILABLE", "STATE_UNAVAILABLE")


@dataclass(frozen=True)
class Outages:
    """The APIs that are down, and since when (monotonic seconds)."""

    down: Mapping[str, float] = field(default_factory=dict)


def api_result(o: Outages, api: str, now: float, *,
               error: str | None) -> tuple[Outages, OutageEvent | None]:
    """Fold one call's outcome into the outages: the first failure of an outage and the first
    success after it each give one event; every other outcome gives none."""
    if error is not None:
        if api in o.down:
            return o, None
        if api == "state":
            return Outages({**o.down, api: now}), OutageEvent("STATE_UNAVAILABLE", api, error)
        return Outages({**o.down, api: now}), OutageEvent("API_UNAVAILABLE", api, error)
    if api not in o.down:
        return o, None
    since = o.down[api]
    seconds = max(0.0, now - since)
    return (Outages({k: v for k, v in o.down.items() if k != api}),
            OutageEvent("STATE_RECOVERED", api, seconds=seconds) if api == "state"
            else OutageEvent("API_RECOVERED", api, seconds=seconds))
