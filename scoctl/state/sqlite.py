"""SQLite state through sqlite-utils: WAL, mode 0600, busy timeout, numbered migrations.

Every public method that writes runs in a transaction; callers group several writes into one
stage transaction with ``with store.transaction():`` (re-entrant), so a crash leaves the previous
state, never half a plan.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from scoctl.clock import Clock, SystemClock, parse_rfc3339, rfc3339
from scoctl.core.model import (
    ClaimRecord,
    EventRecord,
    ExclusionRecord,
    InstanceRecord,
    LaunchRecord,
    NoticedRecord,
    NoticeRecord,
    PlanGeneration,
    PlanUnitRecord,
    PlanWorkloadRecord,
    WorkloadRecord,
)
from scoctl.core.tokens import TokenOutcome, apply_token, is_active
from scoctl.errors import StateError
from scoctl.secrets import scrub
from scoctl.state.migrations import MIGRATIONS

SCHEMA_VERSION = len(MIGRATIONS)
DIRTY_KEY = "plan:dirty"
BUSY_TIMEOUT_S = 30.0


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _loads(text: str | None, default: Any) -> Any:
    return json.loads(text) if text else default


class Store:
    """The typed state interface every stage uses. Open with `Store.open`."""

    def __init__(self, conn: sqlite3.Connection, path: Path, clock: Clock) -> None:
        self.conn = conn
        self.db = sqlite_utils.Database(conn)
        self.path = path
        self.clock = clock
        self._depth = 0
        self.migrated_from: int | None = None  # the schema `open` migrated from, if it did

    # -- lifecycle -------------------------------------------------------------------------

    @classmethod
    def open(cls, path: Path, *, clock: Clock | None = None, create: bool = False,
             migrate: bool = True) -> Store:
        """Open the state file at `path`.

        `create` makes a missing file (mode 0600); otherwise a missing file is a StateError
        telling the operator to run ``scoctl init``. A file written by a newer schema is refused
        and left untouched. With `migrate` an older file is brought up to date.
        """
        path = Path(path)
        if not path.exists():
            if not create:
                raise StateError(f"{path}: no state file (run `scoctl init` first)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except OSError as exc:
                raise StateError(f"{path}: cannot create the state file: "
                                 f"{exc.strerror or exc}") from exc
        try:
            conn = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as exc:
            raise StateError(f"{path}: not a usable SQLite state file ({exc})") from exc
        if version > SCHEMA_VERSION:
            conn.close()
            raise StateError(
                f"{path}: written by a newer scoctl (schema {version}, this scoctl knows "
                f"{SCHEMA_VERSION}); upgrade scoctl — the file was not modified"
            )
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if mode != "wal":
                conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StateError(f"{path}: cannot set WAL mode ({exc})") from exc
        store = cls(conn, path, clock or SystemClock())
        if migrate and version < SCHEMA_VERSION:
            store._migrate(version)
            store.migrated_from = version
        elif version < SCHEMA_VERSION:
            conn.close()
            raise StateError(f"{path}: schema {version} is older than {SCHEMA_VERSION}; "
                             "run `scoctl init` to migrate it")
        return store

    def _migrate(self, current: int) -> None:
        run_migrations(self.conn, MIGRATIONS, current)
        try:
            os.chmod(self.path, 0o600)
        except OSError:
            pass

    def schema_version(self) -> int:
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """One write transaction (BEGIN IMMEDIATE); re-entrant; rolls back on any exception."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield self
        except BaseException:
            self._depth = 0
            self.conn.execute("ROLLBACK")
            raise
        self._depth = 0
        self.conn.execute("COMMIT")

    def now(self) -> str:
        return rfc3339(self.clock.now())

    # -- workloads -------------------------------------------------------------------------

    def _workload(self, row: Mapping[str, Any] | None) -> WorkloadRecord | None:
        if row is None:
            return None
        return WorkloadRecord(**{k: row[k] for k in WorkloadRecord.__dataclass_fields__})

    def _one(self, sql: str, params: Sequence[Any] = ()) -> dict[str, Any] | None:
        rows = list(self.db.query(sql, params))
        return rows[0] if rows else None

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
            self.db.table("workloads").insert({
                "slug": slug, "kind": kind, "source": source, "contract": contract,
                "status": "pending", "created": now, "updated": now, "job_id": job_id,
                "namespace": namespace,
            })
            created = self.active_workload(slug)
            assert created is not None
            return created

    def set_status(self, workload_id: int, status: str) -> None:
        """Set a row's status directly (the gate's over-capacity verdict)."""
        with self.transaction():
            self.conn.execute("UPDATE workloads SET status = ?, updated = ? WHERE id = ?",
                              [status, self.now(), workload_id])

    def record_token(self, slug: str, token: str, detail: Mapping[str, Any] | None = None, *,
                     create: tuple[str, str, str] | None = None,
                     ts: str | None = None) -> tuple[WorkloadRecord | None, TokenOutcome | None]:
        """Apply `token` to the workload `slug` (DESIGN §3) and log it.

        The active row takes the token; with no active row the newest row does (where an
        inactive status is terminal). `create` = (kind, source, contract) makes a pending row
        first when the slug has none at all. Returns the row after the token and the outcome
        (None when no row exists: the event is still logged against the slug).
        """
        detail = dict(detail or {})
        with self.transaction():
            row = self.active_workload(slug) or self.latest_workload(slug)
            if row is None and create is not None:
                kind, source, contract = create
                row = self.ensure_workload(slug, kind=kind, source=source, contract=contract,
                                           job_id=str(detail["job_id"]) if detail.get("job_id")
                                           else None)
            if row is None:
                from scoctl.core.tokens import map_token

                meaning = map_token(token, detail)
                self.append_event(slug, token, meaning.level, None, detail, ts=ts)
                return None, None
            outcome = apply_token(row.status, token, detail,
                                  last_queued_reason=row.last_queued_reason)
            if not outcome.record:
                return row, outcome
            if outcome.note:
                detail.setdefault("note", outcome.note)
            queued_reason = (str(detail.get("reason", "")) if token == "SLURM_JOB_QUEUED"
                             else row.last_queued_reason)
            if is_active(row.status):
                self.conn.execute(
                    "UPDATE workloads SET status = ?, last_token = ?, last_queued_reason = ?, "
                    "updated = ? WHERE id = ?",
                    [outcome.status, token, queued_reason, self.now(), row.id])
            self.append_event(slug, token, outcome.level, outcome.status, detail,
                              workload_id=row.id, ts=ts)
            return self.latest_by_id(row.id), outcome

    def latest_by_id(self, workload_id: int) -> WorkloadRecord | None:
        return self._workload(self._one("SELECT * FROM workloads WHERE id = ?", [workload_id]))

    # -- events ----------------------------------------------------------------------------

    def append_event(self, workload: str | None, token: str, level: str, status: str | None,
                     detail: Mapping[str, Any] | None = None, *, workload_id: int | None = None,
                     ts: str | None = None) -> int:
        """Append one event; secrets in `detail` are scrubbed first.

        `ts` (RFC 3339 with any offset) is stored in UTC; an unreadable one becomes now.
        """
        if ts:  # one text form (UTC, microseconds), so `events --since` compares as text
            try:
                ts = rfc3339(parse_rfc3339(ts))
            except ValueError:
                ts = None
        with self.transaction():
            cursor = self.conn.execute(
                "INSERT INTO events (ts, workload, workload_id, token, level, status, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [ts or self.now(), workload, workload_id, token, level, status,
                 _dumps(scrub(dict(detail or {})))])
            return int(cursor.lastrowid or 0)

    def events(self, *, workload: str | None = None, since: str | None = None,
               after_id: int = 0, limit: int | None = None) -> list[EventRecord]:
        """Events in order, filtered by workload, time (RFC 3339, inclusive) and id."""
        where: list[str] = ["id > ?"]
        params: list[object] = [after_id]
        if workload:
            where.append("workload = ?")
            params.append(workload)
        if since:
            where.append("ts >= ?")
            params.append(since)
        sql = f"SELECT * FROM events WHERE {' AND '.join(where)} ORDER BY id"
        if limit:
            sql += f" LIMIT {int(limit)}"
        return [EventRecord(id=r["id"], ts=r["ts"], workload=r["workload"], token=r["token"],
                            level=r["level"], status=r["status"], detail=_loads(r["detail"], {}))
                for r in self.db.query(sql, params)]

    # -- claims ----------------------------------------------------------------------------

    def _claim(self, row: Mapping[str, Any]) -> ClaimRecord:
        return ClaimRecord(
            workload=row["workload"], version=row["version"], contract=row["contract"],
            requests=_loads(row["requests"], {}), largest_pod=_loads(row["largest_pod"], {}),
            pods=row["pods"], tolerates_reclaimable=bool(row["tolerates_reclaimable"]),
            source=row["source"], updated=row["updated"],
            nodes=tuple(_loads(row["nodes"], [])))

    def claim(self, workload: str) -> ClaimRecord | None:
        row = self._one("SELECT * FROM claims WHERE workload = ?", [workload])
        return self._claim(row) if row else None

    def claims(self) -> list[ClaimRecord]:
        """Every claim, by workload (a plain cursor: this runs on every plan over 10,000s)."""
        cursor = self.conn.execute(
            "SELECT workload, version, contract, requests, largest_pod, pods, "
            "tolerates_reclaimable, source, updated, nodes FROM claims ORDER BY workload")
        return [ClaimRecord(workload=w, version=v, contract=c, requests=_loads(req, {}),
                            largest_pod=_loads(lp, {}), pods=pods,
                            tolerates_reclaimable=bool(tol), source=src, updated=upd,
                            nodes=tuple(_loads(nodes, [])) if nodes != "[]" else ())
                for w, v, c, req, lp, pods, tol, src, upd, nodes in cursor]

    def put_claim(self, workload: str, *, contract: str, requests: Mapping[str, int],
                  largest_pod: Mapping[str, int], pods: int, source: str,
                  tolerates_reclaimable: bool = True,
                  nodes: Sequence[str] = ()) -> tuple[ClaimRecord, bool]:
        """Store a claim; a new version only when the normalised demand changed.

        Returns the stored claim and whether this was a change (a "claim delta").
        """
        with self.transaction():
            old = self.claim(workload)
            key_new = (dict(sorted(requests.items())), dict(sorted(largest_pod.items())),
                       contract, tolerates_reclaimable, sorted(nodes))
            if old is not None:
                key_old = (dict(sorted(old.requests.items())),
                           dict(sorted(old.largest_pod.items())), old.contract,
                           old.tolerates_reclaimable, sorted(old.nodes))
                if key_old == key_new:
                    if old.pods != pods:
                        self.conn.execute("UPDATE claims SET pods = ? WHERE workload = ?",
                                          [pods, workload])
                        return self.claim(workload) or old, False
                    return old, False
            version = (old.version if old else 0) + 1
            self.conn.execute(
                "INSERT OR REPLACE INTO claims (workload, version, contract, requests, "
                "largest_pod, pods, tolerates_reclaimable, source, nodes, updated) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [workload, version, contract, _dumps(dict(requests)), _dumps(dict(largest_pod)),
                 pods, int(tolerates_reclaimable), source, _dumps(sorted(nodes)), self.now()])
            stored = self.claim(workload)
            assert stored is not None
            return stored, True

    # -- plans -----------------------------------------------------------------------------

    def latest_generation(self) -> PlanGeneration | None:
        row = self._one("SELECT * FROM plan_generations ORDER BY generation DESC LIMIT 1")
        if row is None:
            return None
        return PlanGeneration(generation=row["generation"], created=row["created"],
                              ranking=row["ranking"], changed=tuple(_loads(row["changed"], [])),
                              full=bool(row["full"]))

    def plans(self, *, explain: bool = False, units: bool = True,
              only: Collection[str] | None = None) -> dict[str, PlanWorkloadRecord]:
        """The current plan of every workload (rows of the generation that last planned it), or
        of the workloads in `only`.

        Explain lines are left out unless `explain` (they are large and only `--explain`
        reads them); without `units` the plans carry no pools (what `plan` needs to tell which
        workloads changed). Plain cursors: this runs on every plan over 10,000s of workloads."""
        where, params = "", []
        if only is not None:
            names = sorted(set(only))
            if not names:
                return {}
            where = f" WHERE workload IN ({','.join('?' * len(names))})"
            params = names
        held: dict[str, list[PlanUnitRecord]] = {}
        for workload, pool, tier, grp, count, share, score in self.conn.execute(
                "SELECT workload, pool, tier, grp, units, share, score FROM plan_units"
                + where + " ORDER BY workload, pool", params) if units else ():
            held.setdefault(workload, []).append(PlanUnitRecord(
                pool=pool, tier=tier, group=grp, units=count, share=share, score=score))
        out = {}
        for (workload, generation, claim_version, contract, ranking, feasible, degraded,
             reasons, exclusions, explained) in self.conn.execute(
                "SELECT workload, generation, claim_version, contract, ranking, feasible, "
                "degraded, reasons, exclusions, " + ("explain" if explain else "'[]'")
                + " FROM plan_workloads" + where + " ORDER BY workload", params):
            out[workload] = PlanWorkloadRecord(
                workload=workload, generation=generation, claim_version=claim_version,
                contract=contract, ranking=ranking, feasible=bool(feasible),
                degraded=bool(degraded),
                reasons=tuple(_loads(reasons, [])) if reasons != "[]" else (),
                pools=tuple(held.get(workload, ())),
                exclusions=tuple(_loads(exclusions, [])) if exclusions != "[]" else (),
                explain=tuple(_loads(explained, [])) if explained != "[]" else ())
        return out

    def planned_units(self) -> list[tuple[str, str, int]]:
        """(workload, pool, units) of every current plan row: what kept plans hold."""
        return [(w, p, n) for w, p, n in self.conn.execute(
            "SELECT workload, pool, units FROM plan_units")]

    def commit_plan(self, *, ranking: str | None, plans: Sequence[PlanWorkloadRecord],
                    full: bool, removed: Sequence[str] = ()) -> int:
        """Write one new plan generation holding `plans` (their `generation` is ignored).

        Only the named workloads' rows change; every other workload keeps its rows.
        """
        with self.transaction():
            cursor = self.conn.execute(
                "INSERT INTO plan_generations (created, ranking, changed, full) "
                "VALUES (?, ?, ?, ?)",
                [self.now(), ranking, _dumps(sorted({p.workload for p in plans} | set(removed))),
                 int(full)])
            generation = int(cursor.lastrowid or 0)
            for name in removed:
                self.conn.execute("DELETE FROM plan_units WHERE workload = ?", [name])
                self.conn.execute("DELETE FROM plan_workloads WHERE workload = ?", [name])
            for plan in plans:
                self.conn.execute("DELETE FROM plan_units WHERE workload = ?", [plan.workload])
                self.conn.execute(
                    "INSERT OR REPLACE INTO plan_workloads (workload, generation, claim_version, "
                    "contract, ranking, feasible, degraded, reasons, exclusions, explain) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [plan.workload, generation, plan.claim_version, plan.contract, ranking,
                     int(plan.feasible), int(plan.degraded), _dumps(list(plan.reasons)),
                     _dumps(list(plan.exclusions)), _dumps(list(plan.explain))])
                self.conn.executemany(
                    "INSERT INTO plan_units (workload, pool, tier, grp, units, share, score) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(plan.workload, u.pool, u.tier, u.group, u.units, u.share, u.score)
                     for u in plan.pools if u.units > 0])
            return generation

    # -- launches and instances ------------------------------------------------------------

    def add_launch(self, launch: LaunchRecord) -> None:
        """Record a launch intent (before the cloud call: crash safety)."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO launches (launch_id, region, workload, pool, generation, count, "
                "status, created, updated, reservation_id, error, node_names) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [launch.launch_id, launch.region, launch.workload, launch.pool,
                 launch.generation, launch.count, launch.status, launch.created, launch.updated,
                 launch.reservation_id, launch.error, _dumps(list(launch.node_names))])

    def update_launch(self, launch_id: str, *, status: str, reservation_id: str | None = None,
                      error: str | None = None) -> None:
        with self.transaction():
            self.conn.execute(
                "UPDATE launches SET status = ?, reservation_id = COALESCE(?, reservation_id), "
                "error = COALESCE(?, error), updated = ? WHERE launch_id = ?",
                [status, reservation_id, error, self.now(), launch_id])

    def launches(self, *, status: Sequence[str] | None = None) -> list[LaunchRecord]:
        sql, params = "SELECT * FROM launches", []
        if status:
            sql += f" WHERE status IN ({','.join('?' * len(status))})"
            params = list(status)
        return [LaunchRecord(
            launch_id=r["launch_id"], region=r["region"], workload=r["workload"], pool=r["pool"],
            generation=r["generation"], count=r["count"], status=r["status"],
            created=r["created"], updated=r["updated"], reservation_id=r["reservation_id"],
            error=r["error"], node_names=tuple(_loads(r["node_names"], [])))
            for r in self.db.query(sql + " ORDER BY created, launch_id", params)]

    def upsert_instance(self, instance: InstanceRecord) -> None:
        with self.transaction():
            self.db.table("instances").upsert(
                {k: getattr(instance, k) for k in InstanceRecord.__dataclass_fields__},
                pk="id")

    def update_instance(self, instance_id: str, **fields: Any) -> None:
        allowed = set(InstanceRecord.__dataclass_fields__) - {"id"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown instance fields: {sorted(bad)}")
        fields["updated"] = self.now()
        with self.transaction():
            sets = ", ".join(f"{k} = ?" for k in fields)
            self.conn.execute(f"UPDATE instances SET {sets} WHERE id = ?",
                              [*fields.values(), instance_id])

    def instances(self, *, region: str | None = None, workload: str | None = None,
                  include_deleted: bool = False) -> list[InstanceRecord]:
        where, params = [], []
        if region:
            where.append("region = ?")
            params.append(region)
        if workload:
            where.append("workload = ?")
            params.append(workload)
        if not include_deleted:
            where.append("status != 'deleted'")
        sql = "SELECT * FROM instances" + (f" WHERE {' AND '.join(where)}" if where else "")
        return [InstanceRecord(**{k: r[k] for k in InstanceRecord.__dataclass_fields__})
                for r in self.db.query(sql + " ORDER BY workload, pool, name", params)]

    def instance(self, instance_id: str) -> InstanceRecord | None:
        row = self._one("SELECT * FROM instances WHERE id = ?", [instance_id])
        return InstanceRecord(**{k: row[k] for k in InstanceRecord.__dataclass_fields__}) \
            if row else None

    # -- exclusions and key/value ------------------------------------------------------------

    def exclude(self, pool: str, reason: str, until: str) -> None:
        with self.transaction():
            self.conn.execute("INSERT OR REPLACE INTO exclusions (pool, reason, until) "
                              "VALUES (?, ?, ?)", [pool, reason, until])

    def exclusions(self, now: str | None = None) -> list[ExclusionRecord]:
        """Exclusions still in force at `now` (default: the store clock)."""
        moment = now or self.now()
        return [ExclusionRecord(pool=r["pool"], reason=r["reason"], until=r["until"])
                for r in self.db.query("SELECT * FROM exclusions WHERE until > ? ORDER BY pool",
                                       [moment])]

    # -- reclaim notices ---------------------------------------------------------------------

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
        return [NoticeRecord(kind=r["kind"], target=r["target"], region=r["region"],
                             deadline=r["deadline"], received=r["received"], reason=r["reason"])
                for r in self.db.query("SELECT * FROM reclaim_notices ORDER BY kind, target")]

    def drop_notices(self, keys: Iterable[tuple[str, str]]) -> None:
        """Forget announced reclaims by (kind, target)."""
        with self.transaction():
            self.conn.executemany("DELETE FROM reclaim_notices WHERE kind = ? AND target = ?",
                                  list(keys))

    def save_noticed(self, row: NoticedRecord) -> None:
        """Insert or update one noticed instance (keyed by server and first sight)."""
        values = {k: getattr(row, k) for k in NoticedRecord.__dataclass_fields__}
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
        sql = "SELECT * FROM noticed_instances"
        clauses = [] if every else [f"({' OR '.join(where)})"]
        if region is not None:
            clauses.append("region = ?")
            params.append(region)
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        return [_noticed(r) for r in self.db.query(sql + " ORDER BY noticed_at, server_id",
                                                    params)]

    def mark_dirty(self, workloads: Iterable[str], reason: str) -> None:
        """Ask the next `plan` to re-plan these workloads (units lost, pool excluded, ...)."""
        names = set(workloads)
        if not names:
            return
        dirty = dict(self.get_kv(DIRTY_KEY, {}))
        dirty.update(dict.fromkeys(names, reason))
        self.set_kv(DIRTY_KEY, dirty)

    def dirty(self) -> dict[str, str]:
        """Workloads marked for re-planning, with the reason."""
        return dict(self.get_kv(DIRTY_KEY, {}))

    def clear_dirty(self, names: Iterable[str]) -> None:
        """The plan stage re-planned these workloads."""
        gone = set(names)
        self.set_kv(DIRTY_KEY, {k: v for k, v in self.dirty().items() if k not in gone})

    def get_kv(self, key: str, default: Any = None) -> Any:
        row = self._one("SELECT value FROM kv WHERE key = ?", [key])
        return _loads(row["value"], default) if row else default

    def set_kv(self, key: str, value: Any) -> None:
        with self.transaction():
            self.conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)",
                              [key, _dumps(value)])

    def counts(self) -> dict[str, int]:
        """Row counts per table, for `status` and `init` summaries."""
        out = {}
        for table in ("workloads", "events", "claims", "plan_generations", "instances",
                      "launches"):
            out[table] = int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
        return out


def _noticed(r: Mapping[str, Any]) -> NoticedRecord:
    fields = {k: r[k] for k in NoticedRecord.__dataclass_fields__}
    for flag in ("cordoned", "drain_forced", "requeued"):
        fields[flag] = bool(fields[flag])
    return NoticedRecord(**fields)


def run_migrations(conn: sqlite3.Connection, migrations: Sequence[str], current: int) -> int:
    """Bring a state file at schema `current` up to ``len(migrations)``; returns the version.

    Each migration runs in its own transaction with the ``user_version`` bump, so a failing one
    leaves the file at the previous version; a migration another process applied meanwhile is
    skipped.
    """
    for number in range(current + 1, len(migrations) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            again = conn.execute("PRAGMA user_version").fetchone()[0]
            if again >= number:  # another process migrated it meanwhile
                conn.execute("ROLLBACK")
                continue
            for statement in _split_sql(migrations[number - 1]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _split_sql(script: str) -> list[str]:
    """Split a migration into statements, keeping trigger bodies whole."""
    statements, current = [], []
    for line in script.splitlines():
        if not line.strip():
            continue
        current.append(line)
        text = "\n".join(current).strip()
        if text.endswith(";") and sqlite3.complete_statement(text):
            statements.append(text)
            current = []
    if current and "\n".join(current).strip():
        statements.append("\n".join(current).strip())
    return statements
