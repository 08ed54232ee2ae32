"""Placement latency tables (design: Controller): open sightings, histograms, the latest samples."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from scoctl.core import model  # a row type is built on first use: a hook builds none of these
from scoctl.state.sqlite.base import SqliteBase

if TYPE_CHECKING:
    from scoctl.core.model import (
        Histogram,
        LatencySample,
        Sighting,
    )

SAMPLES_KEPT = 1000  # latency samples kept per metric (for status's p50 / p99)


class LatencyTables(SqliteBase):
    """`demand_sightings`, `latency_histograms`, `latency_totals`, `latency_samples`."""

    def sightings(self) -> list[Sighting]:
        """See `Store.sightings`."""
        return [model.Sighting(workload=w, claim_version=v, seen=seen, planned=planned)
                for w, v, seen, planned in self.conn.execute(
                    "SELECT workload, claim_version, seen, planned FROM demand_sightings "
                    "ORDER BY workload")]

    def save_sightings(self, sightings: Iterable[Sighting], drop: Iterable[str] = ()) -> None:
        """See `Store.save_sightings`."""
        with self.transaction():
            self.conn.executemany("DELETE FROM demand_sightings WHERE workload = ?",
                                  [[w] for w in drop])
            self.conn.executemany(
                "INSERT OR REPLACE INTO demand_sightings (workload, claim_version, seen, planned)"
                " VALUES (?, ?, ?, ?)",
                [[s.workload, s.claim_version, s.seen, s.planned] for s in sightings])

    def histograms(self) -> dict[str, Histogram]:
        """See `Store.histograms`."""
        from scoctl.core.model.latency import BUCKETS  # with the first histogram read

        counts: dict[str, list[int]] = {}
        for metric, bucket, n in self.conn.execute(
                "SELECT metric, bucket, count FROM latency_histograms"):
            if 0 <= bucket <= len(BUCKETS):
                counts.setdefault(metric, [0] * (len(BUCKETS) + 1))[bucket] = n
        totals = dict(self.conn.execute("SELECT metric, total FROM latency_totals").fetchall())
        return {m: model.Histogram(tuple(c), float(totals.get(m, 0.0))) for m, c in counts.items()}

    def save_latency(self, histograms: Mapping[str, Histogram],
                     samples: Sequence[LatencySample]) -> None:
        """See `Store.save_latency`."""
        with self.transaction():
            for metric, h in histograms.items():
                self.conn.executemany(
                    "INSERT OR REPLACE INTO latency_histograms (metric, bucket, count) "
                    "VALUES (?, ?, ?)", [[metric, i, n] for i, n in enumerate(h.counts)])
                self.conn.execute("INSERT OR REPLACE INTO latency_totals (metric, total) "
                                  "VALUES (?, ?)", [metric, h.total])
            self.conn.executemany(
                "INSERT INTO latency_samples (metric, workload, seconds, at) VALUES (?, ?, ?, ?)",
                [[x.metric, x.workload, x.seconds, x.at] for x in samples])
            for metric in {x.metric for x in samples}:
                self.conn.execute(
                    "DELETE FROM latency_samples WHERE metric = ? AND id <= COALESCE(("
                    "SELECT id FROM latency_samples WHERE metric = ? ORDER BY id DESC "
                    "LIMIT 1 OFFSET ?), -1)", [metric, metric, SAMPLES_KEPT])

    def latency_samples(self, metric: str) -> list[LatencySample]:
        """See `Store.latency_samples`."""
        rows = self.conn.execute(
            "SELECT metric, workload, seconds, at FROM latency_samples WHERE metric = ? "
            "ORDER BY id DESC LIMIT ?", [metric, SAMPLES_KEPT]).fetchall()
        return [model.LatencySample(m, w, s, a) for m, w, s, a in reversed(rows)]
