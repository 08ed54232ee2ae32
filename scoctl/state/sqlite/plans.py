"""Plan generations and what the plan stage keeps between passes (dirty marks, ranking)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from scoctl.core import model  # a row type is built on first use: a hook builds none of these
from scoctl.state.sqlite.base import SqliteBase, dumps, loads

if TYPE_CHECKING:
    from scoctl.core.model import (
        PlanGeneration,
        PlanUnitRecord,
        PlanWorkloadRecord,
        RankingCache,
    )


class PlanTables(SqliteBase):
    """Plan generations, per-workload plans and units; dirty marks; the last rankings."""

    def latest_generation(self) -> PlanGeneration | None:
        row = self._one("SELECT * FROM plan_generations ORDER BY generation DESC LIMIT 1")
        if row is None:
            return None
        return model.PlanGeneration(generation=row["generation"], created=row["created"],
                              ranking=row["ranking"], changed=tuple(loads(row["changed"], [])),
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
            held.setdefault(workload, []).append(model.PlanUnitRecord(
                pool=pool, tier=tier, group=grp, units=count, share=share, score=score))
        out = {}
        for (workload, generation, claim_version, contract, ranking, feasible, degraded,
             reasons, exclusions, explained) in self.conn.execute(
                "SELECT workload, generation, claim_version, contract, ranking, feasible, "
                "degraded, reasons, exclusions, " + ("explain" if explain else "'[]'")
                + " FROM plan_workloads" + where + " ORDER BY workload", params):
            out[workload] = model.PlanWorkloadRecord(
                workload=workload, generation=generation, claim_version=claim_version,
                contract=contract, ranking=ranking, feasible=bool(feasible),
                degraded=bool(degraded),
                reasons=tuple(loads(reasons, [])) if reasons != "[]" else (),
                pools=tuple(held.get(workload, ())),
                exclusions=tuple(loads(exclusions, [])) if exclusions != "[]" else (),
                explain=tuple(loads(explained, [])) if explained != "[]" else ())
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
                [self.now(), ranking, dumps(sorted({p.workload for p in plans} | set(removed))),
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
                     int(plan.feasible), int(plan.degraded), dumps(list(plan.reasons)),
                     dumps(list(plan.exclusions)), dumps(list(plan.explain))])
                self.conn.executemany(
                    "INSERT INTO plan_units (workload, pool, tier, grp, units, share, score) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [(plan.workload, u.pool, u.tier, u.group, u.units, u.share, u.score)
                     for u in plan.pools if u.units > 0])
            return generation

    # -- plan bookkeeping -------------------------------------------------------------------

    def mark_dirty(self, workloads: Iterable[str], reason: str) -> None:
        """Ask the next `plan` to re-plan these workloads (units lost, pool excluded, ...)."""
        names = sorted(set(workloads))
        if not names:
            return
        with self.transaction():
            self.conn.executemany(
                "INSERT OR REPLACE INTO plan_dirty (workload, reason) VALUES (?, ?)",
                [(name, reason) for name in names])

    def dirty(self) -> dict[str, str]:
        """Workloads marked for re-planning, with the reason."""
        return dict(self.conn.execute("SELECT workload, reason FROM plan_dirty ORDER BY workload"))

    def clear_dirty(self, names: Iterable[str]) -> None:
        """The plan stage re-planned these workloads."""
        with self.transaction():
            self.conn.executemany("DELETE FROM plan_dirty WHERE workload = ?",
                                  [(name,) for name in sorted(set(names))])

    def last_scores(self) -> dict[str, float]:
        """The ranking scores the last committed plan pass used, by pool ({} before any)."""
        return dict(self.conn.execute("SELECT pool, score FROM ranking_last_scores ORDER BY pool"))

    def save_last_scores(self, scores: Mapping[str, float]) -> None:
        """Replace the scores the last plan pass used."""
        with self.transaction():
            self.conn.execute("DELETE FROM ranking_last_scores")
            self.conn.executemany("INSERT INTO ranking_last_scores (pool, score) VALUES (?, ?)",
                                  sorted(scores.items()))

    def last_good_ranking(self) -> RankingCache | None:
        """The last ranking read from a URL, if one was ever read."""
        row = self.conn.execute(
            "SELECT url, ranking_id, fetched FROM ranking_last_good").fetchone()
        if row is None:
            return None
        scores = dict(self.conn.execute(
            "SELECT pool, score FROM ranking_last_good_scores ORDER BY pool"))
        return model.RankingCache(url=row[0], id=row[1], fetched=row[2], scores=scores)

    def save_last_good_ranking(self, cache: RankingCache) -> None:
        """Replace the last good URL ranking."""
        with self.transaction():
            self.conn.execute(
                "INSERT OR REPLACE INTO ranking_last_good (only_row, url, ranking_id, fetched) "
                "VALUES (1, ?, ?, ?)", [cache.url, cache.id, cache.fetched])
            self.conn.execute("DELETE FROM ranking_last_good_scores")
            self.conn.executemany(
                "INSERT INTO ranking_last_good_scores (pool, score) VALUES (?, ?)",
                sorted(cache.scores.items()))

