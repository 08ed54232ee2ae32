"""Issue 17 item 8 (the state part): readers never write, and `init` refuses a state whose
tables are missing, naming them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from scoctl.state import SCHEMA_VERSION, open_store
from scoctl.state.checks import expected_tables, tables_by_running


@pytest.mark.parametrize("reader", [["status"], ["status", "--json"], ["events"]])
def test_a_reader_on_a_zero_length_state_file_writes_nothing(cli, tmp_path, reader):
    path = tmp_path / "s.db"
    path.touch()
    result = cli("-q", "--state", str(path), *reader)
    assert result.code == 2, result.stderr
    assert str(path) in result.stderr and "scoctl init" in result.stderr
    assert path.stat().st_size == 0  # no schema created, not even the WAL header
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.db"]


def test_a_reader_leaves_an_older_schema_for_init_to_migrate(cli, tmp_path):
    path = tmp_path / "s.db"
    sqlite3.connect(path).close()  # schema 0: an empty SQLite file
    before = path.read_bytes()
    result = cli("-q", "--state", str(path), "status")
    assert result.code == 2 and "run `scoctl init`" in result.stderr
    assert path.read_bytes() == before
    assert cli("-q", "--state", str(path), "init").code == 0
    assert cli("-q", "--state", str(path), "status", "--json").code == 0


def _drop(path: Path, *names: str) -> None:
    conn = sqlite3.connect(path)
    for name in names:
        conn.execute(f"DROP TABLE {name}")
    conn.commit()
    conn.close()


def test_init_refuses_a_state_whose_tables_are_missing_naming_them(cli, tmp_path):
    path = tmp_path / "s.db"
    open_store(path, create=True).close()
    _drop(path, "instances", "launches")
    before = path.read_bytes()
    for args in (["init"], ["status"], ["plan"]):
        result = cli("-q", "--state", str(path), *args)
        assert result.code == 2, (args, result.stderr)
        assert f"schema {SCHEMA_VERSION}" in result.stderr
        assert "tables missing: instances, launches" in result.stderr
        assert "Traceback" not in result.stderr
    assert path.read_bytes() == before


def test_the_expected_tables_follow_the_migrations(tmp_path):
    store = open_store(tmp_path / "s.db", create=True)
    try:
        present = {r[0] for r in store.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")}
    finally:
        store.close()
    assert expected_tables(SCHEMA_VERSION) == present
    assert expected_tables(0) == frozenset()


def test_the_statement_scan_gives_the_tables_running_the_migrations_leaves():
    # the open-time check reads the migrations' statements (no ~5 ms in-memory run per hook):
    # it must agree with running them, at every schema version
    for version in range(SCHEMA_VERSION + 1):
        assert expected_tables(version) == tables_by_running(version), version
