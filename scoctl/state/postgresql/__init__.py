"""The PostgreSQL backend (design: Runners): one database shared by several runners, via psycopg 3.

`PostgresStore` is the `Store` of the SQLite backend on a PostgreSQL connection: its table
groups' queries run through `dialect` (one home for every query), and only what is dialect
specific is its own — opening and migrating (`migrations.PG_MIGRATIONS`, the same numbered
steps), the transaction, and the fenced writes.

Transactions keep SQLite's boundaries and its one-writer rule: a write transaction begins by
taking a transaction-scoped advisory lock (what ``BEGIN IMMEDIATE`` is to SQLite), so writers
from every host queue instead of conflicting, readers never wait, and a runner that dies or is
frozen mid-transaction frees the lock when its session ends or after
``idle_in_transaction_session_timeout``. Lease and budget transactions (`leases`) take other
locks and are retried on serialisation failures.

Fencing: once a runner sets `fencing` (its holder name and the terms it leads), every launch
intent and every delete it records checks, inside its own transaction, that the runner still
leads the region in that term; otherwise `NotLeader` and nothing is written.

Credentials: the URL never carries a password (`StateError` if it does); libpq reads
``PGPASSFILE`` (or ``~/.pgpass``), or `password_file` names a file holding the password alone.
Neither the password nor the file's content is ever logged or stored.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Self, cast
from urllib.parse import urlsplit, urlunsplit

import psycopg

from scoctl.clock import Clock, SystemClock
from scoctl.core.model import LaunchRecord, LeaseRecord
from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus
from scoctl.errors import StateError, StateUnavailable
from scoctl.secrets import scrub
from scoctl.state.coordination import Fencing
from scoctl.state.postgresql import leases
from scoctl.state.postgresql.dialect import PgConnection, PgDatabase
from scoctl.state.postgresql.migrations import EVENTS_FLOOR, PG_MIGRATIONS
from scoctl.state.sqlite import SqliteStore

__all__ = ["SCHEMES", "Fencing", "PostgresStore", "connect", "display_url"]

SCHEMES = ("postgresql", "postgres")
WRITE_LOCK = 0x5C0C7100  # the advisory lock every write transaction takes first
LOCK_TIMEOUT = "30s"  # as long as SQLite's busy timeout
IDLE_IN_TRANSACTION_TIMEOUT = "60s"  # a frozen writer's transaction ends, its locks go
CONNECT_TIMEOUT_S = 10


def display_url(url: str) -> str:
    """`url` without any password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    user = f"{parts.username}@" if parts.username else ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))


def read_password_file(path: Path) -> str:
    """The password `path` holds; StateError (exit 2) when it cannot be read, or when it is
    not a regular file or its group or others may read it (libpq ignores such a password
    file, ``~/.pgpass`` or ``PGPASSFILE``, for the same reason)."""
    try:
        # non-blocking: a FIFO put there must not hang the runner before its type is seen
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if not stat.S_ISREG(mode) or mode & (stat.S_IRWXG | stat.S_IRWXO):
                what = "not a regular file" if not stat.S_ISREG(mode) else (
                    f"mode {stat.S_IMODE(mode):04o}: its group or others may read it")
                raise StateError(f"state_password_file {path}: {what}; as libpq, scoctl uses "
                                 f"only a file its owner alone can read (chmod 600 {path})")
            return handle.read().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise StateError(f"state_password_file {path}: cannot read it: "
                         f"{getattr(exc, 'strerror', None) or exc}") from exc


def connect(url: str, *, password_file: Path | None = None,
            application: str = "scoctl") -> psycopg.Connection[Any]:
    """An autocommit connection to the state database; StateError (exit 2) for a URL with a
    password or an unreadable password file, TemporaryError (exit 1) when it cannot connect."""
    shown = display_url(url)
    if urlsplit(url).password is not None:
        raise StateError(f"state {shown}: the URL carries a password; put it in PGPASSFILE or "
                         "state_password_file, never in the config")
    extra: dict[str, Any] = {}
    if password_file is not None:
        extra["password"] = read_password_file(Path(password_file))
    try:
        # the application name says who holds a session (pg_stat_activity): host and pid
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                               application_name=f"{application} {socket.gethostname()}:"
                                                f"{os.getpid()}", **extra)
    except psycopg.Error as exc:
        raise StateUnavailable(f"state {shown}: cannot connect: "
                             f"{scrub(str(exc)).strip()}") from None
    try:
        conn.execute(f"SET lock_timeout = '{LOCK_TIMEOUT}'")
        conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_IN_TRANSACTION_TIMEOUT}'")
    except psycopg.OperationalError as exc:  # the server went away just after it let us in
        conn.close()
        raise StateUnavailable(f"state {shown}: {scrub(str(exc)).strip()}") from None
    return conn


def _schema_version(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT to_regclass('scoctl_schema') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    got = conn.execute("SELECT version FROM scoctl_schema").fetchone()
    return int(got[0]) if got else 0


def run_pg_migrations(conn: psycopg.Connection[Any], current: int) -> int:
    """Bring the database from schema `current` to ``len(PG_MIGRATIONS)``; each step in its
    own transaction with its version bump (a step another runner applied is skipped)."""
    for number in range(current + 1, len(PG_MIGRATIONS) + 1):
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [WRITE_LOCK])
            conn.execute("CREATE TABLE IF NOT EXISTS scoctl_schema (only_row INTEGER PRIMARY "
                         "KEY CHECK (only_row = 1), version INTEGER NOT NULL)")
            if _schema_version(conn) >= number:
                continue
            conn.execute(PG_MIGRATIONS[number - 1])
            conn.execute("INSERT INTO scoctl_schema (only_row, version) VALUES (1, %s) "
                         "ON CONFLICT (only_row) DO UPDATE SET version = EXCLUDED.version",
                         [number])
    return _schema_version(conn)


class PostgresStore(SqliteStore):
    """The `Store` over a PostgreSQL database. Open with `PostgresStore.open`."""

    def __init__(self, conn: PgConnection, url: str, clock: Clock) -> None:
        # The SQLite store's state, on a PostgreSQL connection (its __init__ wraps sqlite3).
        self.conn = cast(Any, conn)
        self.db = cast(Any, PgDatabase(conn))
        self.pg = conn
        self.url = url
        self.shown = display_url(url)  # for messages: never a password
        self.path = Path(self.shown)  # the SQLite store's attribute; nothing reads it here
        self.clock = clock
        self._depth = 0
        self.migrated_from: int | None = None
        self.fencing: Fencing | None = None

    @classmethod
    def open_url(cls, url: str, *, clock: Clock | None = None, create: bool = False,
                 migrate: bool = True, password_file: Path | None = None) -> PostgresStore:
        """Open the state database at `url` (created by its administrator, may be empty).

        `create` (``scoctl init``) brings an empty database to the current schema; otherwise
        an empty one is a StateError telling the operator to run ``scoctl init``. A database
        written by a newer schema is refused and left untouched.
        """
        shown = display_url(url)
        raw = connect(url, password_file=password_file)
        try:
            version = _schema_version(raw)
            if version > len(PG_MIGRATIONS):
                raise StateError(
                    f"state {shown}: written by a newer scoctl (schema {version}, this scoctl "
                    f"knows {len(PG_MIGRATIONS)}); upgrade scoctl — the database was not "
                    "modified")
            if version == 0 and not create:
                raise StateError(f"state {shown}: no scoctl state in this database "
                                 "(run `scoctl init` first)")
            if version < len(PG_MIGRATIONS) and not migrate:
                raise StateError(f"state {shown}: schema {version} is older than "
                                 f"{len(PG_MIGRATIONS)}; run `scoctl init` to migrate it")
            if version < len(PG_MIGRATIONS):
                run_pg_migrations(raw, version)
        except psycopg.OperationalError as exc:  # lost on the way (a restart): try again later
            raw.close()
            raise StateUnavailable(f"state {shown}: {scrub(str(exc)).strip()}") from None
        except psycopg.Error as exc:
            raw.close()
            raise StateError(f"state {shown}: not a usable scoctl state "
                             f"({scrub(str(exc)).strip()})") from None
        except BaseException:
            raw.close()
            raise
        # a lost connection (a PostgreSQL restart) is opened again on next use (`dialect`)
        try:
            conn = PgConnection(raw, shown=shown,
                                reopen=lambda: connect(url, password_file=password_file))
        except BaseException:
            raw.close()
            raise
        store = cls(conn, url, clock or SystemClock())
        if version < len(PG_MIGRATIONS):
            store.migrated_from = version
        return store

    def _migrate(self, current: int) -> None:
        with self.pg.guard():
            run_pg_migrations(self.pg.raw, current)
            self.pg.refresh_catalog()

    def schema_version(self) -> int:
        with self.pg.guard():
            return _schema_version(self.pg.raw)

    def close(self) -> None:
        self.pg.close()

    def __enter__(self) -> Self:
        return self

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Self]:
        """One write transaction, behind the write lock; re-entrant; rolls back on any
        exception (a lost connection too: TemporaryError, and the next transaction opens a new
        one — never this one, whose statements were lost with it)."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        with self.pg.guard():
            raw = self.pg.raw
        try:
            raw.execute("BEGIN")
            self.pg.pinned = True
            raw.execute("SELECT pg_advisory_xact_lock(%s)", [WRITE_LOCK])
        except psycopg.OperationalError as exc:
            self._rollback()
            raise StateUnavailable(f"state {self.shown}: {scrub(str(exc)).strip()}") from None
        self._depth = 1
        try:
            yield self
        except BaseException:
            self._depth = 0
            self._rollback()
            raise
        self._depth = 0
        try:
            raw.execute("COMMIT")
        except psycopg.OperationalError as exc:
            raise StateUnavailable(f"state {self.shown}: commit failed: "
                                 f"{scrub(str(exc)).strip()}") from None
        finally:
            self.pg.pinned = False

    def _rollback(self) -> None:
        with contextlib.suppress(psycopg.Error):
            self.pg.raw.execute("ROLLBACK")
        self.pg.pinned = False

    # -- retention (dialect-specific: the day-before-newest floor, no rowid) ------------------

    def prune_events(self, before: str, limit: int) -> int:
        """Delete up to `limit` of the oldest events older than `before` and than a day before
        the newest event (the schema's trigger enforces both); returns how many went."""
        with self.transaction(), self.pg.guard():
            raw = self.pg.raw
            raw.execute("INSERT INTO events_prune (only_row, before) VALUES (1, %s) "
                        "ON CONFLICT (only_row) DO UPDATE SET before = EXCLUDED.before",
                        [before])
            cursor = raw.execute(
                "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < %s AND ts < "
                f"(SELECT {EVENTS_FLOOR} FROM events) ORDER BY ts, id LIMIT %s)",
                [before, int(limit)])
            raw.execute("DELETE FROM events_prune")
            return max(0, cursor.rowcount)

    def _prune(self, table: str, statuses: Sequence[InstanceStatus] | Sequence[LaunchStatus],
               before: str, limit: int) -> int:
        if not statuses:
            return 0
        key = ", ".join(self.pg.catalog.keys[table])
        marks = ", ".join(["%s"] * len(statuses))
        with self.transaction(), self.pg.guard():
            cursor = self.pg.raw.execute(
                f"DELETE FROM {table} WHERE ({key}) IN (SELECT {key} FROM {table} "
                f"WHERE status IN ({marks}) AND updated < %s ORDER BY updated LIMIT %s)",
                [*statuses, before, int(limit)])
            return max(0, cursor.rowcount)

    # -- several runners ----------------------------------------------------------------------

    def leases(self) -> list[LeaseRecord]:
        """Every region's lease (who leads it, in which term, until when)."""
        with self.pg.guard():
            return leases.read_leases(self.pg.raw)

    def check_fence(self, region: str) -> None:
        """Inside a write transaction: NotLeader unless this runner still leads `region`
        (a store nobody fenced checks nothing)."""
        assert self._depth, "the fence is checked inside the transaction it guards"
        self._fence(region)

    def _fence(self, region: str) -> None:
        if self.fencing is not None:
            with self.pg.guard():
                leases.check_fence(self.pg.raw, region, self.fencing.holder,
                                   self.fencing.terms.get(region))

    def add_launch(self, launch: LaunchRecord) -> None:
        """Record a launch intent, fenced: NotLeader (nothing written) once this runner's
        term in the launch's region has ended."""
        with self.transaction():
            self._fence(launch.region)
            super().add_launch(launch)

    def record_delete(self, region: str, server_id: str) -> None:
        """Record, fenced, that this runner is about to delete `server_id` in `region`."""
        with self.transaction(), self.pg.guard():
            self._fence(region)
            if self.fencing is None:
                return
            self.pg.raw.execute(
                "DELETE FROM deletions WHERE requested_at < clock_timestamp() - interval '1 day'")
            self.pg.raw.execute(
                "INSERT INTO deletions (server_id, region, holder, generation, requested_at) "
                "VALUES (%s, %s, %s, %s, clock_timestamp()) ON CONFLICT (server_id) DO UPDATE "
                "SET region = EXCLUDED.region, holder = EXCLUDED.holder, "
                "generation = EXCLUDED.generation, requested_at = EXCLUDED.requested_at",
                [server_id, region, self.fencing.holder, self.fencing.terms.get(region)])
