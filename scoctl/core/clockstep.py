"""Steps of the time of day, and ages that never grow by one (issue 49 item 12), pure.

The state stamps what happens with the time of day (RFC 3339), and reconcile's timeouts — a
launch's and a registration's, idle, expiry, repair, an intent's settle time, an orphan's grace
— compare those stamps with the time of day now. When the time of day is stepped forward (a
wrong clock set right, NTP stepping after a long suspend), every stamp looks older by the step
and a timeout would fire early: a booting server deleted, a disruption started.

The rule: the host notes every forward step it sees (`observe`: the time of day moved further
than the monotonic clock over the same stretch, by more than `TOLERANCE_S`), as a `Step` — how
far, and the time of day (the new one) at which it was seen. An age is then reckoned without
the steps that came after its stamp (`ages_now`): a stamp from before a step is as old as the
monotonic clock says, not as the stepped time of day says. A stamp written after the step but
before it was seen loses the step too: its timeout fires late by at most the step, never
early. A backward step needs nothing: every age shrinks by it, so timeouts fire late. Steps are
kept across reboots (their boundaries are times of day), the newest `MAX_STEPS` of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

TOLERANCE_S = 2.0  # a jump smaller than this is NTP's slewing or scheduling noise, not a step
MAX_STEPS = 32


@dataclass(frozen=True)
class Step:
    """The time of day jumped `seconds` ahead of the monotonic clock; seen at `seen` (Unix
    seconds of the new time of day)."""

    seen: float
    seconds: float


@dataclass(frozen=True)
class ClockLog:
    """The last look at the host's clocks (`boot`: the boot it was taken in; the monotonic
    clock starts again with every boot) and the forward steps seen so far."""

    boot: str
    wall: float
    mono: float
    steps: tuple[Step, ...] = ()


def observe(log: ClockLog | None, *, boot: str, wall: float, mono: float) -> ClockLog:
    """Fold one look at the clocks (time of day `wall`, monotonic `mono`) into `log`: a
    forward step since the last look is noted; a new boot starts the monotonic reckoning
    again (and keeps the steps)."""
    if log is None:
        return ClockLog(boot, wall, mono)
    if log.boot != boot or mono < log.mono:
        return ClockLog(boot, wall, mono, log.steps)
    jump = (wall - log.wall) - (mono - log.mono)
    steps = log.steps
    if jump > TOLERANCE_S:
        steps = (*steps, Step(wall, jump))[-MAX_STEPS:]
    return ClockLog(boot, wall, mono, steps)


def held_back(steps: Sequence[Step], stamp: datetime) -> float:
    """Seconds of forward steps seen after `stamp`: by how much its age looks too old."""
    at = stamp.timestamp()
    return sum(s.seconds for s in steps if at < s.seen)


class AgesNow(datetime):
    """The time of day now, whose difference with an earlier stamp is that stamp's age
    without the forward steps seen since it (`held_back`), never below zero. Everything else
    — adding a duration, formatting, comparing — is the plain time of day."""

    steps: tuple[Step, ...] = ()

    def plain(self) -> datetime:
        return datetime(self.year, self.month, self.day, self.hour, self.minute, self.second,
                        self.microsecond, tzinfo=self.tzinfo, fold=self.fold)

    def __sub__(self, other: Any) -> Any:
        plain = self.plain()
        if not isinstance(other, datetime):
            return plain - other
        age = plain - other
        if age <= timedelta(0) or not self.steps:
            return age
        return max(age - timedelta(seconds=held_back(self.steps, other)), timedelta(0))

    def __add__(self, other: Any) -> Any:
        return self.plain() + other

    __radd__ = __add__


def ages_now(now: datetime, steps: Sequence[Step]) -> datetime:
    """`now` for reckoning ages across the forward `steps` (see `AgesNow`); `now` itself when
    no step was seen."""
    if not steps:
        return now
    out = AgesNow(now.year, now.month, now.day, now.hour, now.minute, now.second,
                  now.microsecond, tzinfo=now.tzinfo, fold=now.fold)
    out.steps = tuple(steps)
    return out
