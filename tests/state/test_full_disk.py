"""A full disk under the SQLite state is a state outage (issue 49 item 11), as a lost
PostgreSQL connection is: `StateUnavailable` (exit 1; the controller's passes wait and retry),
the transaction rolled back — a failed statement or a failed COMMIT alike —, nothing
half-written, the store usable again once there is room; and the write-ahead log stays small
enough for a 2 MB filesystem."""

from __future__ import annotations

import sqlite3

import pytest

from scoctl.core.model import NewEvent
from scoctl.errors import StateUnavailable, TemporaryError
from scoctl.state.sqlite import SqliteStore
from scoctl.state.sqlite.base import JOURNAL_SIZE_LIMIT, outage_of
from tests.fixtures.small_fs import fill, small_filesystem

BIG = "x" * 3000  # an event detail that takes most of a page


def tokens(store: SqliteStore) -> list[str]:
    return [e.token for e in store.events()]


def test_a_full_database_is_a_state_outage_and_the_transaction_is_rolled_back(tmp_path):
    """SQLite's own limit on the file's pages (``max_page_count``) gives the very error a full
    filesystem gives, SQLITE_FULL, in the middle of a transaction."""
    path = tmp_path / "state.db"
    store = SqliteStore.open(path, create=True)
    store.append_event(NewEvent(None, "BEFORE", "info"))
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")
    with pytest.raises(StateUnavailable) as raised, store.transaction():
        store.mark_dirty(["orders"], "asked")
        for n in range(50):
            store.append_event(NewEvent(None, f"HALF_{n}", "info", {"pad": BIG}))
    assert isinstance(raised.value, TemporaryError)  # exit 1, retried by the controller
    assert str(raised.value).startswith(f"state {path}: database or disk is full")
    assert not store.conn.in_transaction
    assert tokens(store) == ["BEFORE"] and store.dirty() == {}  # nothing half-written
    store.conn.execute("PRAGMA max_page_count = 1073741823")  # room again
    with store.transaction():
        store.append_event(NewEvent(None, "AFTER", "info", {"pad": BIG}))
    assert tokens(store) == ["BEFORE", "AFTER"]
    store.close()


def test_only_a_full_or_failing_filesystem_is_an_outage():
    full = sqlite3.OperationalError("database or disk is full")
    full.sqlite_errorcode = 13  # type: ignore[attr-defined]
    io = sqlite3.OperationalError("disk I/O error")
    io.sqlite_errorcode = 10 | (3 << 8)  # type: ignore[attr-defined]  # SQLITE_IOERR_WRITE
    locked = sqlite3.OperationalError("database is locked")
    locked.sqlite_errorcode = 5  # type: ignore[attr-defined]
    assert "is full;" in str(outage_of(full, "s.db"))
    assert "full or failing" in str(outage_of(io, "s.db"))
    assert outage_of(locked, "s.db") is None
    assert outage_of(ValueError("x"), "s.db") is None


def test_a_commit_that_fails_on_a_full_filesystem_is_rolled_back_and_the_store_goes_on():
    """A real full filesystem (a 2 MB tmpfs, filled up): the transaction's pages only reach the
    disk at COMMIT (the write-ahead log grows then), so that is where it fails. Before, the
    failed COMMIT left the transaction open, and every later one failed with "cannot start a
    transaction within a transaction"."""
    with small_filesystem("2m") as where:
        path = where / "state.db"
        store = SqliteStore.open(path, create=True)
        filler = fill(where)
        failed = 0
        for n in range(40):  # until one transaction's pages no longer fit
            try:
                with store.transaction():
                    for m in range(20):
                        store.append_event(NewEvent(None, f"T{n}_{m}", "info", {"pad": BIG}))
            except StateUnavailable as exc:
                assert "database or disk is full" in str(exc) or "disk I/O" in str(exc)
                failed = n
                break
        else:
            pytest.fail("the full filesystem took every transaction")
        assert not store.conn.in_transaction
        written = tokens(store)
        assert not [t for t in written if t.startswith(f"T{failed}_")]  # none of it kept
        assert all(sum(t.startswith(f"T{n}_") for t in written) == 20 for n in range(failed))
        filler.unlink()  # room again: the same store goes on
        with store.transaction():
            store.append_event(NewEvent(None, "AFTER", "info"))
        assert tokens(store)[-1] == "AFTER"
        store.close()


def test_the_write_ahead_log_stays_small_enough_for_a_2mb_filesystem():
    """6 MB of writes in transactions of 90 KB on a 2 MB filesystem, the state itself staying
    small (the same rows rewritten): SQLite's default checkpoint (every 1,000 pages) lets the
    log alone grow past 2 MB — the disk fills —; it is checkpointed every 100 pages and cut
    back to `JOURNAL_SIZE_LIMIT`."""
    with small_filesystem("2m") as where:
        path = where / "state.db"
        store = SqliteStore.open(path, create=True)
        wal = where / "state.db-wal"
        largest = 0
        for n in range(70):
            store.mark_dirty([f"w{m}" for m in range(30)], f"{n} {BIG}")
            largest = max(largest, wal.stat().st_size)
        assert largest < 2 * JOURNAL_SIZE_LIMIT, largest
        store.close()
