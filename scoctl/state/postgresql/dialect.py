"""The SQLite store's queries on a psycopg connection: one home for every query.

The SQLite table groups write a small, plain dialect: ``?`` placeholders, SELECT / UPDATE /
DELETE / INSERT, ``INSERT OR REPLACE`` and ``INSERT OR IGNORE`` on a table's primary key, a
generated id read back through ``cursor.lastrowid``, and sqlite-utils' ``db.query`` (rows as
dicts) and ``db.table(name).insert / upsert``. `PgConnection` and `PgDatabase` present exactly
that surface over psycopg 3, translating each statement once (cached):

* ``?`` → ``%s`` (a literal ``%`` is doubled);
* ``INSERT OR REPLACE INTO t (cols)`` → ``INSERT INTO t (cols) … ON CONFLICT (key) DO UPDATE
  SET`` every other column; ``INSERT OR IGNORE`` → ``… ON CONFLICT DO NOTHING``;
* an INSERT into a table with an identity column gets ``RETURNING`` it, for ``lastrowid``;
* ``full`` (a reserved word in PostgreSQL) is quoted.

The primary keys and identity columns come from the database's own catalog when the connection
opens, so the translation never holds a second copy of the schema. Any other SQLite-only
construct (a PRAGMA, ``INSERT OR ROLLBACK`` …) is refused with a message saying so: a new query
in that dialect needs an override in `scoctl.state.postgresql`, and the tests that run the
state suite on both backends find it.

A lost connection (a PostgreSQL restart: ``AdminShutdown``, "the connection is closed") is
mapped here, once, to `TemporaryError` (`PgConnection.guard`): the caller retries on its next
tick, and the next statement outside a transaction opens a new connection (`reopen`). Inside a
transaction it never does: the statements before the loss were rolled back with it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

import psycopg
from psycopg.rows import dict_row

from scoctl.errors import StateUnavailable
from scoctl.secrets import scrub

_OR = re.compile(r"^\s*INSERT\s+OR\s+(\w+)\s+INTO\s+(\w+)\s*\(([^)]*)\)", re.IGNORECASE | re.DOTALL)
_INSERT = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)\s*\(", re.IGNORECASE)
_RESERVED = re.compile(r'(?<![\w"])full(?![\w"])')
_REFUSED = re.compile(r"^\s*(PRAGMA|INSERT\s+OR\s+(ROLLBACK|ABORT|FAIL))\b", re.IGNORECASE)


class Catalog:
    """Primary keys and identity columns of the tables in the connection's schema."""

    def __init__(self, keys: Mapping[str, tuple[str, ...]], identity: Mapping[str, str]) -> None:
        self.keys = dict(keys)
        self.identity = dict(identity)

    @classmethod
    def read(cls, conn: psycopg.Connection[Any]) -> Catalog:
        keys: dict[str, list[str]] = {}
        for table, column in conn.execute(
                "SELECT tc.table_name, kcu.column_name "
                "FROM information_schema.table_constraints tc "
                "JOIN information_schema.key_column_usage kcu "
                "ON kcu.constraint_name = tc.constraint_name "
                "AND kcu.table_schema = tc.table_schema "
                "WHERE tc.constraint_type = 'PRIMARY KEY' "
                "AND tc.table_schema = current_schema() "
                "ORDER BY tc.table_name, kcu.ordinal_position"):
            keys.setdefault(table, []).append(column)
        identity = dict(conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() AND is_identity = 'YES'").fetchall())
        return cls({t: tuple(c) for t, c in keys.items()}, identity)


@lru_cache(maxsize=512)
def _translate(sql: str, bound: bool, keys: tuple[tuple[str, tuple[str, ...]], ...],
               identity: tuple[tuple[str, str], ...]) -> tuple[str, bool]:
    """(PostgreSQL text, whether it returns the generated id) for one SQLite statement;
    `bound`: it comes with parameters (so placeholders are translated, ``%`` doubled)."""
    if _REFUSED.match(sql):
        raise ValueError(f"SQLite-only statement on PostgreSQL (override it): {sql.strip()[:80]}")
    text = sql.replace("%", "%%").replace("?", "%s") if bound else sql
    text = _RESERVED.sub('"full"', text)
    match = _OR.match(text)
    if match:
        how, table, columns = match.group(1).upper(), match.group(2), match.group(3)
        key = dict(keys).get(table)
        if key is None:
            raise ValueError(f"INSERT OR {how} INTO {table}: the table has no primary key")
        text = f"INSERT INTO {table} ({columns})" + text[match.end():]
        names = [c.strip().strip('"') for c in columns.split(",")]
        others = [n for n in names if n not in key]
        if how == "REPLACE" and others:
            sets = ", ".join(f'"{n}" = EXCLUDED."{n}"' for n in others)
            text += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}"
        elif how in ("REPLACE", "IGNORE"):
            text += " ON CONFLICT DO NOTHING"
        else:
            raise ValueError(f"INSERT OR {how}: not a dialect the PostgreSQL store translates")
    insert = _INSERT.match(text)
    column = dict(identity).get(insert.group(1)) if insert else None
    if column is not None and "RETURNING" not in text.upper():
        return f"{text} RETURNING {column}", True
    return text, False


class PgCursor:
    """The finished statement: rows to iterate or fetch, their columns (``description``, each
    named by its first item as in sqlite3), the id an INSERT generated, and how many rows it
    touched."""

    def __init__(self, rows: list[Any], lastrowid: int | None, rowcount: int,
                 description: Sequence[Sequence[Any]] | None = None) -> None:
        self._rows = rows
        self.lastrowid = lastrowid
        self.rowcount = rowcount
        self.description = description

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return list(self._rows)


class PgConnection:
    """The part of `sqlite3.Connection` the SQLite table groups use, over psycopg 3.

    `reopen` opens a new connection when the last one was lost; `shown` names the database
    in messages (never a password); `pinned` (set by the store's transaction) forbids it."""

    def __init__(self, conn: psycopg.Connection[Any], *,
                 reopen: Callable[[], psycopg.Connection[Any]] | None = None,
                 shown: str = "") -> None:
        self._raw = conn
        self._reopen = reopen
        self.shown = shown
        self.pinned = False
        with self.guard():  # a restart between connect and this read is StateUnavailable
            self.catalog = Catalog.read(conn)

    @property
    def raw(self) -> psycopg.Connection[Any]:
        """The live connection: a new one when the last was lost, outside a transaction
        (TemporaryError when the database cannot be reached yet)."""
        if (self._raw.closed or self._raw.broken) and self._reopen is not None \
                and not self.pinned:
            self._raw.close()
            self._raw = self._reopen()
        return self._raw

    @contextlib.contextmanager
    def guard(self) -> Iterator[None]:
        """psycopg's errors of a lost or unusable connection as TemporaryError."""
        try:
            yield
        except psycopg.OperationalError as exc:
            raise StateUnavailable(f"state {self.shown}: {scrub(str(exc)).strip()}") from None

    def refresh_catalog(self) -> None:
        """Re-read keys and identity columns (after a migration created tables)."""
        self.catalog = Catalog.read(self.raw)

    def translate(self, sql: str, bound: bool = True) -> tuple[str, bool]:
        """The PostgreSQL text of a SQLite-dialect statement (see the module docstring)."""
        return _translate(sql, bound, tuple(sorted(self.catalog.keys.items())),
                          tuple(sorted(self.catalog.identity.items())))

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        text, returning = self.translate(sql, bool(params))
        with self.guard():
            cur = self.raw.execute(text, list(params) if params else None)
            rows = cur.fetchall() if cur.description is not None else []
        lastrowid = int(rows[0][0]) if returning and rows else None
        return PgCursor([] if returning else rows, lastrowid, cur.rowcount,
                        None if returning else cur.description)

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> None:
        batch = [list(params) for params in seq]
        if not batch:
            return
        text, returning = self.translate(sql)
        if returning:
            text = text.rsplit(" RETURNING ", 1)[0]
        with self.guard(), self.raw.cursor() as cur:
            cur.executemany(text, batch)

    def close(self) -> None:
        self._raw.close()


class PgTable:
    """``db.table(name)``: insert and upsert a row given as a mapping."""

    def __init__(self, conn: PgConnection, name: str) -> None:
        self.conn, self.name = conn, name

    def insert(self, row: Mapping[str, Any]) -> None:
        columns = ", ".join(row)
        self.conn.execute(f"INSERT INTO {self.name} ({columns}) "
                          f"VALUES ({', '.join('?' * len(row))})", list(row.values()))

    def upsert(self, row: Mapping[str, Any], pk: str | tuple[str, ...]) -> None:
        key = self.conn.catalog.keys.get(self.name, (pk,) if isinstance(pk, str) else pk)
        others = [c for c in row if c not in key]
        sets = ", ".join(f'"{c}" = EXCLUDED."{c}"' for c in others)
        with self.conn.guard():
            self.conn.raw.execute(
                f"INSERT INTO {self.name} ({', '.join(row)}) "
                f"VALUES ({', '.join(['%s'] * len(row))}) ON CONFLICT ({', '.join(key)}) "
                + (f"DO UPDATE SET {sets}" if sets else "DO NOTHING"), list(row.values()))


class PgDatabase:
    """The part of `sqlite_utils.Database` the SQLite table groups use."""

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def query(self, sql: str, params: Sequence[Any] | None = None) -> Iterator[dict[str, Any]]:
        text = self.conn.translate(sql, bool(params))[0]
        with self.conn.guard(), self.conn.raw.cursor(row_factory=dict_row) as cur:
            cur.execute(text, list(params) if params else None)
            rows = cur.fetchall()
        return iter(rows)

    def table(self, name: str) -> PgTable:
        return PgTable(self.conn, name)
