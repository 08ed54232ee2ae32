"""The SQLite backend: one state file through sqlite-utils (WAL, mode 0600, busy timeout).

Every public method that writes runs in a transaction; callers group several writes into one
stage transaction with ``with store.transaction():`` (re-entrant), so a crash leaves the previous
state, never half a plan. `SqliteStore` implements `scoctl.state.store.Store`; its table groups
live in `workloads`, `plans`, `fleet`, `latency`, `notices` and `controls`, the shared
connection and transaction in `base`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from scoctl.clock import Clock, SystemClock
from scoctl.core import model
from scoctl.errors import StateError, StateUnavailable
from scoctl.state.checks import check_tables
from scoctl.state.migrations import MIGRATIONS, SCHEMA_VERSION
from scoctl.state.sqlite.base import (
    BUSY_TIMEOUT_S,
    JOURNAL_SIZE_LIMIT,
    WAL_AUTOCHECKPOINT_PAGES,
    StateConnection,
)
from scoctl.state.sqlite.controls import ControlTables
from scoctl.state.sqlite.fleet import FleetTables
from scoctl.state.sqlite.latency import LatencyTables
from scoctl.state.sqlite.notices import NoticeTables
from scoctl.state.sqlite.plans import PlanTables
from scoctl.state.sqlite.workloads import WorkloadTables

if TYPE_CHECKING:
    from scoctl.core.model import MetricCounters  # built on first use: the gate keeps none

__all__ = ["SqliteStore", "run_migrations"]


class SqliteStore(WorkloadTables, PlanTables, FleetTables, LatencyTables, NoticeTables,
                  ControlTables):
    """The `Store` over one SQLite file. Open with `SqliteStore.open` (or `open_store`)."""

    @classmethod
    def open(cls, path: Path, *, clock: Clock | None = None, create: bool = False,
             migrate: bool = True) -> SqliteStore:
        """Open the state file at `path`.

        `create` makes a missing file (mode 0600); otherwise a missing file is a StateError
        telling the operator to run ``scoctl init``. A file written by a newer schema is refused
        and left untouched. With `migrate` an older file is brought up to date.
        """
        path = Path(path)
        if not path.exists():
            if not create:
                raise StateError(f"{path}: no state file (run `scoctl init` first)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StateError(f"{path}: cannot create the state file: "
                                 f"{exc.strerror or exc}") from exc
        try:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False, factory=StateConnection)
            conn.shown = str(path)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path}: not a usable SQLite state file ({exc})") from exc
        if version > SCHEMA_VERSION:
            conn.close()
            raise StateError(
                f"{path}: written by a newer scoctl (schema {version}, this scoctl knows "
                f"{SCHEMA_VERSION}); upgrade scoctl — the file was not modified"
            )
        try:
            check_tables(conn, path, version)  # scoctl.state.checks: never migrate a stranger
        except StateError:
            conn.close()
            raise
        if not migrate and version < SCHEMA_VERSION:  # before WAL mode: readers never write
            conn.close()
            raise StateError(f"{path}: schema {version} is older than {SCHEMA_VERSION}; "
                             "run `scoctl init` to migrate it")
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StateError(f"{path}: cannot set WAL mode ({exc})") from exc
        store = cls(conn, path, clock or SystemClock())
        if migrate and version < SCHEMA_VERSION:
            store._migrate(version)
            store.migrated_from = version
        return store

    def _migrate(self, current: int) -> None:
        run_migrations(self.conn, MIGRATIONS, current)
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass

    # -- metrics ---------------------------------------------------------------------------

    def metric_counters(self) -> MetricCounters:
        """The counters `scoctl run` keeps across runs (zero before the first)."""
        calls = {(region, outcome): n for region, outcome, n in self.conn.execute(
            "SELECT region, outcome, calls FROM metric_cloud_calls ORDER BY region, outcome")}
        spent = dict(self.conn.execute(
            "SELECT region, tokens FROM metric_tokens_spent ORDER BY region"))
        last = self.conn.execute("SELECT at FROM run_last_success").fetchone()
        disruptions = {(w, r, d): n for w, r, d, n in self.conn.execute(
            "SELECT workload, reason, decision, n FROM metric_disruptions "
            "ORDER BY workload, reason, decision")}
        cost = dict(self.conn.execute("SELECT workload, cost FROM metric_cost ORDER BY workload"))
        cost_at = self.conn.execute("SELECT at FROM metric_cost_at").fetchone()
        return model.MetricCounters(cloud_calls=calls, tokens_spent=spent,
                                    last_success=last[0] if last else None,
                                    disruptions=disruptions, cost=cost,
                                    cost_at=cost_at[0] if cost_at else None)

    def save_metric_counters(self, counters: MetricCounters) -> None:
        """Replace the counters with `counters`."""
        with self.transaction():
            self.conn.execute("DELETE FROM metric_cloud_calls")
            self.conn.executemany(
                "INSERT INTO metric_cloud_calls (region, outcome, calls) VALUES (?, ?, ?)",
                [(region, outcome, n) for (region, outcome), n
                 in sorted(counters.cloud_calls.items())])
            self.conn.execute("DELETE FROM metric_tokens_spent")
            self.conn.executemany(
                "INSERT INTO metric_tokens_spent (region, tokens) VALUES (?, ?)",
                sorted(counters.tokens_spent.items()))
            self.conn.execute("DELETE FROM metric_disruptions")
            self.conn.executemany(
                "INSERT INTO metric_disruptions (workload, reason, decision, n) "
                "VALUES (?, ?, ?, ?)",
                [(*key, n) for key, n in sorted(counters.disruptions.items())])
            self.conn.execute("DELETE FROM metric_cost")
            self.conn.executemany("INSERT INTO metric_cost (workload, cost) VALUES (?, ?)",
                                  sorted(counters.cost.items()))
            self.conn.execute("DELETE FROM metric_cost_at")
            if counters.cost_at is not None:
                self.conn.execute("INSERT INTO metric_cost_at (only_row, at) VALUES (1, ?)",
                                  [counters.cost_at])
            if counters.last_success is None:
                self.conn.execute("DELETE FROM run_last_success")
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO run_last_success (only_row, at) VALUES (1, ?)",
                    [counters.last_success])

    def counts(self) -> dict[str, int]:
        """Row counts per table, for `status` and `init` summaries."""
        out = {}
        for table in ("workloads", "events", "claims", "plan_generations", "instances",
                      "launches"):
            out[table] = int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        return out


def run_migrations(conn: sqlite3.Connection, migrations: Sequence[str], current: int) -> int:
    """Bring a state file at schema `current` up to ``len(migrations)``; returns the version.

    Each migration runs in its own transaction with the ``user_version`` bump, so a failing one
    leaves the file at the previous version; a migration another process applied meanwhile is
    skipped.
    """
    for number in range(current + 1, len(migrations) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            again = conn.execute("PRAGMA user_version").fetchone()[0]
            if again >= number:  # another process migrated it meanwhile
                conn.execute("ROLLBACK")
                continue
            for statement in _split_sql(migrations[number - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:  # SQLite may have rolled it back itself (a full disk)
                with contextlib.suppress(sqlite3.Error, StateUnavailable):
                    conn.execute("ROLLBACK")
            raise
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.splitlines():
        if not line.strip():
            continue
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if current and "\n".join(current).strip():
        statements.append("\n".join(current).strip())
    return statements
