"""Placement latency rows: open sightings of demand and the histograms they end in."""

from __future__ import annotations

from dataclasses import dataclass

# Karpenter's duration buckets (controller-runtime's), reaching out to node boot times.
BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
    0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0,
    15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0, 300.0, 600.0, 1200.0,
)
DECISION = "placement_decision"  # first sight of pending demand → its committed plan
READY = "pending_to_ready"  # first sight of pending demand → every planned node Ready
METRICS = (DECISION, READY)


@dataclass(frozen=True)
class Sighting:
    """Demand of a workload not yet planned (or planned, its nodes not all Ready yet).

    `seen` and `planned` are Unix times; `claim_version` is the claim version the demand
    arrived in (a plan of that version or a later one decides it).
    """

    workload: str
    claim_version: int
    seen: float
    planned: float | None = None


@dataclass(frozen=True)
class Histogram:
    """A cumulative Prometheus-style histogram: `counts[i]` observations fell in bucket i
    (``≤ BUCKETS[i]``; the last one is +Inf), not cumulated."""

    counts: tuple[int, ...] = (0,) * (len(BUCKETS) + 1)
    total: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class LatencySample:
    """One observation, kept (the latest ones) for `scoctl status`'s p50 / p99."""

    metric: str
    workload: str
    seconds: float
    at: float
