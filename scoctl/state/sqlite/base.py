"""The connection every SQLite table group shares: the store clock, one re-entrant
transaction, the JSON encoding of list and mapping columns."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from scoctl.clock import Clock, rfc3339

if TYPE_CHECKING:
    import sqlite_utils

BUSY_TIMEOUT_S = 30.0


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
        except BaseException:
            self._depth = 0
            self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        self.conn.execute("COMMIT")

    def now(self) -> str:
        return rfc3339(self.clock.now())

    def _one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        """The first row of a query as a dict (column name -> value), None without one."""
        cursor = self.conn.execute(sql, params)
        row = cursor.fetchone()
        if row is None:
            return None
        return dict(zip([column[0] for column in cursor.description], row, strict=True))

