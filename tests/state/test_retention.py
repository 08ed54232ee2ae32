"""Pruning in the SQLite state (migration 3): events stay append-only for every recent row and
for every path but `prune_events`; ended instances and settled launches go oldest first, in
bounded batches; nothing live or in flight ever goes."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.clock import FixedClock, rfc3339
from scoctl.core.model import InstanceRecord, LaunchRecord, NewEvent
from scoctl.state import SCHEMA_VERSION, open_store
from scoctl.state.migrations import MIGRATIONS
from scoctl.state.sqlite import SqliteStore, run_migrations
from tests.fixtures.state import StateProbe

DAY = 86400


def at(clock: FixedClock, days_ago: float) -> str:
    return rfc3339(clock.now() - timedelta(days=days_ago))


def add_events(store: SqliteStore, clock: FixedClock, *days_ago: float) -> None:
    for age in days_ago:
        store.append_event(NewEvent("w", f"AGE_{age:g}", "info", {}, ts=at(clock, age)))


def tokens(store: SqliteStore) -> list[str]:
    return [e.token for e in store.events()]


def test_prune_events_takes_the_oldest_past_the_cutoff_at_most_a_batch(
        store: SqliteStore, clock: FixedClock) -> None:
    add_events(store, clock, 40, 35, 31, 29, 0)
    cutoff = at(clock, 30)

    assert store.prune_events(cutoff, limit=2) == 2
    assert tokens(store) == ["AGE_31", "AGE_29", "AGE_0"]
    assert store.prune_events(cutoff, limit=2) == 1
    assert store.prune_events(cutoff, limit=2) == 0
    assert tokens(store) == ["AGE_29", "AGE_0"]


def test_no_event_within_a_day_of_the_newest_is_ever_pruned(
        store: SqliteStore, clock: FixedClock) -> None:
    add_events(store, clock, 3, 1.5, 0.9, 0.5, 0)

    assert store.prune_events(rfc3339(clock.now() + timedelta(days=1)), limit=100) == 2
    assert tokens(store) == ["AGE_0.9", "AGE_0.5", "AGE_0"]


def test_events_stay_append_only_outside_the_pruning_path(
        store: SqliteStore, clock: FixedClock, probe: StateProbe) -> None:
    add_events(store, clock, 90, 0)
    for sql in ("DELETE FROM events", "DELETE FROM events WHERE token = 'AGE_90'",
                "UPDATE events SET token = 'X' WHERE token = 'AGE_90'",
                "UPDATE events SET detail = '{}'"):
        with pytest.raises(probe.database_error, match="append-only"):
            store.conn.execute(sql)
    # the pruning path is closed again once `prune_events` is done
    store.prune_events(at(clock, 100), limit=10)
    with pytest.raises(probe.database_error, match="append-only"):
        store.conn.execute("DELETE FROM events WHERE token = 'AGE_90'")
    assert store.conn.execute("SELECT COUNT(*) FROM events_prune").fetchone()[0] == 0
    # even with a cutoff named, a recent event cannot be deleted nor any event changed
    store.conn.execute("INSERT INTO events_prune (only_row, before) VALUES (1, ?)",
                       [rfc3339(clock.now() + timedelta(days=9))])
    with pytest.raises(probe.database_error, match="append-only"):
        store.conn.execute("DELETE FROM events WHERE token = 'AGE_0'")
    with pytest.raises(probe.database_error, match="append-only"):
        store.conn.execute("UPDATE events SET token = 'X' WHERE token = 'AGE_90'")
    assert tokens(store) == ["AGE_90", "AGE_0"]


def instance(iid: str, status: str, updated: str) -> InstanceRecord:
    return InstanceRecord(id=iid, name=iid, region="r", workload="w", pool="p", generation=1,
                          launch_id="l-1", status=status, created=updated, updated=updated)


def launch(lid: str, status: str, updated: str) -> LaunchRecord:
    return LaunchRecord(launch_id=lid, region="r", workload="w", pool="p", generation=1,
                        count=1, status=status, created=updated, updated=updated)


def test_only_ended_instances_and_settled_launches_past_the_cutoff_are_pruned(
        store: SqliteStore, clock: FixedClock) -> None:
    for iid, status, age in (("gone-old", "deleted", 9), ("gone-older", "deleted", 12),
                             ("gone-new", "deleted", 2), ("ready-old", "ready", 30),
                             ("error-old", "error", 30), ("draining-old", "draining", 30)):
        store.upsert_instance(instance(iid, status, at(clock, age)))
    for lid, status, age in (("l-rec", "recorded", 9), ("l-fail", "failed", 8),
                             ("l-new", "recorded", 1), ("l-intent", "intent", 30),
                             ("l-called", "called", 30)):
        store.add_launch(launch(lid, status, at(clock, age)))
    cutoff = at(clock, 7)

    assert store.prune_instances(("deleted",), cutoff, limit=1) == 1
    assert store.instance("gone-older") is None and store.instance("gone-old") is not None
    assert store.prune_instances(("deleted",), cutoff, limit=10) == 1
    assert sorted(i.id for i in store.instances(include_deleted=True)) == [
        "draining-old", "error-old", "gone-new", "ready-old"]
    assert store.prune_launches(("recorded", "failed"), cutoff, limit=10) == 2
    assert [x.launch_id for x in store.launches()] == ["l-called", "l-intent", "l-new"]
    assert store.prune_instances((), cutoff, limit=10) == 0


def test_migration_3_lets_a_schema_2_files_old_events_be_pruned_and_nothing_else(
        tmp_path: Path, clock: FixedClock) -> None:
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path, isolation_level=None)
    assert run_migrations(conn, MIGRATIONS[:2], current=0) == 2
    conn.executemany("INSERT INTO events (ts, workload, token, level) VALUES (?, 'w', ?, 'info')",
                     [(at(clock, 60), "OLD"), (at(clock, 0), "NEW")])
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):  # schema 2: never
        conn.execute("DELETE FROM events WHERE token = 'OLD'")
    conn.close()

    with open_store(path, clock=clock) as store:
        assert store.schema_version() == SCHEMA_VERSION >= 3 and store.migrated_from == 2
        with pytest.raises(sqlite3.DatabaseError, match="append-only"):
            store.conn.execute("DELETE FROM events WHERE token = 'OLD'")
        assert store.prune_events(at(clock, 30), limit=10) == 1
        assert [e.token for e in store.events()] == ["NEW"]
