"""What several runners on one database share beside the state: leases and the token budget.

`PgCoordination` holds a connection of its own (a lease renewal must never wait for, or join, a
stage's transaction); `SharedBudget` is `scoctl.host.budget.TokenBudget`'s interface over the
database, shared by every process on every host (design: Words, Runners).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from scoctl.core.lease import LeaseDecision
from scoctl.core.model import LeaseRecord
from scoctl.errors import StateUnavailable
from scoctl.secrets import scrub
from scoctl.state.postgresql import connect, display_url, leases

WINDOW_S = 1.0
GUARD_S = 0.05  # as the host-wide file budget: absorbs the jitter between a grant and Nova


class PgCoordination:
    """Leases of the database at `url`, on a connection of their own (thread-safe)."""

    def __init__(self, url: str, password_file: Path | None) -> None:
        self.url, self.password_file = url, password_file
        self._conn: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def _run(self, work: Callable[[psycopg.Connection[Any]], Any]) -> Any:
        with self._lock:
            try:
                if self._conn is None or self._conn.closed:
                    self._conn = connect(self.url, password_file=self.password_file,
                                         application="scoctl-lease")
                    # closed with its owner (a budget lives for one run, nobody closes it)
                    weakref.finalize(self, self._conn.close)
                return work(self._conn)
            except psycopg.OperationalError as exc:
                if self._conn is not None:
                    self._conn.close()
                self._conn = None  # reconnect on the next call
                raise StateUnavailable(f"state {display_url(self.url)}: "
                                     f"{scrub(str(exc)).strip()}") from None

    def take(self, region: str, holder: str, mine: int | None, ttl: float) -> LeaseDecision:
        """Take or renew `region`'s lease (`leases.take`)."""
        decision: LeaseDecision = self._run(
            lambda conn: leases.take(conn, region, holder, mine, ttl))
        return decision

    def give_up(self, region: str, holder: str, mine: int) -> bool:
        """End this runner's term in `region` now."""
        return bool(self._run(lambda conn: leases.give_up(conn, region, holder, mine)))

    def leases(self) -> list[LeaseRecord]:
        found: list[LeaseRecord] = self._run(leases.read_leases)
        return found

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class SharedBudget:
    """At most `rate` mutating calls of `region` in any window, across every host."""

    def __init__(self, url: str, password_file: Path | None, region: str, rate: int, *,
                 sleep: Callable[[float], None] = time.sleep, guard: float = GUARD_S) -> None:
        if rate < 1:
            raise ValueError("rate must be at least 1 call per second")
        self.region, self.rate, self.sleep = region, rate, sleep
        self.window = WINDOW_S + max(0.0, guard)
        self.spent = 0
        self._db = PgCoordination(url, password_file)

    def acquire(self) -> float:
        """Block until a call may start; record it; return its start (database time)."""
        while True:
            granted, wait = self._db._run(
                lambda conn: leases.spend_token(conn, self.region, self.rate, self.window))
            if not wait:
                self.spent += 1
                return float(granted)
            self.sleep(wait + 0.001)

    def __call__(self) -> None:
        self.acquire()

    def available(self) -> int:
        """Tokens free right now (for metrics and dry-runs)."""
        return int(self._db._run(
            lambda conn: leases.tokens_free(conn, self.region, self.rate, self.window)))

    def close(self) -> None:
        self._db.close()
