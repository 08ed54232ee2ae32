"""Disruption budgets (design: Disruption), pure: when a budget is active, and how many more
disruptions of a workload it allows.

A budget without a `schedule` is always active. One with a schedule is active from each firing
(`scoctl.core.cron`, in the budget's `time_zone`: firings are instants, see that module for
DST) for `duration` seconds: from the firing, inclusive, to firing + duration, exclusive — as
Karpenter's `Budget.IsActive` (pkg/apis/v1/nodepool.go: active when the schedule's next firing
after now − duration is not after now). Windows that overlap or touch are one active span.

`allowed` is the one budget rule: the minimum, over the active budgets that count the reason,
of `limit − in flight counted by that budget` and `rate.units − started within rate.per`. In
flight means from cordon until the server is gone or the unit is back in service, so the
caller passes what is in flight now, not what a pass started. `noticed` is never held back.

No clock: time comes in as `now` (aware).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from scoctl.core.model.disruption import Budget
from scoctl.core.model.vocabulary import BudgetLimit as Limit
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.core.timefmt import rfc3339, span

HORIZON = timedelta(days=7)  # `window_end`: a span active longer than this ahead is "no end"


def _zone(budget: Budget) -> ZoneInfo:
    return ZoneInfo(budget.time_zone)


def _span(budget: Budget) -> timedelta:
    return timedelta(seconds=budget.duration or 0.0)


def active(budget: Budget, now: datetime) -> bool:
    """Whether `budget` limits disruptions at `now`: always without a schedule; else when a
    firing F has F <= now < F + duration."""
    if budget.schedule is None:
        return True
    first = budget.schedule.next_after(now - _span(budget), _zone(budget))
    return first is not None and first <= now


def window_end(budget: Budget, now: datetime) -> datetime | None:
    """The first instant after `now` at which a scheduled `budget`, active at `now`, stops
    being active (windows that overlap or touch chain); None when it is not active, has no
    schedule, or stays active beyond `HORIZON`."""
    schedule = budget.schedule
    if schedule is None:
        return None
    zone, span = _zone(budget), _span(budget)
    end = now
    firing = schedule.next_after(now - span, zone)
    while firing is not None and firing <= end:
        end = max(end, firing + span)
        if end - now > HORIZON:
            return None
        firing = schedule.next_after(firing, zone)
    return end if end > now else None


def next_window(budget: Budget, now: datetime) -> datetime | None:
    """When `budget`'s activity next changes: the end of its current window when active, else
    its next firing; None for a budget without a schedule (always active) or one that does
    not change within the horizon."""
    if budget.schedule is None:
        return None
    if active(budget, now):
        return window_end(budget, now)
    return budget.schedule.next_after(now, _zone(budget))


def next_opening(budget: Budget, now: datetime) -> datetime | None:
    """When `budget`'s next window opens after `now`: its next firing after the window open
    now (windows that touch or overlap are one), else after `now`; None without a schedule,
    or when the open window lasts beyond the horizon."""
    if budget.schedule is None:
        return None
    after = window_end(budget, now) if active(budget, now) else now
    if after is None:
        return None
    return budget.schedule.next_after(after, _zone(budget))


@dataclass(frozen=True)
class Allowance:
    """How many more disruptions may start (`units`; None: no active budget limits them);
    when some budget limits them, the one that leaves the fewest (the first such in the
    list: `index`), and, when that is none, what of it leaves none (`by`: its units in
    flight, or its rate) and `until`: when time alone lifts it (its window ends, or its
    rate window lets a start go; None: only a disruption ending does)."""

    units: int | None
    budget: Budget | None = None
    index: int | None = None
    until: datetime | None = None
    by: Limit | None = None


def describe(budget: Budget) -> str:
    """A budget as a person reads it: ``2 in flight of drifted, 3 started per 10m, from
    0 9 * * 1-5 for 9h (Europe/Berlin)``."""
    text = f"{budget.units} in flight"
    if budget.reasons:
        text += " of " + ", ".join(sorted(r.value for r in budget.reasons))
    if budget.rate is not None:
        text += f", {budget.rate.units} started per {span(budget.rate.per)}"
    if budget.schedule is not None:
        text += (f", from {budget.schedule.text} for {span(budget.duration or 0.0)}"
                 f" ({budget.time_zone})")
    return text


def holding(budget: Budget, by: Limit | None) -> str:
    """What of `budget` leaves no room, as a person reads it: ``rate 3 per 10m used up``, or
    ``2 in flight reached``."""
    if by is Limit.RATE and budget.rate is not None:
        return f"rate {budget.rate.units} per {span(budget.rate.per)} used up"
    return f"{budget.units} in flight reached"


def held_text(budget: Budget, index: int | None, by: Limit | None,
              until: datetime | None) -> str:
    """What holds disruptions back: the budget (its index and itself), what of it, and until
    when (``a disruption in flight ends`` when no time lifts it)."""
    lifts = rfc3339(until) if until is not None else "a disruption in flight ends"
    return f"budget #{index} ({describe(budget)}): {holding(budget, by)} until {lifts}"


def allowed(budgets: Sequence[Budget], reason: DisruptionReason, *, registered: int,
            now: datetime, in_flight: Iterable[DisruptionReason],
            starts: Iterable[tuple[datetime, DisruptionReason]] = ()) -> Allowance:
    """The one budget rule for one workload of `registered` units at `now`: `in_flight` are
    the reasons of its disruptions in flight, `starts` when each of its recent disruptions
    started, and why (for `rate`). `noticed` is never held back (units None)."""
    if reason is DisruptionReason.NOTICED:
        return Allowance(None)
    flying = list(in_flight)
    started = list(starts)
    best = Allowance(None)
    for index, budget in enumerate(budgets):
        if not budget.counts(reason) or not active(budget, now):
            continue
        room = _room(budget, registered=registered, now=now, in_flight=flying, starts=started)
        if best.units is None or room.units is not None and room.units < best.units:
            best = Allowance(room.units, budget, index, room.until, room.by)
    return best


def _room(budget: Budget, *, registered: int, now: datetime,
          in_flight: Sequence[DisruptionReason],
          starts: Sequence[tuple[datetime, DisruptionReason]]) -> Allowance:
    """What one active budget leaves, and when time alone lifts a block."""
    flight_room = max(0, budget.limit(registered) - sum(1 for r in in_flight
                                                         if budget.counts(r)))
    left, rate_lifts = flight_room, None
    if budget.rate is not None:
        per = timedelta(seconds=budget.rate.per)
        recent = sorted((t for t, r in starts if budget.counts(r) and now - per < t <= now),
                        reverse=True)
        cap = budget.rate.units.of(registered)
        left = min(left, max(0, cap - len(recent)))
        if len(recent) >= cap:  # the cap-th latest start leaving the window lets one go
            rate_lifts = recent[cap - 1] + per if cap > 0 else None
    until, by = None, None
    if left == 0:
        lifts = [t for t in (window_end(budget, now),
                             rate_lifts if flight_room > 0 else None) if t is not None]
        until = min(lifts) if lifts else None
        by = Limit.UNITS if flight_room == 0 else Limit.RATE
    return Allowance(left, budget, until=until, by=by)


@dataclass(frozen=True)
class Selection:
    """`select`'s answer: the candidates that start now, in order, and those held back with
    the `Allowance` that held each."""

    start: tuple[tuple[str, DisruptionReason], ...] = ()
    blocked: tuple[tuple[str, DisruptionReason, Allowance], ...] = ()
    # for each unit that starts, the room it started in (before it counted): what allowed it
    room: Mapping[str, Allowance] = field(default_factory=dict)


def select(candidates: Iterable[tuple[str, DisruptionReason]], budgets: Sequence[Budget], *,
           registered: int, now: datetime, in_flight: Mapping[str, DisruptionReason],
           starts: Sequence[tuple[datetime, DisruptionReason]] = ()) -> Selection:
    """Which of one workload's candidates (unit, reason), in priority order, start now: each
    starts when `allowed` leaves room, and then counts as in flight and as started at `now`
    for every later one, so reasons sharing a budget that names no reason never exceed it
    together. A unit already in flight (or already chosen) is not started again."""
    flying = dict(in_flight)
    started = list(starts)
    start: list[tuple[str, DisruptionReason]] = []
    blocked: list[tuple[str, DisruptionReason, Allowance]] = []
    rooms: dict[str, Allowance] = {}
    for unit, reason in candidates:
        if unit in flying:
            continue
        room = allowed(budgets, reason, registered=registered, now=now,
                       in_flight=flying.values(), starts=started)
        if room.units == 0:
            blocked.append((unit, reason, room))
            continue
        start.append((unit, reason))
        rooms[unit] = room
        flying[unit] = reason
        started.append((now, reason))
    return Selection(tuple(start), tuple(blocked), rooms)
