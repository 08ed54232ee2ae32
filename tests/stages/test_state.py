"""The state file: schema, one active row per slug, append-only events, generations."""

from __future__ import annotations

import os
import sqlite3
import stat

import pytest

from scoctl.core.model import NewEvent, PlanUnitRecord, PlanWorkloadRecord
from scoctl.errors import StateError
from scoctl.services.claims import record_claim
from scoctl.services.tokens import record_token
from scoctl.state import SCHEMA_VERSION, open_store
from scoctl.state.migrations import MIGRATIONS
from scoctl.state.sqlite import run_migrations


def test_new_state_file_is_private_wal_and_at_the_current_schema(tmp_path):
    path = tmp_path / "s.db"
    with open_store(path, create=True) as store:
        assert store.schema_version() == SCHEMA_VERSION
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_missing_state_file_is_an_error_unless_created(tmp_path):
    with pytest.raises(StateError, match="scoctl init"):
        open_store(tmp_path / "missing.db")


def test_a_state_file_from_a_newer_schema_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "s.db"
    open_store(path, create=True).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StateError, match="newer scoctl"):
        open_store(path)
    assert path.read_bytes() == before


def test_a_second_active_row_for_a_slug_is_refused(store, probe):
    store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    with pytest.raises(probe.integrity_error):
        store.conn.execute(
            "INSERT INTO workloads (slug, kind, source, contract, status, created, updated) "
            "VALUES ('orders', 'deployment', 'k8s', 'T1', 'queued', 'x', 'x')")


def test_ensure_workload_reuses_the_active_row_and_a_resubmission_is_a_new_row(store):
    first = store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    again = store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    assert again.id == first.id
    record_token(store, "orders", "POD_SCHEDULING_FAILED")
    assert store.active_workload("orders") is None
    fresh = store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    assert fresh.id != first.id and fresh.status == "pending"


def test_a_failed_row_stays_failed_after_a_late_pod_queued(store):
    store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    record_token(store, "orders", "POD_QUOTA_EXCEEDED_FAILED")
    row, outcome = record_token(store, "orders", "POD_QUEUED")
    assert row is not None and row.status == "failed"
    assert outcome is not None and not outcome.changed
    tokens = [e.token for e in store.events(workload="orders")]
    assert tokens == ["POD_QUOTA_EXCEEDED_FAILED", "POD_QUEUED"]


def test_slurm_job_queued_is_logged_once_per_distinct_reason(store):
    store.ensure_workload("train", kind="job", source="slurm", contract="T1")
    for reason in ["Resources", "Resources", "Priority", "Priority", "Resources"]:
        record_token(store, "train", "SLURM_JOB_QUEUED", {"reason": reason})
    reasons = [e.detail["reason"] for e in store.events(workload="train")]
    assert reasons == ["Resources", "Priority", "Resources"]


def test_events_are_append_only(store, probe):
    store.append_event(NewEvent("w", "NOTE", "info", {}))
    with pytest.raises(probe.database_error, match="append-only"):
        store.conn.execute("UPDATE events SET token = 'X'")
    with pytest.raises(probe.database_error, match="append-only"):
        store.conn.execute("DELETE FROM events")


def test_secrets_in_event_detail_never_reach_the_state(store):
    store.append_event(NewEvent("w", "NOTE", "info", {"join_token": "s3cr3t", "node": "n1"}))
    raw = store.conn.execute("SELECT detail FROM events").fetchone()[0]
    assert "s3cr3t" not in raw and "n1" in raw


def test_a_claim_gets_a_new_version_only_when_its_demand_changes(store):
    demand = {"cpu": 168000, "memory": 672 * 2**30}
    pod = {"cpu": 4000, "memory": 16 * 2**30}
    c1, changed1 = record_claim(store, "orders", contract="T1", requests=demand, largest_pod=pod,
                                   pods=42, source="k8s")
    c2, changed2 = record_claim(store, "orders", contract="T1", requests=dict(demand),
                                   largest_pod=dict(pod), pods=42, source="k8s")
    c3, changed3 = record_claim(store, "orders", contract="T1",
                                   requests={**demand, "cpu": 172000}, largest_pod=pod,
                                   pods=43, source="k8s")
    assert (c1.version, changed1) == (1, True)
    assert (c2.version, changed2) == (1, False)
    assert (c3.version, changed3) == (2, True)


def test_a_claims_zone_spread_and_daemonset_overhead_are_stored_and_a_change_is_a_new_version(
        store):
    demand, pod = {"cpu": 12000}, {"cpu": 4000}
    c1, _ = record_claim(store, "web", contract="T1", requests=demand, largest_pod=pod,
                         pods=3, source="k8s", zone_spread=1)
    assert store.claim("web").zone_spread == 1
    assert [c.zone_spread for c in store.claims()] == [1]
    c2, changed = record_claim(store, "web", contract="T1", requests=demand, largest_pod=pod,
                               pods=3, source="k8s")
    assert changed and c2.version == c1.version + 1 and store.claim("web").zone_spread == 0
    overhead = {"c4.xlarge": {"cpu": 300, "memory": 2**30}}
    c3, changed = record_claim(store, "web", contract="T1", requests=demand, largest_pod=pod,
                               pods=3, source="k8s", overhead=overhead)
    assert changed and c3.version == c2.version + 1
    assert store.claim("web").overhead == overhead
    assert [c.overhead for c in store.claims()] == [overhead]


def _plan(workload, units):
    return PlanWorkloadRecord(
        workload=workload, generation=0, claim_version=1, contract="T1", ranking="r-1",
        feasible=True, degraded=False, reasons=(),
        pools=(PlanUnitRecord("p1", "reclaimable", "g1", units, 1.0, 0.9),))


def test_plan_generations_are_monotonic_and_rewrite_only_changed_workloads(store):
    g1 = store.commit_plan(ranking="r-1", plans=[_plan("a", 1), _plan("b", 2)], full=True)
    g2 = store.commit_plan(ranking="r-1", plans=[_plan("a", 3)], full=False)
    assert g2 > g1
    plans = store.plans()
    assert plans["a"].generation == g2 and plans["a"].pools[0].units == 3
    assert plans["b"].generation == g1 and plans["b"].pools[0].units == 2
    assert store.latest_generation().changed == ("a",)


def test_a_stage_transaction_rolls_back_whole_on_a_crash(store):
    with pytest.raises(RuntimeError), store.transaction():
        store.commit_plan(ranking="r-1", plans=[_plan("a", 1)], full=True)
        record_claim(store, "a", contract="T1", requests={"cpu": 1000}, largest_pod={"cpu": 1000},
                        pods=1, source="k8s")
        raise RuntimeError("crash mid-stage")
    assert store.latest_generation() is None and store.claims() == []


def test_readers_are_not_blocked_by_a_writer(tmp_path):
    path = tmp_path / "s.db"
    writer = open_store(path, create=True)
    reader = open_store(path)
    with writer.transaction():
        writer.ensure_workload("a", kind="job", source="slurm", contract="T1")
        assert reader.workloads() == []  # WAL: the reader sees the last commit, at once
    assert [w.slug for w in reader.workloads()] == ["a"]
    writer.close()
    reader.close()


def test_the_state_file_waits_for_a_busy_writer_instead_of_failing_at_once(probe):
    assert probe.lock_wait_ms() == 30_000


# --- migrations -------------------------------------------------------------------------------

# The next schema as a future scoctl would add it: a column on an existing table and a new table.
NEXT = """
ALTER TABLE workloads ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
CREATE TABLE budgets (region TEXT PRIMARY KEY, spent INTEGER NOT NULL);
CREATE TRIGGER budgets_no_delete BEFORE DELETE ON budgets
    BEGIN SELECT RAISE(ABORT, 'keep budgets'); END;
"""


def schema_1_file(path):
    """A state file as the first schema wrote it: one workload and one event."""
    conn = sqlite3.connect(path, isolation_level=None)
    assert run_migrations(conn, MIGRATIONS[:1], current=0) == 1
    conn.execute("INSERT INTO workloads (slug, kind, source, contract, status, created, updated) "
                 "VALUES ('orders', 'deployment', 'k8s', 'T1', 'pending', 'x', 'x')")
    conn.execute("INSERT INTO events (ts, workload, token, level, status, detail) "
                 "VALUES ('x', 'orders', 'POD_QUEUED', 'warning', 'queued', '{}')")
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    return conn


def test_a_schema_1_file_is_migrated_forward_keeping_its_rows(tmp_path):
    conn = schema_1_file(tmp_path / "s.db")

    version = run_migrations(conn, (*MIGRATIONS, NEXT), current=1)

    assert version == SCHEMA_VERSION + 1 == conn.execute("PRAGMA user_version").fetchone()[0]
    assert conn.execute("SELECT slug, priority FROM workloads").fetchall() == [("orders", 0)]
    assert conn.execute("SELECT token FROM events").fetchall() == [("POD_QUEUED",)]
    conn.execute("INSERT INTO budgets VALUES ('r', 1)")
    with pytest.raises(sqlite3.DatabaseError, match="keep budgets"):
        conn.execute("DELETE FROM budgets")
    assert run_migrations(conn, (*MIGRATIONS, NEXT),  # nothing left to do
                          current=SCHEMA_VERSION + 1) == SCHEMA_VERSION + 1
    conn.close()


def test_a_failing_migration_leaves_the_file_at_its_previous_version(tmp_path):
    conn = schema_1_file(tmp_path / "s.db")
    broken = "ALTER TABLE workloads ADD COLUMN extra TEXT;\nCREATE TABLE workloads (x);\n"

    with pytest.raises(sqlite3.OperationalError):
        run_migrations(conn, (*MIGRATIONS[:1], broken), current=1)

    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    columns = [row[1] for row in conn.execute("PRAGMA table_info(workloads)")]
    assert "extra" not in columns
    conn.close()


def test_a_migration_another_process_applied_meanwhile_is_skipped(tmp_path):
    conn = schema_1_file(tmp_path / "s.db")
    other = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    assert run_migrations(other, (*MIGRATIONS, NEXT), current=1) == SCHEMA_VERSION + 1
    other.close()

    # this process read version 1 before the other one migrated: it must not re-apply NEXT
    assert run_migrations(conn, (*MIGRATIONS, NEXT), current=1) == SCHEMA_VERSION + 1
    conn.close()


def test_an_older_file_is_migrated_on_open_and_refused_without_migrate(tmp_path):
    path = tmp_path / "s.db"
    sqlite3.connect(path).close()  # an empty SQLite file: schema 0
    with pytest.raises(StateError, match="scoctl init"):
        open_store(path, migrate=False)
    with open_store(path) as s:
        assert s.schema_version() == SCHEMA_VERSION
        assert s.workloads() == []
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_state_path_that_cannot_be_created_is_a_state_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(StateError, match="cannot create the state file"):
        open_store(blocker / "s.db", create=True)


def test_event_times_are_stored_in_one_utc_form_so_since_compares_as_text(store):
    store.append_event(NewEvent("w", "A", "info", {}, ts="2026-01-01T01:30:00+01:00"))
    store.append_event(NewEvent("w", "B", "info", {}, ts="2026-01-01T00:45:00Z"))
    store.append_event(NewEvent("w", "C", "info", {}, ts="not a time"))  # becomes the store's now
    events = store.events()
    assert [e.ts for e in events] == ["2026-01-01T00:30:00.000000Z",
                                      "2026-01-01T00:45:00.000000Z", store.now()]
    assert [e.token for e in store.events(since="2026-01-01T00:40:00.000000Z")] == ["B"]
