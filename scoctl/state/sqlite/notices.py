"""Reclaim notices: what `scoctl notice` announced, and each noticed instance (design: Notices)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from scoctl.core import model  # a row type is built on first use: a hook builds none of these
from scoctl.state.sqlite.base import SqliteBase

if TYPE_CHECKING:
    from scoctl.core.model import (
        NoticedRecord,
        NoticeRecord,
    )

_FLAGS = ("cordoned", "drain_forced", "requeued")


def _noticed(r: Mapping[str, Any]) -> NoticedRecord:
    fields = {k: r[k] for k in model.NoticedRecord.__dataclass_fields__}
    for flag in _FLAGS:
        fields[flag] = bool(fields[flag])
    return model.NoticedRecord(**fields)


class NoticeTables(SqliteBase):
    """`reclaim_notices` and `noticed_instances` (schema 5)."""

    def add_notice(self, notice: NoticeRecord) -> None:
        """Record a reclaim announced with `scoctl notice`; a later one for the same server or
        pool replaces it."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO reclaim_notices (kind, target, region, deadline, "
                "received, reason) VALUES (?, ?, ?, ?, ?, ?)",
                [notice.kind, notice.target, notice.region, notice.deadline, notice.received,
                 notice.reason])

    def notices(self) -> list[NoticeRecord]:
        """Every announced reclaim still recorded, by kind and target."""
        return [model.NoticeRecord(kind=r["kind"], target=r["target"], region=r["region"],
                             deadline=r["deadline"], received=r["received"], reason=r["reason"])
                for r in self.db.query("SELECT * FROM reclaim_notices ORDER BY kind, target")]

    def drop_notices(self, keys: Iterable[tuple[str, str]]) -> None:
        """Forget announced reclaims by (kind, target)."""
        with self.transaction():
            self.conn.executemany("DELETE FROM reclaim_notices WHERE kind = ? AND target = ?",
                                  list(keys))

    def save_noticed(self, row: NoticedRecord) -> None:
        """Insert or update one noticed instance (keyed by server and first sight)."""
        values = {k: getattr(row, k) for k in model.NoticedRecord.__dataclass_fields__}
        values.update({flag: int(values[flag]) for flag in _FLAGS})  # integer columns on both
        with self.transaction():
            self.db.table("noticed_instances").upsert(values, pk=("server_id", "noticed_at"))

    def noticed(self, *, region: str | None = None, awaiting_since: str | None = None,
                every: bool = False) -> list[NoticedRecord]:
        """Noticed instances: the open ones; with `awaiting_since` also those closed since then
        whose replacement is not Ready yet; with `every`, all of them (history included)."""
        where, params = ["outcome IS NULL"], []
        if awaiting_since is not None:
            where.append("(replacement_ready_at IS NULL AND outcome != 'withdrawn' "
                         "AND closed_at >= ?)")
            params.append(awaiting_since)
        clauses = [] if every else [f"({' OR '.join(where)})"]
        if region is not None:
            clauses.append("region = ?")
            params.append(region)
        sql = "SELECT * FROM noticed_instances"
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return [_noticed(r) for r in self.db.query(sql + " ORDER BY noticed_at, server_id",
                                                    params)]
