"""Migration 2 on a state file written by schema 1: every value kept as JSON under a `kv` key
arrives in its typed table, and `kv` is gone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.clock import FixedClock
from scoctl.core.model import MetricCounters, RankingCache
from scoctl.errors import StateError
from scoctl.state import SCHEMA_VERSION, Store, open_store
from scoctl.state.migrations import MIGRATIONS
from scoctl.state.sqlite import SqliteStore, run_migrations

URL = "http://127.0.0.1:9/ranking.json"
# What scoctl's schema 1 kept in `kv`, as its code wrote it: every key it ever used.
SCHEMA_1_KV: dict[str, Any] = {
    "plan:dirty": {"orders-daily": "units lost", "train-7": "pool c4.az1 excluded"},
    "ranking:last_scores": {"c4.xlarge.az1.spot": 0.91, "c4.xlarge.az2.spot": 1},
    "ranking:last_good": {"url": URL, "id": "r-8812", "fetched": "2026-01-01T00:00:00.000000Z",
                          "scores": {"c4.xlarge.az1.spot": 0.875}},
    "reconcile:orphans_seen": {"region-a": {"srv-1": "2026-01-01T00:00:00.000000Z",
                                            "srv-2": "2026-01-01T00:05:00.000000Z"},
                               "region-b": {"srv-9": "2026-01-02T00:00:00.000000Z"}},
    "slurm:suspended": ["cloud-1", "cloud-3"],
    "slurm:node_shapes": {"cloud-1": {"cpu": 16000, "memory": 68719476736, "nvidia.com/gpu": 4},
                          "cloud-3": {"cpu": 4000, "memory": 17179869184}},
    "metrics:cloud_calls": {"region-a\x1fok": 41, "region-a\x1fquota": 2, "region-b\x1fok": 5},
    "metrics:tokens_spent": {"region-a": 43, "region-b": 5},
    "run:last_success": 1767225600.25,
}


def _dumps(value: Any) -> str:  # schema 1's encoding of a kv value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def schema_1_state(conn: sqlite3.Connection, kv: dict[str, Any]) -> None:
    """Build the first schema with `kv` rows and one row in the tables that stay."""
    assert run_migrations(conn, MIGRATIONS[:1], current=0) == 1
    conn.executemany("INSERT INTO kv (key, value) VALUES (?, ?)",
                     [(key, _dumps(value)) for key, value in kv.items()])
    conn.execute("INSERT INTO exclusions (pool, reason, until) "
                 "VALUES ('c4.xlarge.az2.spot', 'NoValidHost', '2030-01-01T00:00:00.000000Z')")


def assert_carried(store: Store) -> None:
    assert store.dirty() == SCHEMA_1_KV["plan:dirty"]
    assert store.last_scores() == {"c4.xlarge.az1.spot": 0.91, "c4.xlarge.az2.spot": 1.0}
    assert store.last_good_ranking() == RankingCache(
        url=URL, id="r-8812", fetched="2026-01-01T00:00:00.000000Z",
        scores={"c4.xlarge.az1.spot": 0.875})
    assert store.orphans_seen("region-a") == SCHEMA_1_KV["reconcile:orphans_seen"]["region-a"]
    assert store.orphans_seen("region-b") == SCHEMA_1_KV["reconcile:orphans_seen"]["region-b"]
    assert store.suspended_nodes() == frozenset({"cloud-1", "cloud-3"})
    assert store.node_shapes() == SCHEMA_1_KV["slurm:node_shapes"]
    assert store.metric_counters() == MetricCounters(
        cloud_calls={("region-a", "ok"): 41, ("region-a", "quota"): 2, ("region-b", "ok"): 5},
        tokens_spent={"region-a": 43, "region-b": 5}, last_success=1767225600.25)


def test_opening_a_schema_1_file_carries_every_kv_value_into_its_table_and_drops_kv(tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema_1_state(conn, SCHEMA_1_KV)
    conn.close()

    with open_store(path) as store:
        assert (store.migrated_from, store.schema_version()) == (1, SCHEMA_VERSION)
        assert_carried(store)
        assert [e.pool for e in store.exclusions(now="2026-01-01T00:00:00Z")] == [
            "c4.xlarge.az2.spot"]
        tables = {n for (n,) in store.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "kv" not in tables


def test_scoctl_init_migrates_a_schema_1_file_and_says_from_which_schema(cli, tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema_1_state(conn, SCHEMA_1_KV)
    conn.close()

    result = cli("-q", "--state", str(path), "init", "--json")

    assert result.code == 0, result.stderr
    body = result.json()
    assert isinstance(body, dict)
    assert (body["migrated_from"], body["schema_version"]) == (1, SCHEMA_VERSION)
    with open_store(path, migrate=False) as store:
        assert_carried(store)


def test_a_crash_inside_migration_2_leaves_schema_1_and_its_kv_rows(tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema_1_state(conn, SCHEMA_1_KV)
    # a table the migration is about to create makes its CREATE fail half-way through
    conn.execute("CREATE TABLE slurm_suspended (node TEXT)")

    with pytest.raises(sqlite3.OperationalError, match="slurm_suspended"):
        run_migrations(conn, MIGRATIONS, current=1)

    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    kept = dict(conn.execute("SELECT key, value FROM kv"))
    assert {k: json.loads(v) for k, v in kept.items()} == SCHEMA_1_KV
    tables = {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "plan_dirty" not in tables
    conn.close()


def test_a_kv_value_of_a_shape_scoctl_never_wrote_is_left_behind_not_fatal(tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema_1_state(conn, {"plan:dirty": ["not", "a", "mapping"], "slurm:suspended": "cloud-1",
                          "ranking:last_good": {"url": URL}, "run:last_success": "yesterday",
                          "metrics:cloud_calls": {"no-separator": 3, "r\x1fok": 1}})
    conn.close()

    with open_store(path) as store:
        assert store.dirty() == {} and store.suspended_nodes() == frozenset()
        assert store.last_good_ranking() is None
        assert store.metric_counters() == MetricCounters(cloud_calls={("r", "ok"): 1})


def test_a_newer_schema_is_still_refused_after_migration_2_and_left_byte_identical(tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    schema_1_state(conn, SCHEMA_1_KV)
    assert run_migrations(conn, MIGRATIONS, current=1) == SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="newer scoctl"):
        open_store(path)
    assert path.read_bytes() == before


# Any text but NUL (SQLite's JSON functions stop at it; no slug, pool, node or region holds one)
names = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=12)
regions = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\x1f"),
                  min_size=1, max_size=8)
amounts = st.integers(min_value=0, max_value=2**62)


@settings(max_examples=40)
@given(dirty=st.dictionaries(names, names, max_size=4),
       scores=st.dictionaries(names, st.floats(0, 1), max_size=4),
       suspended=st.lists(names, max_size=4, unique=True),
       shapes=st.dictionaries(names, st.dictionaries(names, amounts, min_size=1, max_size=3),
                              max_size=3),
       calls=st.dictionaries(st.tuples(regions, names), amounts, max_size=4))
def test_any_schema_1_values_arrive_exactly(dirty, scores, suspended, shapes, calls):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    schema_1_state(conn, {"plan:dirty": dirty, "ranking:last_scores": scores,
                          "slurm:suspended": suspended, "slurm:node_shapes": shapes,
                          "metrics:cloud_calls": {"\x1f".join(k): n for k, n in calls.items()}})
    assert run_migrations(conn, MIGRATIONS, current=1) == SCHEMA_VERSION
    store = SqliteStore(conn, Path(":memory:"), FixedClock())
    assert store.dirty() == dirty
    assert store.last_scores() == scores
    assert store.suspended_nodes() == frozenset(suspended)
    assert store.node_shapes() == shapes
    assert store.metric_counters().cloud_calls == calls
    conn.close()
