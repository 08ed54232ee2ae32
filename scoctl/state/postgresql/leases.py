"""Leases, the fence check and the shared token budget in SQL (design: Runners).

Each function runs on a psycopg connection in autocommit mode and opens its own short
transaction, except `check_fence`, which runs inside the caller's write transaction. None of
them takes the store's write lock: a lease renewal never waits behind a long plan transaction.
Times are the database's (``clock_timestamp()``), so the clocks of the runners' hosts never
matter.

Serialisation: a lease decision locks the region's row (``FOR UPDATE``, after a per-region
advisory lock so that two runners taking a never-leased region queue instead of colliding on
the insert); the fence check locks it ``FOR SHARE``, so a take-over waits until a fenced write
in flight commits, and that write's check saw the term still in force. Serialisation failures
and deadlocks are retried a bounded number of times with a short backoff.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import errors

from scoctl.core.lease import LeaseDecision, decide, fenced, release
from scoctl.core.model import LeaseRecord
from scoctl.core.timefmt import rfc3339
from scoctl.errors import NotLeader

LEASE_LOCK = 0x5C0C71  # advisory lock namespace of the per-region lease locks
BUDGET_LOCK = 0x5C0C72  # … of the per-region token budgets
RETRIES = 5
T = TypeVar("T")

_RETRYABLE = (errors.SerializationFailure, errors.DeadlockDetected)


def retrying(work: Callable[[], T], *, attempts: int = RETRIES) -> T:
    """Run one transaction, again after a serialisation failure or deadlock (bounded)."""
    for attempt in range(attempts):
        try:
            return work()
        except _RETRYABLE:
            if attempt == attempts - 1:
                raise
            time.sleep(0.01 * (2 ** attempt) * (1 + random.random()))
    raise AssertionError("unreachable")


def _lease(row: tuple[Any, ...] | None) -> LeaseRecord | None:
    return LeaseRecord(row[0], row[1], int(row[2]), row[3]) if row else None


def read_leases(conn: psycopg.Connection[Any]) -> list[LeaseRecord]:
    """Every region's lease row, by region."""
    rows = conn.execute("SELECT region, holder, generation, expires_at FROM leases "
                        "ORDER BY region").fetchall()
    return [lease for row in rows if (lease := _lease(row)) is not None]


def _locked(conn: psycopg.Connection[Any], region: str) -> tuple[LeaseRecord | None, datetime]:
    conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [LEASE_LOCK, region])
    row = conn.execute("SELECT region, holder, generation, expires_at FROM leases "
                       "WHERE region = %s FOR UPDATE", [region]).fetchone()
    now = conn.execute("SELECT clock_timestamp()").fetchone()
    assert now is not None
    return _lease(row), now[0]


def take(conn: psycopg.Connection[Any], region: str, holder: str, mine: int | None,
         ttl: float) -> LeaseDecision:
    """Take or renew `region`'s lease for `holder` (see `core.lease.decide`); a new term
    records ``LEADER_ELECTED`` in the same transaction."""

    def attempt() -> LeaseDecision:
        with conn.transaction():
            current, now = _locked(conn, region)
            decision = decide(current, region=region, holder=holder, mine=mine, now=now,
                              ttl=ttl)
            if decision.write:
                lease = decision.lease
                conn.execute(
                    "INSERT INTO leases (region, holder, generation, expires_at) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (region) DO UPDATE SET "
                    "holder = EXCLUDED.holder, generation = EXCLUDED.generation, "
                    "expires_at = EXCLUDED.expires_at",
                    [region, lease.holder, lease.generation, lease.expires_at])
            if decision.elected:
                previous = decision.previous
                detail = {"region": region, "holder": decision.lease.holder,
                          "generation": decision.lease.generation,
                          "previous": previous.holder if previous else None}
                conn.execute(
                    "INSERT INTO events (ts, workload, workload_id, token, level, status, "
                    "detail) VALUES (%s, NULL, NULL, 'LEADER_ELECTED', 'info', NULL, %s)",
                    [rfc3339(now), json.dumps(detail, sort_keys=True, separators=(",", ":"))])
            return decision

    return retrying(attempt)


def give_up(conn: psycopg.Connection[Any], region: str, holder: str, mine: int) -> bool:
    """End `holder`'s term `mine` of `region` now (a clean shutdown); False if not its term."""

    def attempt() -> bool:
        with conn.transaction():
            current, now = _locked(conn, region)
            ended = release(current, holder=holder, mine=mine, now=now)
            if ended is None:
                return False
            conn.execute("UPDATE leases SET expires_at = %s WHERE region = %s",
                         [ended.expires_at, region])
            return True

    return retrying(attempt)


def check_fence(conn: psycopg.Connection[Any], region: str, holder: str,
                mine: int | None) -> LeaseRecord:
    """Inside the caller's transaction: `holder` still leads `region` in term `mine`, or
    NotLeader naming who does. Locks the lease row until the transaction ends."""
    row = conn.execute("SELECT region, holder, generation, expires_at, clock_timestamp() "
                       "FROM leases WHERE region = %s FOR SHARE", [region]).fetchone()
    current = _lease(row[:4]) if row else None
    if mine is None or row is None or not fenced(current, holder=holder, mine=mine, now=row[4]):
        raise NotLeader(region, current.holder if current else None,
                        current.generation if current else None)
    assert current is not None
    return current


def spend_token(conn: psycopg.Connection[Any], region: str, rate: int,
                window: float) -> tuple[float, float]:
    """One attempt to take a token of `region`'s shared budget: (granted at, 0.0) with the
    database time the call was recorded at, or (0.0, seconds to wait) when `rate` calls
    already started within the last `window` seconds."""

    def attempt() -> tuple[float, float]:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [BUDGET_LOCK, region])
            now_row = conn.execute("SELECT extract(epoch FROM clock_timestamp())::float8"
                                   ).fetchone()
            assert now_row is not None
            now = float(now_row[0])
            conn.execute("DELETE FROM budget_calls WHERE region = %s AND at <= %s",
                         [region, now - window])
            # a call stamped in the future (the database's clock stepped back) started now
            conn.execute("UPDATE budget_calls SET at = %s WHERE region = %s AND at > %s",
                         [now, region, now])
            calls = [float(t) for (t,) in conn.execute(
                "SELECT at FROM budget_calls WHERE region = %s ORDER BY at", [region])]
            if len(calls) < rate:
                conn.execute("INSERT INTO budget_calls (region, at) VALUES (%s, %s)",
                             [region, now])
                return now, 0.0
            return 0.0, min(max(window - (now - calls[-rate]), 0.001), window)

    return retrying(attempt)


def tokens_free(conn: psycopg.Connection[Any], region: str, rate: int, window: float) -> int:
    """Tokens of `region` free right now."""
    row = conn.execute("SELECT count(*) FROM budget_calls WHERE region = %s AND "
                       "at > extract(epoch FROM clock_timestamp())::float8 - %s",
                       [region, window]).fetchone()
    return max(0, rate - int(row[0] if row else 0))
