"""The PostgreSQL backend itself: schema and migrations, credentials, transactions, leases and
fencing, against the private cluster of tests/fixtures/postgres.py."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from scoctl.clock import FixedClock
from scoctl.core.model import LaunchRecord
from scoctl.errors import NotLeader, StateError, TemporaryError
from scoctl.services.claims import record_claim
from scoctl.state.migrations import MIGRATIONS
from scoctl.state.postgresql import Fencing, PostgresStore, connect, leases
from scoctl.state.postgresql.dialect import PgConnection
from scoctl.state.postgresql.migrations import PG_MIGRATIONS
from tests.fixtures.postgres import PgState


def open_store(pg: PgState, **kw: object) -> PostgresStore:
    return PostgresStore.open_url(pg.url, password_file=pg.password_file, **kw)  # type: ignore[arg-type]


def raw(pg: PgState) -> psycopg.Connection[object]:
    return connect(pg.url, password_file=pg.password_file)


def dump(pg: PgState) -> list[tuple[object, ...]]:
    """Every table with every row, to compare a database before and after."""
    with raw(pg) as conn:
        tables = [t for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema() ORDER BY table_name")]
        return [(t, conn.execute(f"SELECT * FROM {t}").fetchall()) for t in tables]


def intent(region: str = "region-a", launch_id: str = "l-1") -> LaunchRecord:
    return LaunchRecord(launch_id=launch_id, region=region, workload="web", pool="p",
                        generation=1, count=1, status="intent", created="x", updated="x")


def test_both_backends_have_the_same_numbered_migrations() -> None:
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)


def test_init_brings_an_empty_database_to_the_current_schema(pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store:
        assert store.schema_version() == len(MIGRATIONS)
        assert store.migrated_from == 0
    with open_store(pg_state) as again:
        assert again.migrated_from is None


def test_an_empty_database_is_refused_until_init(pg_state: PgState) -> None:
    with pytest.raises(StateError, match="scoctl init"):
        open_store(pg_state)
    assert dump(pg_state) == []


def test_a_database_from_a_newer_schema_is_refused_and_left_untouched(pg_state: PgState) -> None:
    open_store(pg_state, create=True).close()
    with raw(pg_state) as conn:
        conn.execute("UPDATE scoctl_schema SET version = %s", [len(PG_MIGRATIONS) + 1])
    before = dump(pg_state)
    with pytest.raises(StateError, match="newer scoctl"):
        open_store(pg_state, create=True)
    assert dump(pg_state) == before


def test_an_older_schema_is_migrated_step_by_step(pg_state: PgState) -> None:
    with raw(pg_state) as conn:
        with conn.transaction():
            conn.execute("CREATE TABLE scoctl_schema (only_row INTEGER PRIMARY KEY, "
                         "version INTEGER NOT NULL)")
            conn.execute(PG_MIGRATIONS[0])
            conn.execute("INSERT INTO scoctl_schema VALUES (1, 1)")
    with pytest.raises(StateError, match="older"):
        open_store(pg_state, migrate=False)
    with open_store(pg_state) as store:
        assert (store.migrated_from, store.schema_version()) == (1, len(PG_MIGRATIONS))
        store.mark_dirty(["web"], "grown")  # a table of step 2
        assert store.dirty() == {"web": "grown"}


def test_a_password_in_the_url_is_refused_without_showing_it(pg_state: PgState) -> None:
    url = pg_state.url.replace("scoctl@", "scoctl:hunter2@")
    with pytest.raises(StateError, match="PGPASSFILE") as err:
        PostgresStore.open_url(url)
    assert "hunter2" not in str(err.value)


def test_the_password_comes_from_pgpassfile(pg_state: PgState, tmp_path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGPASSFILE", str(pg_state.cluster.pgpass(tmp_path)))
    with PostgresStore.open_url(pg_state.url, create=True) as store:
        assert store.schema_version() == len(MIGRATIONS)


def test_a_wrong_password_is_a_temporary_error_that_never_shows_it(pg_state: PgState,
                                                                   tmp_path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    wrong.chmod(0o600)  # a file libpq would read: the password, not the mode, is wrong
    with pytest.raises(TemporaryError, match="cannot connect") as err:
        PostgresStore.open_url(pg_state.url, password_file=wrong)
    assert "not-the-password" not in str(err.value)


def test_sqlite_only_statements_are_refused_with_a_clear_message(pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store:
        with pytest.raises(ValueError, match="SQLite-only"):
            store.conn.execute("PRAGMA journal_mode")


def test_readers_are_not_blocked_by_a_writer(pg_state: PgState) -> None:
    writer = open_store(pg_state, create=True)
    reader = open_store(pg_state)
    with writer.transaction():
        writer.ensure_workload("a", kind="job", source="slurm", contract="T1")
        assert reader.workloads() == []
    assert [w.slug for w in reader.workloads()] == ["a"]
    writer.close()
    reader.close()


def test_writers_from_two_connections_queue_behind_the_write_lock(pg_state: PgState) -> None:
    first = open_store(pg_state, create=True)
    second = open_store(pg_state)
    order: list[str] = []

    def later() -> None:
        with second.transaction():
            order.append("second")

    with first.transaction():
        record_claim(first, "a", contract="T1", requests={"cpu": 1}, largest_pod={"cpu": 1},
                        pods=1, source="k8s")
        thread = threading.Thread(target=later)
        thread.start()
        time.sleep(0.3)
        order.append("first")
    thread.join(timeout=10)
    assert order == ["first", "second"]
    first.close()
    second.close()


# -- leases and fencing --------------------------------------------------------------------------

def test_the_first_runner_takes_the_lease_and_a_second_follows(pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store, raw(pg_state) as a, raw(pg_state) as b:
        first = leases.take(a, "region-a", "host-a:1", None, 15)
        second = leases.take(b, "region-a", "host-b:2", None, 15)
        assert (first.outcome, second.outcome) == ("taken", "held")
        assert second.lease.holder == "host-a:1"
        renewed = leases.take(a, "region-a", "host-a:1", first.lease.generation, 15)
        assert renewed.outcome == "renewed"
        [lease] = store.leases()
        assert (lease.region, lease.holder, lease.generation) == ("region-a", "host-a:1", 1)
        elected = [e for e in store.events() if e.token == "LEADER_ELECTED"]
        assert [e.detail for e in elected] == [
            {"region": "region-a", "holder": "host-a:1", "generation": 1, "previous": None}]


def test_an_expired_lease_is_taken_over_in_a_new_term(pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store, raw(pg_state) as a, raw(pg_state) as b:
        leases.take(a, "region-a", "host-a:1", None, 0.2)
        time.sleep(0.3)
        taken = leases.take(b, "region-a", "host-b:2", None, 15)
        assert (taken.outcome, taken.lease.generation) == ("taken", 2)
        lost = leases.take(a, "region-a", "host-a:1", 1, 15)
        assert lost.outcome == "lost"
        assert [e.detail["previous"] for e in store.events()
                if e.token == "LEADER_ELECTED"] == [None, "host-a:1"]


def test_a_released_lease_is_taken_at_once(pg_state: PgState) -> None:
    with open_store(pg_state, create=True), raw(pg_state) as a, raw(pg_state) as b:
        term = leases.take(a, "region-a", "host-a:1", None, 15).lease.generation
        assert leases.give_up(a, "region-a", "host-a:1", term)
        assert not leases.give_up(a, "region-a", "host-a:1", term)
        assert leases.take(b, "region-a", "host-b:2", None, 15).outcome == "taken"


def test_a_deposed_leaders_launch_intent_is_refused_and_nothing_is_written(
        pg_state: PgState) -> None:
    with open_store(pg_state, create=True, clock=FixedClock()) as store, \
            raw(pg_state) as other:
        own = leases.take(store.pg.raw, "region-a", "host-a:1", None, 0.3)
        store.fencing = Fencing("host-a:1", {"region-a": own.lease.generation})
        store.add_launch(intent(launch_id="l-1"))
        time.sleep(0.4)
        leases.take(other, "region-a", "host-b:2", None, 15)
        with pytest.raises(NotLeader, match="host-b:2"):
            store.add_launch(intent(launch_id="l-2"))
        with pytest.raises(NotLeader, match="host-b:2"):
            store.record_delete("region-a", "server-1")
        assert [launch.launch_id for launch in store.launches()] == ["l-1"]


def test_a_runner_without_a_term_in_the_region_cannot_record_an_intent(
        pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store:
        store.fencing = Fencing("host-a:1")
        with pytest.raises(NotLeader, match="nobody"):
            store.add_launch(intent())
        assert store.launches() == []


def test_the_fence_check_holds_a_take_over_until_the_fenced_write_commits(
        pg_state: PgState) -> None:
    """A take-over cannot slip between a fenced write's check and its commit."""
    with open_store(pg_state, create=True) as store, raw(pg_state) as other:
        own = leases.take(store.pg.raw, "region-a", "host-a:1", None, 0.2)
        store.fencing = Fencing("host-a:1", {"region-a": own.lease.generation})
        outcome: list[str] = []

        def take_over() -> None:
            outcome.append(leases.take(other, "region-a", "host-b:2", None, 15).outcome)

        with store.transaction():
            store.add_launch(intent())
            time.sleep(0.3)  # the lease expires while the write is in flight
            thread = threading.Thread(target=take_over)
            thread.start()
            time.sleep(0.2)
            assert outcome == []  # waiting for the fenced write's row lock
        thread.join(timeout=10)
        assert outcome == ["taken"]
        assert [launch.launch_id for launch in store.launches()] == ["l-1"]


def test_the_shared_budget_grants_at_most_rate_calls_per_window(pg_state: PgState) -> None:
    with open_store(pg_state, create=True), raw(pg_state) as conn:
        granted = [leases.spend_token(conn, "region-a", 3, 1.0) for _ in range(4)]
        assert [wait == 0.0 for _, wait in granted] == [True, True, True, False]
        assert 0 < granted[3][1] <= 1.0
        assert leases.tokens_free(conn, "region-a", 3, 1.0) == 0
        assert leases.tokens_free(conn, "region-b", 3, 1.0) == 3


def test_the_dialect_translates_upserts_on_the_tables_primary_key(pg_state: PgState) -> None:
    with open_store(pg_state, create=True) as store:
        assert isinstance(store.pg, PgConnection)
        text, returning = store.pg.translate(
            "INSERT OR REPLACE INTO exclusions (pool, reason, until) VALUES (?, ?, ?)")
        assert text == ('INSERT INTO exclusions (pool, reason, until) VALUES (%s, %s, %s) '
                        'ON CONFLICT (pool) DO UPDATE SET "reason" = EXCLUDED."reason", '
                        '"until" = EXCLUDED."until"')
        assert not returning
        text, returning = store.pg.translate(
            "INSERT INTO plan_generations (created, ranking, changed, full) VALUES (?, ?, ?, ?)")
        assert '"full"' in text and text.endswith("RETURNING generation") and returning


def test_a_shared_budget_call_stamped_in_the_future_waits_one_window_at_most(
        pg_state: PgState) -> None:
    """Issue 49 item 12: the database's clock stepped back an hour after a burst (its calls
    are stamped an hour ahead): before, the next call was told to wait 3,601 s. A call from the
    future started now: the wait is one window at most, and the calls then expire."""
    with open_store(pg_state, create=True), raw(pg_state) as conn:
        conn.execute("INSERT INTO budget_calls (region, at) SELECT 'region-c', "
                     "extract(epoch FROM clock_timestamp())::float8 + 3600 FROM "
                     "generate_series(1, 3)")
        _, wait = leases.spend_token(conn, "region-c", 3, 1.0)
        assert 0 < wait <= 1.0
        time.sleep(wait + 0.05)
        granted, wait = leases.spend_token(conn, "region-c", 3, 1.0)
        assert wait == 0.0 and granted > 0
