"""Is this SQLite file a scoctl state? Checked when a state file is opened, before anything is
written, so that another program's database is never migrated into and a damaged state is
named instead of failing later on a missing table.

The tables a file must hold at schema N are read from the first N migrations' statements
(``CREATE TABLE``, ``DROP TABLE``, ``ALTER TABLE … RENAME TO``), so the check follows the
migrations without a list to keep up to date. Running the migrations on an in-memory database
gives the same set (a test checks every version) but costs ~5 ms, which every hook that records a
verdict would pay; `tables_by_running` is that reference.
"""

from __future__ import annotations

import re
import sqlite3
from functools import cache
from pathlib import Path

from scoctl.errors import StateError
from scoctl.state.migrations import MIGRATIONS


def tables(conn: sqlite3.Connection) -> frozenset[str]:
    """The names of the tables in `conn` (SQLite's own excluded)."""
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                        "AND name NOT LIKE 'sqlite_%'").fetchall()
    return frozenset(str(row[0]) for row in rows)


_TABLE_DDL = re.compile(
    r"\b(?:CREATE\s+TABLE(?:\s+IF\s+NOT\s+EXISTS)?\s+(?P<created>\w+)"
    r"|DROP\s+TABLE(?:\s+IF\s+EXISTS)?\s+(?P<dropped>\w+)"
    r"|ALTER\s+TABLE\s+(?P<old>\w+)\s+RENAME\s+TO\s+(?P<new>\w+))",
    re.IGNORECASE)


@cache
def expected_tables(version: int) -> frozenset[str]:
    """The tables a state file at schema `version` holds, from the migrations' statements."""
    present: set[str] = set()
    for migration in MIGRATIONS[:version]:
        for found in _TABLE_DDL.finditer(migration):
            if found["created"]:
                present.add(found["created"])
            elif found["dropped"]:
                present.discard(found["dropped"])
            else:
                present.discard(found["old"])
                present.add(found["new"])
    return frozenset(present)


def tables_by_running(version: int) -> frozenset[str]:
    """The tables the first `version` migrations leave in an empty in-memory database."""
    from scoctl.state.sqlite import run_migrations  # imported here: sqlite imports this module

    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        run_migrations(conn, MIGRATIONS[:version], 0)
        return tables(conn)
    finally:
        conn.close()


def check_tables(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Raise StateError (exit 2) unless `conn` holds a scoctl state at schema `version`.

    A file at schema 0 must hold no table at all (an empty or new file, which `init` fills);
    a file at schema N must hold every table of schema N, and the missing ones are named.
    """
    try:
        present = tables(conn)
    except sqlite3.DatabaseError as exc:
        raise StateError(f"{path}: not a usable SQLite state file ({exc})") from exc
    if version == 0:
        if present:
            shown = ", ".join(sorted(present)[:5]) + (", …" if len(present) > 5 else "")
            raise StateError(f"{path}: not a scoctl state file (no schema version, but it holds "
                             f"other tables: {shown}); the file was not modified")
        return
    missing = expected_tables(version) - present
    if missing:
        raise StateError(f"{path}: not a complete scoctl state (schema {version}): tables "
                         f"missing: {', '.join(sorted(missing))}; the file was not modified")
