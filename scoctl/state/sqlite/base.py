"""The connection every SQLite table group shares: the store clock, one re-entrant
transaction, the JSON encoding of list and mapping columns.

A full or failing filesystem is a state outage, as a lost PostgreSQL connection is: every
statement on the connection (`StateConnection`) maps SQLite's ``SQLITE_FULL`` and
``SQLITE_IOERR`` to `StateUnavailable` (exit 1; the controller's passes wait and retry), and a
transaction whose statement or COMMIT failed is rolled back, so nothing is half-written. The
write-ahead log is kept small (`WAL_AUTOCHECKPOINT_PAGES`, `JOURNAL_SIZE_LIMIT`), so that a
small filesystem is not filled by the log alone.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scoctl.clock import Clock, rfc3339
from scoctl.errors import StateUnavailable

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_S = 30.0
# The write-ahead log is checkpointed into the state file once it holds this many pages (SQLite's
# default is 1,000: 4 MiB of log at 4 KiB pages, which alone fills a small filesystem), and cut
# back to `JOURNAL_SIZE_LIMIT` bytes whenever it starts over.
WAL_AUTOCHECKPOINT_PAGES = 100
JOURNAL_SIZE_LIMIT = 512 * 1024
SQLITE_IOERR, SQLITE_FULL = 10, 13  # primary result codes (an extended IOERR_* keeps 10 low)
OUTAGE_CODES = frozenset({SQLITE_IOERR, SQLITE_FULL})


def outage_of(exc: BaseException, shown: str) -> StateUnavailable | None:
    """`exc` as a state outage when the filesystem under the state is full or failing
    (``SQLITE_FULL``, any ``SQLITE_IOERR``), else None."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlite3.Error) or code is None or code & 0xFF not in OUTAGE_CODES:
        return None
    why = "its filesystem is full" if code & 0xFF == SQLITE_FULL else (
        "its filesystem is full or failing")
    return StateUnavailable(f"state {shown}: {exc} ({why}; nothing was written)")


class StateConnection(sqlite3.Connection):
    """`sqlite3.Connection` whose statements raise `StateUnavailable` for a full or failing
    filesystem (`outage_of`); `shown` names the state file in that message."""

    shown = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        try:
            return super().execute(sql, parameters)
        except sqlite3.Error as exc:
            raise (outage_of(exc, self.shown) or exc) from exc

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> sqlite3.Cursor:
        try:
            return super().executemany(sql, parameters)
        except sqlite3.Error as exc:
            raise (outage_of(exc, self.shown) or exc) from exc

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(sql_script)
        except sqlite3.Error as exc:
            raise (outage_of(exc, self.shown) or exc) from exc


def dumps(value: Any) -> str:
    """JSON for a list or mapping column: compact, keys sorted."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def loads(text: str | None, default: Any) -> Any:
    """A list or mapping column back, `default` for an empty one."""
    return json.loads(text) if text else default


class SqliteBase:
    """An open SQLite state file: its connection, path and clock; transactions and `now`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Clock) -> None:
        self.conn = conn
        self.path = path
        self.clock = clock
        self._depth = 0
        self.migrated_from: int | None = None  # the schema `open` migrated from, if it did

    @cached_property
    def db(self) -> sqlite_utils.Database:
        """sqlite-utils over the connection, made on first use: importing it (and the plugin
        scan it runs) costs more than a gate's whole transaction, which never needs it."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """One write transaction (BEGIN IMMEDIATE); re-entrant; rolls back on any exception."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self
        except BaseException as exc:
            self._depth = 0
            self._abandon(exc)
            raise
        self._depth = 0
        try:
            self.conn.execute("COMMIT")
        except BaseException as exc:  # a full disk at COMMIT: the transaction is not kept
            self._abandon(exc)
            raise

    def _abandon(self, exc: BaseException) -> None:
        """Roll the open transaction back (SQLite may have done so itself after an I/O
        error: then there is none left), and after a state outage give the write-ahead log's
        space back where it can (a truncating checkpoint that never waits for a reader)."""
        with contextlib.suppress(sqlite3.Error, StateUnavailable):
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
        if isinstance(exc, StateUnavailable):
            with contextlib.suppress(sqlite3.Error, StateUnavailable):
                self.conn.execute("PRAGMA busy_timeout = 0")
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            with contextlib.suppress(sqlite3.Error, StateUnavailable):
                self.conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")

    def now(self) -> str:
        return rfc3339(self.clock.now())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of a query as a dict (column name -> value), None without one."""
        cursor = self.conn.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        return dict(zip([column[0] for column in cursor.description], row, strict=True))

