"""Time is injected (STYLE §8): stages take a Clock, tests pass a FixedClock."""

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


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()


class FixedClock:
    """A clock for tests that moves only when told to."""

    def __init__(self, start: datetime | None = None) -> None:
        self._now = start or datetime(2026, 1, 1, tzinfo=UTC)
        self._mono = 0.0

    def now(self) -> datetime:
        return self._now

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)
        self._mono += seconds
