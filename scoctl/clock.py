"""Time is injected (design: Decisions): stages take a Clock — the time of day, a monotonic clock
for
durations, and `sleep` for the waits a stage makes (a retry round, a poll) — and tests pass a
FixedClock, on which a sleep returns at once and moves the clock by as much."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol

from scoctl.core.timefmt import parse_rfc3339, rfc3339

__all__ = ["Clock", "FixedClock", "SystemClock", "parse_rfc3339", "rfc3339"]


class Clock(Protocol):
    def now(self) -> datetime:
        """The current time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary start, for durations."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(seconds, 0.0))


class FixedClock:
    """A clock for tests that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0
        self.slept: list[float] = []  # every sleep asked for, in order

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def sleep(self, seconds: float) -> None:
        """Return at once, the clock moved on by `seconds` (as a real sleep would)."""
        self.slept.append(seconds)
        self.advance(max(seconds, 0.0))

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds

    def step(self, seconds: float) -> None:
        """Step the time of day by `seconds` (forward or back) and leave the monotonic clock
        where it is: what setting the clock, or NTP stepping it, does."""
        self._now += timedelta(seconds=seconds)
