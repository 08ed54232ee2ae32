"""`Store.events` filters by token and level in the state's own query (SQLite, and PostgreSQL
through the dialect), so `scoctl events --token/--level --limit` counts only what it shows."""

from __future__ import annotations

from scoctl.core.model import NewEvent
from scoctl.state.sqlite import SqliteStore


def test_events_filter_by_tokens_and_levels_before_the_limit(store: SqliteStore) -> None:
    for token, level in (("A", "info"), ("B", "warning"), ("A", "warning"), ("C", "error"),
                         ("A", "error")):
        store.append_event(NewEvent("w", token, level, {}))

    def shown(**kw: object) -> list[tuple[str, str]]:
        return [(e.token, e.level) for e in store.events(**kw)]  # type: ignore[arg-type]

    assert shown(tokens=["A"]) == [("A", "info"), ("A", "warning"), ("A", "error")]
    assert shown(levels=["warning", "error"], limit=2) == [("B", "warning"), ("A", "warning")]
    assert shown(tokens=["A", "C"], levels=["error"]) == [("C", "error"), ("A", "error")]
    assert shown(tokens=[]) == shown()  # no filter given
