"""The token budget: at most N mutating cloud calls per second per region, host-wide.

Shared by every scoctl process on the host through one small file per region (design: Words), not
the state file. The file holds the start times of the calls of the last second (a sliding-window
log), updated under an exclusive `flock`, so no 1-second window ever holds more than N calls —
across processes, retries and recovery alike. Each call holds its slot for the second plus a
small guard (`GUARD_S`): a token is taken just before the request is sent, and the guard absorbs
the jitter between taking it and the request reaching Nova, so Nova too never sees more than N
calls in any second.

Its times are the host's monotonic clock (``CLOCK_MONOTONIC``: one clock for every process of
the host, never stepped), so a step of the time of day never stretches or shrinks a window; a
stamp from the future (a file older than the last boot) is taken as now and written back so,
and no wait is ever longer than one window.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from scoctl.config.schema import Config, Region

WINDOW_S = 1.0
GUARD_S = 0.05


class Budget(Protocol):
    """A region's token budget, as the stages and the cloud adapters spend it: this module's
    host-wide file (`TokenBudget`, with a SQLite state) or the database's, shared by every
    host (`scoctl.state.postgresql.coordination.SharedBudget`, with a PostgreSQL state)."""

    rate: int
    spent: int

    def acquire(self) -> float:
        """Block until a call may start; record it; return the recorded start time."""
        ...

    def __call__(self) -> None:
        """`acquire`, for the adapters' ``budget()`` callable."""
        ...

    def available(self) -> int:
        """Tokens free right now (for metrics and dry-runs)."""
        ...


class TokenBudget:
    """A host-wide sliding-window rate limit for one region."""

    def __init__(self, directory: Path, region: str, rate: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, guard: float = GUARD_S) -> None:
        if rate < 1:
            raise ValueError("rate must be at least 1 call per second")
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", region)
        self.path = Path(directory) / f"budget-{safe}.json"
        self.rate = rate
        self.clock = clock
        self.sleep = sleep
        self.spent = 0
        self.window = WINDOW_S + max(0.0, guard)

    def acquire(self) -> float:
        """Block until a call may start; record it; return the recorded start time."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                now = self.clock()
                stamps = _read(fd)
                calls = [min(t, now) for t in stamps if now - t < self.window]
                if len(calls) < self.rate:
                    calls.append(now)
                    _write(fd, calls)
                    self.spent += 1
                    return now
                if any(t > now for t in stamps):  # from the future: now, for good
                    _write(fd, calls)
                wait = self.window - (now - calls[0]) + 0.001
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
            self.sleep(min(max(wait, 0.001), self.window))

    def __call__(self) -> None:
        self.acquire()

    def available(self) -> int:
        """Tokens free right now (for metrics and dry-runs)."""
        if not self.path.exists():
            return self.rate
        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            now = self.clock()
            return max(0, self.rate - sum(1 for t in _read(fd) if now - min(t, now) <
                                          self.window))
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read(fd: int) -> list[float]:
    raw = os.pread(fd, 1 << 16, 0)
    if not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except ValueError:
        return []
    return sorted(float(t) for t in data if isinstance(t, int | float))


def _write(fd: int, calls: list[float]) -> None:
    data = json.dumps(calls).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def budget_for(config: Config, region: Region) -> TokenBudget:
    """The host-wide token budget of `region`."""
    return TokenBudget(config.budget_dir, region.name, region.mutating_calls_per_second)
