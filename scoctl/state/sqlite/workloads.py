"""Workloads, their token events and their claims (design: Statuses, Words "claim")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scoctl.clock import parse_rfc3339, rfc3339
from scoctl.core import model
from scoctl.core.model import EventRecord, NewEvent, TokenRecord, WorkloadRecord
from scoctl.secrets import scrub
from scoctl.state.sqlite.base import SqliteBase, dumps, loads

if TYPE_CHECKING:
    from scoctl.core.claims import ClaimWrite
    from scoctl.core.model import ClaimRecord  # built on first use: the gate reads no claim

# A day before the newest event, as migration 3's trigger computes it.
EVENTS_FLOOR_SQL = "strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT max(ts) FROM events), '-1 day')"


class WorkloadTables(SqliteBase):
    """Workloads (one active row per slug), the append-only event log, claims."""

    def _workload(self, row: Mapping[str, Any] | None) -> WorkloadRecord | None:
        if row is None:
            return None
        return WorkloadRecord(**{k: row[k] for k in WorkloadRecord.__dataclass_fields__})

    def active_workload(self, slug: str) -> WorkloadRecord | None:
        """The active (pending, queued, preparing, running) row of `slug`, if any."""
        return self._workload(self._one(
            "SELECT * FROM workloads WHERE slug = ? AND status IN "
            "('pending','queued','preparing','running')", [slug]))

    def latest_workload(self, slug: str) -> WorkloadRecord | None:
        """The newest row of `slug`, active or not."""
        return self._workload(self._one(
            "SELECT * FROM workloads WHERE slug = ? ORDER BY id DESC LIMIT 1", [slug]))

    def workload_by_job(self, job_id: str) -> WorkloadRecord | None:
        """The newest row tracking Slurm job `job_id`."""
        return self._workload(self._one(
            "SELECT * FROM workloads WHERE job_id = ? ORDER BY id DESC LIMIT 1", [job_id]))

    def workloads(self, *, active_only: bool = False) -> list[WorkloadRecord]:
        """The newest row of every slug (or only the active rows), by slug."""
        sql = ("SELECT * FROM workloads WHERE id IN (SELECT MAX(id) FROM workloads GROUP BY slug)"
               if not active_only else
               "SELECT * FROM workloads WHERE status IN ('pending','queued','preparing','running')")
        rows = [self._workload(r) for r in self.db.query(sql + " ORDER BY slug")]
        return [r for r in rows if r is not None]

    def ensure_workload(self, slug: str, *, kind: str, source: str, contract: str,
                        job_id: str | None = None, namespace: str | None = None) -> WorkloadRecord:
        """The active row of `slug`, or a new ``pending`` one (a resubmission is a new row)."""
        with self.transaction():
            current = self.active_workload(slug)
            if current is not None:
                if job_id and current.job_id != job_id:
                    self.conn.execute("UPDATE workloads SET job_id = ?, updated = ? WHERE id = ?",
                                      [job_id, self.now(), current.id])
                    current = self.active_workload(slug)
                assert current is not None
                return current
            now = self.now()
            self.conn.execute(
                "INSERT INTO workloads (slug, kind, source, contract, status, created, updated, "
                "job_id, namespace) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
                [slug, kind, source, contract, now, now, job_id, namespace])
            created = self.active_workload(slug)
            assert created is not None
            return created

    def set_status(self, workload_id: int, status: str) -> None:
        """Set a row's status directly (the gate's over-capacity verdict)."""
        with self.transaction():
            self.conn.execute("UPDATE workloads SET status = ?, updated = ? WHERE id = ?",
                              [status, self.now(), workload_id])

    def save_token(self, record: TokenRecord) -> WorkloadRecord | None:
        """Save what a token does (decided by `core.tokens.decide_token`): the row's new status
        and bookkeeping when `record.update_row`, and the event. Returns the row after it."""
        with self.transaction():
            if record.update_row and record.workload_id is not None:
                self.conn.execute(
                    "UPDATE workloads SET status = ?, last_token = ?, last_queued_reason = ?, "
                    "updated = ? WHERE id = ?",
                    [record.status, record.token, record.last_queued_reason, self.now(),
                     record.workload_id])
            self.append_event(NewEvent(record.workload, record.token, record.level,
                                       record.detail, status=record.status,
                                       workload_id=record.workload_id, ts=record.ts))
            if record.workload_id is None:
                return None
            return self.latest_by_id(record.workload_id)

    def latest_by_id(self, workload_id: int) -> WorkloadRecord | None:
        return self._workload(self._one("SELECT * FROM workloads WHERE id = ?", [workload_id]))

    # -- events ----------------------------------------------------------------------------

    def append_event(self, event: NewEvent) -> int:
        """Append one event; secrets in its `detail` are scrubbed first.

        Its `ts` (RFC 3339 with any offset) is stored in UTC; an unreadable one becomes now.
        """
        ts = event.ts
        if ts:  # one text form (UTC, microseconds), so `events --since` compares as text
            try:
                ts = rfc3339(parse_rfc3339(ts))
            except ValueError:
                ts = None
        with self.transaction():
            cursor = self.conn.execute(
                "INSERT INTO events (ts, workload, workload_id, token, level, status, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [ts or self.now(), event.workload, event.workload_id, event.token, event.level,
                 event.status, dumps(scrub(dict(event.detail)))])
            return int(cursor.lastrowid or 0)

    def events(self, *, workload: str | None = None, since: str | None = None,
               after_id: int = 0, limit: int | None = None,
               tokens: Sequence[str] | None = None,
               levels: Sequence[str] | None = None) -> list[EventRecord]:
        """Events in order, filtered by workload, time (RFC 3339, inclusive), id, token and
        level (any of those given)."""
        where: list[str] = ["id > ?"]
        params: list[object] = [after_id]
        if workload:
            where.append("workload = ?")
            params.append(workload)
        for column, values in (("token", tokens), ("level", levels)):
            if values:
                where.append(f"{column} IN ({', '.join('?' * len(values))})")
                params.extend(values)
        if since:
            where.append("ts >= ?")
            params.append(since)
        sql = f"SELECT * FROM events WHERE {' AND '.join(where)} ORDER BY id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [EventRecord(id=r["id"], ts=r["ts"], workload=r["workload"], token=r["token"],
                            level=r["level"], status=r["status"], detail=loads(r["detail"], {}))
                for r in self.db.query(sql, params)]

    def prune_events(self, before: str, limit: int) -> int:
        """Delete up to `limit` of the oldest events older than `before` (and than a day before
        the newest event, which the schema's trigger enforces); returns how many went."""
        with self.transaction():
            # the one path the append-only trigger lets through (migration 3)
            self.conn.execute("INSERT OR REPLACE INTO events_prune (only_row, before) "
                              "VALUES (1, ?)", [before])
            cursor = self.conn.execute(
                "DELETE FROM events WHERE id IN (SELECT id FROM events WHERE ts < ? AND ts < "
                f"({EVENTS_FLOOR_SQL}) ORDER BY ts, id LIMIT ?)", [before, int(limit)])
            self.conn.execute("DELETE FROM events_prune")
            # claim versions age out with the events (the latest of each workload stays)
            self.conn.execute(
                "DELETE FROM claim_history WHERE at < ? AND version < (SELECT max(h.version) "
                "FROM claim_history h WHERE h.workload = claim_history.workload)", [before])
            return max(0, cursor.rowcount)

    # -- claims ----------------------------------------------------------------------------

    def _claim(self, row: Mapping[str, Any]) -> ClaimRecord:
        from scoctl.core.claims import part_of  # claims only: a hook's workload row needs none

        return model.ClaimRecord(
            workload=row["workload"], version=row["version"], contract=row["contract"],
            requests=loads(row["requests"], {}), largest_pod=loads(row["largest_pod"], {}),
            pods=row["pods"], tolerates_reclaimable=bool(row["tolerates_reclaimable"]),
            source=row["source"], updated=row["updated"],
            nodes=tuple(loads(row["nodes"], [])), ineligible=loads(row["ineligible"], {}),
            zone_spread=row["zone_spread"], overhead=loads(row["overhead"], {}),
            parts=tuple(part_of(p) for p in loads(row["parts"], [])),
            preferred=loads(row["preferred"], {}), gang=row["gang"])

    def claim(self, workload: str) -> ClaimRecord | None:
        row = self._one("SELECT * FROM claims WHERE workload = ?", [workload])
        return self._claim(row) if row else None

    def claims(self) -> list[ClaimRecord]:
        """Every claim, by workload (a plain cursor: this runs on every plan over 10,000s)."""
        from scoctl.core.claims import part_of

        cursor = self.conn.execute(
            "SELECT workload, version, contract, requests, largest_pod, pods, "
            "tolerates_reclaimable, source, updated, nodes, ineligible, zone_spread, overhead, "
            "parts, preferred, gang FROM claims "
            "ORDER BY workload")
        return [model.ClaimRecord(workload=w, version=v, contract=c, requests=loads(req, {}),
                            largest_pod=loads(lp, {}), pods=pods,
                            tolerates_reclaimable=bool(tol), source=src, updated=upd,
                            nodes=tuple(loads(nodes, [])) if nodes != "[]" else (),
                            ineligible=loads(ineligible, {}) if ineligible != "{}" else {},
                            zone_spread=spread,
                            overhead=loads(overhead, {}) if overhead != "{}" else {},
                            parts=tuple(part_of(p) for p in loads(parts, []))
                            if parts != "[]" else (),
                            preferred=loads(preferred, {}) if preferred != "{}" else {},
                            gang=gang)
                for w, v, c, req, lp, pods, tol, src, upd, nodes, ineligible, spread, overhead,
                parts, preferred, gang in cursor]

    def save_claim(self, write: ClaimWrite) -> ClaimRecord:
        """Save what `core.claims.claim_write` decided: a new claim version, or the stored
        version with its new pod count."""
        from scoctl.core.claims import part_json

        c = write.claim
        with self.transaction():
            if not write.delta:
                self.conn.execute("UPDATE claims SET pods = ? WHERE workload = ?",
                                  [c.pods, c.workload])
            else:
                self.conn.execute(
                    "INSERT OR REPLACE INTO claims (workload, version, contract, requests, "
                    "largest_pod, pods, tolerates_reclaimable, source, nodes, ineligible, "
                    "zone_spread, overhead, parts, preferred, gang, updated) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [c.workload, write.version, c.contract, dumps(dict(c.requests)),
                     dumps(dict(c.largest_pod)), c.pods, int(c.tolerates_reclaimable),
                     c.source, dumps(sorted(c.nodes)), dumps(dict(sorted(c.ineligible.items()))),
                     c.zone_spread, dumps({f: dict(sorted(r.items()))
                                           for f, r in sorted(c.overhead.items())}),
                     dumps([part_json(p) for p in c.parts]),
                     dumps(dict(sorted(c.preferred.items()))), c.gang, self.now()])
                self.conn.execute(
                    "INSERT OR REPLACE INTO claim_history (workload, version, at, requests) "
                    "VALUES (?, ?, ?, ?)",
                    [c.workload, write.version, self.now(), dumps(dict(c.requests))])
            stored = self.claim(c.workload)
            assert stored is not None
            return stored

