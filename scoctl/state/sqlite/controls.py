"""Operator controls and showback: the `pauses` and `claim_history` tables (schema 12)."""

from __future__ import annotations

from collections.abc import Iterable
from json import loads

from scoctl.core.model.controls import ClaimStep, Pause
from scoctl.core.model.vocabulary import PauseScope
from scoctl.core.timefmt import parse_rfc3339
from scoctl.state.sqlite.base import SqliteBase


class ControlTables(SqliteBase):
    """`pauses`: one row per paused scope."""

    def pauses(self) -> list[Pause]:
        """See `Store.pauses`."""
        return [Pause(PauseScope(r["scope"]), r["since"], r["until"], r["reason"], r["author"])
                for r in self.db.query("SELECT * FROM pauses ORDER BY scope")]

    def save_pause(self, pause: Pause) -> None:
        """See `Store.save_pause`."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO pauses (scope, since, until, reason, author) "
                "VALUES (?, ?, ?, ?, ?)",
                [pause.scope.value, pause.since, pause.until, pause.reason, pause.author])

    def drop_pauses(self, scopes: Iterable[PauseScope]) -> list[Pause]:
        """See `Store.drop_pauses`."""
        wanted = {PauseScope(s) for s in scopes}
        with self.transaction():
            dropped = [p for p in self.pauses() if p.scope in wanted]
            self.conn.executemany("DELETE FROM pauses WHERE scope = ?",
                                  [[p.scope.value] for p in dropped])
        return dropped

    def claim_history(self, since: str) -> list[ClaimStep]:
        """See `Store.claim_history`."""
        rows = self.db.query(
            "SELECT h.workload, h.at, h.requests FROM claim_history h WHERE h.at >= ? "
            "OR h.version = (SELECT max(o.version) FROM claim_history o "
            "WHERE o.workload = h.workload AND o.at < ?) ORDER BY h.at, h.workload",
            [since, since])
        return [ClaimStep(r["workload"], parse_rfc3339(r["at"]), loads(r["requests"]))
                for r in rows]
