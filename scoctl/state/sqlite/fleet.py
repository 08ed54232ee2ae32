"""Launch intents, instances, pool exclusions, and the reconcile / Slurm power markers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scoctl.core import model  # a row type is built on first use: a hook builds none of these
from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus
from scoctl.state.sqlite.base import SqliteBase, dumps, loads

if TYPE_CHECKING:
    from scoctl.core.model import (
        DisruptionBlock,
        ExclusionRecord,
        GangRecord,
        InstanceRecord,
        InstanceUpdate,
        LaunchRecord,
        RebalanceRecord,
    )


def _instance(row: Mapping[str, Any]) -> InstanceRecord:
    fields = {k: row[k] for k in model.InstanceRecord.__dataclass_fields__}
    fields["status"] = InstanceStatus(fields["status"])
    return model.InstanceRecord(**fields)


class FleetTables(SqliteBase):
    """Launch intents, instances, exclusions, orphan sightings, suspended nodes, node shapes."""

    def add_launch(self, launch: LaunchRecord) -> None:
        """Record a launch intent (before the cloud call: crash safety)."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO launches (launch_id, region, workload, pool, generation, count, "
                "status, created, updated, reservation_id, error, node_names) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [launch.launch_id, launch.region, launch.workload, launch.pool,
                 launch.generation, launch.count, launch.status, launch.created, launch.updated,
                 launch.reservation_id, launch.error, dumps(list(launch.node_names))])

    def update_launch(self, launch_id: str, *, status: LaunchStatus,
                      reservation_id: str | None = None,
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
        return [model.LaunchRecord(
            launch_id=r["launch_id"], region=r["region"], workload=r["workload"], pool=r["pool"],
            generation=r["generation"], count=r["count"], status=LaunchStatus(r["status"]),
            created=r["created"], updated=r["updated"], reservation_id=r["reservation_id"],
            error=r["error"], node_names=tuple(loads(r["node_names"], [])))
            for r in self.db.query(sql + " ORDER BY created, launch_id", params)]

    def upsert_instance(self, instance: InstanceRecord) -> None:
        with self.transaction():
            self.db.table("instances").upsert(
                {k: getattr(instance, k) for k in model.InstanceRecord.__dataclass_fields__},
                pk="id")

    def update_instance(self, update: InstanceUpdate) -> None:
        fields = {**update.fields, "updated": self.now()}
        with self.transaction():
            sets = ", ".join(f"{k} = ?" for k in fields)
            self.conn.execute(f"UPDATE instances SET {sets} WHERE id = ?",
                              [*fields.values(), update.id])

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
            where.append("status != ?")
            params.append(InstanceStatus.DELETED.value)
        sql = "SELECT * FROM instances" + (f" WHERE {' AND '.join(where)}" if where else "")
        return [_instance(r) for r in self.db.query(sql + " ORDER BY workload, pool, name", params)]

    def instance(self, instance_id: str) -> InstanceRecord | None:
        row = self._one("SELECT * FROM instances WHERE id = ?", [instance_id])
        return _instance(row) if row else None

    def disrupted(self, since: str) -> list[InstanceRecord]:
        """See `Store.disrupted`."""
        return [_instance(r) for r in self.db.query(
            "SELECT * FROM instances WHERE disruption IS NOT NULL "
            "AND (status != ? OR disruption_at >= ?) ORDER BY disruption_at, id",
            [InstanceStatus.DELETED.value, since])]

    def disruption_blocks(self) -> list[DisruptionBlock]:
        """See `Store.disruption_blocks`."""
        return [model.DisruptionBlock(r["workload"], r["reason"], r["budget"], r["until"])
                for r in self.db.query(
                    "SELECT * FROM disruption_blocks ORDER BY workload, reason")]

    def save_disruption_blocks(self, workloads: Iterable[str],
                               blocks: Iterable[DisruptionBlock]) -> None:
        """See `Store.save_disruption_blocks`."""
        with self.transaction():
            self.conn.executemany("DELETE FROM disruption_blocks WHERE workload = ?",
                                  [(w,) for w in sorted(set(workloads))])
            self.conn.executemany(
                "INSERT INTO disruption_blocks (workload, reason, budget, until) "
                "VALUES (?, ?, ?, ?)",
                [(b.workload, b.reason, b.budget, b.until) for b in blocks])

    def rebalances(self) -> dict[str, RebalanceRecord]:
        """See `Store.rebalances`."""
        return {r["workload"]: model.RebalanceRecord(r["workload"], r["trigger"], r["since"],
                                               tuple(loads(r["moves"], [])), r["planned"])
                for r in self.db.query("SELECT * FROM rebalances ORDER BY workload")}

    def save_rebalances(self, workloads: Iterable[str],
                        records: Iterable[RebalanceRecord]) -> None:
        """See `Store.save_rebalances`."""
        with self.transaction():
            self.conn.executemany("DELETE FROM rebalances WHERE workload = ?",
                                  [(w,) for w in sorted(set(workloads))])
            self.conn.executemany(
                "INSERT INTO rebalances (workload, trigger, since, moves, planned) "
                "VALUES (?, ?, ?, ?, ?)",
                [(r.workload, r.trigger, r.since, dumps(list(r.moves)), r.planned)
                 for r in records])

    def gangs(self) -> dict[str, GangRecord]:
        """See `Store.gangs`."""
        return {r["workload"]: model.GangRecord(r["workload"], r["size"], r["launched_at"],
                                                r["failures"], r["failed_at"],
                                                r["provisioned_at"], bool(r["relocate"]))
                for r in self.db.query("SELECT * FROM gangs ORDER BY workload")}

    def gang_claims(self) -> dict[str, tuple[int, int]]:
        """See `Store.gang_claims`."""
        return {w: (gang, pods) for w, gang, pods in self.conn.execute(
            "SELECT workload, gang, pods FROM claims WHERE gang > 0 AND requests != '{}' "
            "ORDER BY workload")}

    def save_gangs(self, workloads: Iterable[str], records: Iterable[GangRecord]) -> None:
        """See `Store.save_gangs`."""
        with self.transaction():
            self.conn.executemany("DELETE FROM gangs WHERE workload = ?",
                                  [(w,) for w in sorted(set(workloads))])
            self.conn.executemany(
                "INSERT INTO gangs (workload, size, launched_at, failures, failed_at, "
                "provisioned_at, relocate) VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r.workload, r.size, r.launched_at, r.failures, r.failed_at, r.provisioned_at,
                  int(r.relocate)) for r in records])

    def prune_instances(self, statuses: Sequence[InstanceStatus], before: str, limit: int
                        ) -> int:
        """Delete up to `limit` of the oldest instances with one of `statuses` last updated
        before `before`; returns how many went."""
        return self._prune("instances", statuses, before, limit)

    def prune_launches(self, statuses: Sequence[LaunchStatus], before: str, limit: int
                       ) -> int:
        """Delete up to `limit` of the oldest launches with one of `statuses` last updated
        before `before`; returns how many went."""
        return self._prune("launches", statuses, before, limit)

    def _prune(self, table: str, statuses: Sequence[InstanceStatus] | Sequence[LaunchStatus],
               before: str, limit: int) -> int:
        if not statuses:
            return 0
        marks = ",".join("?" * len(statuses))
        with self.transaction():
            cursor = self.conn.execute(
                f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                f"WHERE status IN ({marks}) AND updated < ? ORDER BY updated LIMIT ?)",
                [*statuses, before, int(limit)])
            return max(0, cursor.rowcount)

    # -- exclusions ------------------------------------------------------------------------

    def exclude(self, pool: str, reason: str, until: str) -> None:
        """Keep the later `until` of the pool's exclusions (with its reason): a shorter one (a
        capacity fault's cool-down) never cuts a longer one (a reclaim notice's) short. One
        statement for both backends (RFC 3339 texts of one format compare as times)."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO exclusions (pool, reason, until) VALUES (?, ?, ?) "
                "ON CONFLICT (pool) DO UPDATE SET "
                "reason = CASE WHEN excluded.until >= exclusions.until "
                "THEN excluded.reason ELSE exclusions.reason END, "
                "until = CASE WHEN excluded.until >= exclusions.until "
                "THEN excluded.until ELSE exclusions.until END", [pool, reason, until])

    def exclusions(self, now: str | None = None) -> list[ExclusionRecord]:
        """Exclusions still in force at `now` (default: the store clock)."""
        moment = now or self.now()
        return [model.ExclusionRecord(pool=r["pool"], reason=r["reason"], until=r["until"])
                for r in self.db.query("SELECT * FROM exclusions WHERE until > ? ORDER BY pool",
                                       [moment])]

    # -- reconcile and Slurm power markers ---------------------------------------------------

    def orphans_seen(self, region: str) -> dict[str, str]:
        """When each orphan server of `region` was first seen (server id → RFC 3339)."""
        return dict(self.conn.execute(
            "SELECT server_id, first_seen FROM orphans_seen WHERE region = ? ORDER BY server_id",
            [region]))

    def orphan_counts(self) -> dict[str, int]:
        """See `Store.orphan_counts`."""
        return dict(self.conn.execute(
            "SELECT region, COUNT(*) FROM orphans_seen GROUP BY region ORDER BY region"))

    def save_orphans_seen(self, region: str, seen: Mapping[str, str]) -> None:
        """Replace `region`'s orphan sightings with `seen`."""
        with self.transaction():
            self.conn.execute("DELETE FROM orphans_seen WHERE region = ?", [region])
            self.conn.executemany(
                "INSERT INTO orphans_seen (region, server_id, first_seen) VALUES (?, ?, ?)",
                [(region, server, first) for server, first in sorted(seen.items())])

    def save_launch_specs(self, specs: Mapping[str, Mapping[str, Any]]) -> None:
        """See `Store.save_launch_specs`."""
        if not specs:
            return
        now = self.now()
        with self.transaction():
            self.conn.executemany(
                "INSERT OR IGNORE INTO launch_specs (hash, body, recorded) VALUES (?, ?, ?)",
                [(h, dumps(dict(body)), now)
                 for h, body in sorted(specs.items())])

    def launch_specs(self, hashes: Iterable[str]) -> dict[str, dict[str, Any]]:
        """See `Store.launch_specs`."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        return {h: loads(body, {}) for h, body in self.conn.execute(
            f"SELECT hash, body FROM launch_specs WHERE hash IN ({marks})", wanted)}

    def save_image_id(self, region: str, name: str, image_id: str) -> None:
        """See `Store.save_image_id`."""
        with self.transaction():
            self.conn.execute(
                "INSERT INTO image_ids (region, name, image_id, seen) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (region, name) DO UPDATE SET image_id = excluded.image_id, "
                "seen = excluded.seen", [region, name, image_id, self.now()])

    def image_ids(self, region: str) -> dict[str, str]:
        """See `Store.image_ids`."""
        return dict(self.conn.execute(
            "SELECT name, image_id FROM image_ids WHERE region = ? ORDER BY name", [region]))

    def suspended_nodes(self) -> frozenset[str]:
        """Slurm nodes handed back by SuspendProgram / ResumeFailProgram, servers not yet gone."""
        return frozenset(node for (node,) in self.conn.execute("SELECT node FROM slurm_suspended"))

    def mark_suspended(self, nodes: Iterable[str]) -> None:
        """Add `nodes` to the suspended Slurm nodes."""
        with self.transaction():
            self.conn.executemany("INSERT OR IGNORE INTO slurm_suspended (node) VALUES (?)",
                                  [(node,) for node in sorted(set(nodes))])

    def clear_suspended(self, nodes: Iterable[str]) -> None:
        """Remove `nodes` from the suspended Slurm nodes (resumed, or their server is gone)."""
        with self.transaction():
            self.conn.executemany("DELETE FROM slurm_suspended WHERE node = ?",
                                  [(node,) for node in sorted(set(nodes))])

    def node_shapes(self) -> dict[str, dict[str, int]]:
        """The shape (resource → amount, as a claim counts it) of every Slurm node seen."""
        shapes: dict[str, dict[str, int]] = {}
        for node, resource, amount in self.conn.execute(
                "SELECT node, resource, amount FROM slurm_node_shapes ORDER BY node, resource"):
            shapes.setdefault(node, {})[resource] = amount
        return shapes

    def save_node_shapes(self, shapes: Mapping[str, Mapping[str, int]]) -> None:
        """Replace the shapes of the nodes named in `shapes`; other nodes keep theirs."""
        with self.transaction():
            self.conn.executemany("DELETE FROM slurm_node_shapes WHERE node = ?",
                                  [(node,) for node in sorted(shapes)])
            self.conn.executemany(
                "INSERT INTO slurm_node_shapes (node, resource, amount) VALUES (?, ?, ?)",
                [(node, resource, amount) for node, shape in sorted(shapes.items())
                 for resource, amount in sorted(shape.items())])

