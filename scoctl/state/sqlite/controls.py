"""Operator controls: the `pauses` table (schema 12)."""

from __future__ import annotations

from collections.abc import Iterable

from scoctl.core.model.controls import Pause
from scoctl.core.model.vocabulary import PauseScope
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
