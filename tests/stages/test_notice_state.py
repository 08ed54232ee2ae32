"""The state's reclaim-notice tables (schema 2) behind the typed Store methods."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scoctl.core.model import NoticedRecord, NoticeRecord
from scoctl.state import Store
from tests.fixtures.state import StateProbe


def row(server: str, noticed_at: str, **changes: object) -> NoticedRecord:
    base = NoticedRecord(server_id=server, region="r", name=f"n-{server}", workload="web",
                         pool="p", deadline="2026-01-01T00:10:00.000000Z", noticed_at=noticed_at,
                         source="metadata")
    return replace(base, **changes)  # type: ignore[arg-type]


def test_a_later_notice_for_the_same_target_replaces_the_first_and_can_be_dropped(
        store: Store) -> None:
    first = NoticeRecord(kind="pool", target="p", region="r", deadline="2026-01-01T00:10:00Z",
                         received="2026-01-01T00:00:00Z", reason="a")
    store.add_notice(first)
    store.add_notice(replace(first, deadline="2026-01-01T00:20:00Z", reason="b"))
    assert store.notices() == [replace(first, deadline="2026-01-01T00:20:00Z", reason="b")]
    store.drop_notices([("pool", "p")])
    assert store.notices() == []


def test_noticed_rows_round_trip_and_history_stays(store: Store) -> None:
    open_row = row("s1", "2026-01-01T00:00:00.000000Z", cordoned=True, evicted=3)
    store.save_noticed(open_row)
    assert store.noticed() == [open_row]
    closed = replace(open_row, outcome="reclaimed", closed_at="2026-01-01T00:05:00.000000Z")
    store.save_noticed(closed)
    assert store.noticed() == []
    assert store.noticed(awaiting_since="2026-01-01T00:01:00.000000Z") == [closed]
    assert store.noticed(awaiting_since="2026-01-01T00:06:00.000000Z") == []
    again = row("s1", "2026-01-01T01:00:00.000000Z")  # noticed a second time later
    store.save_noticed(again)
    assert store.noticed(every=True) == [closed, again]
    assert store.noticed(region="elsewhere") == []


def test_one_server_has_at_most_one_open_notice(store: Store, probe: StateProbe) -> None:
    store.save_noticed(row("s1", "2026-01-01T00:00:00.000000Z"))
    with pytest.raises(probe.integrity_error):
        store.save_noticed(row("s1", "2026-01-01T00:00:01.000000Z"))
