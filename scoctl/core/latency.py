"""Placement latency, pure: when demand was first seen, when its plan was committed, when its
nodes were all Ready — and the histograms and quantiles those times make (design: Controller).

A workload's claim that grows opens a *sighting* when its new pending demand began (the pods'
``creationTimestamp``, the jobs' submit time: `first_sight`); a plan of that claim version or
a later one closes the decision (`scoctl_placement_decision_seconds`); every planned unit
Ready closes it for good (`scoctl_pending_to_ready_seconds`). A claim that only shrinks
opens nothing (no pod waits), and a sighting whose nodes are not all Ready after `give_up`
seconds is dropped unobserved (its plan could not be met: the plan's own events say why).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scoctl.core.model.latency import BUCKETS, DECISION, READY, Histogram, Sighting
from scoctl.core.model.vocabulary import InstanceStatus


@dataclass(frozen=True)
class Observation:
    metric: str
    workload: str
    seconds: float


@dataclass(frozen=True)
class LatencyDecision:
    """What one look at the sightings decided: observations to record, sightings to keep
    (changed or not) and the workloads whose sighting ends."""

    observations: tuple[Observation, ...] = ()
    keep: tuple[Sighting, ...] = ()
    drop: tuple[str, ...] = ()


def first_sight(created: Iterable[float], since: float | None, now: float) -> float | None:
    """When a claim's new demand began: the earliest creation (pod ``creationTimestamp``, job
    submit time) after `since` — the claim's previous version, which already held the older
    pods and jobs — never later than `now` (the API server's clock may run ahead of this
    host's). None when nothing says (the caller falls back on its own sight)."""
    newer = [t for t in created if since is None or t > since]
    return min(min(newer), now) if newer else None


def sight(existing: Sighting | None, workload: str, version: int, *, grew: bool,
          seen: float) -> Sighting | None:
    """The sighting after `workload`'s claim reached `version` (None: nothing to track).

    Growth keeps the earliest first sight of demand still waiting for its plan; growth after
    the plan starts a new sighting; a shrink changes nothing.
    """
    if not grew:
        return existing
    if existing is not None and existing.planned is None:
        return Sighting(workload, version, min(existing.seen, seen))
    return Sighting(workload, version, seen)


def progress(sightings: Iterable[Sighting], planned: Mapping[str, int],
             ready: Mapping[str, bool], now: float, *, give_up: float) -> LatencyDecision:
    """Close what the plans and the fleet have reached at `now` (Unix seconds).

    `planned`: the claim version each workload's committed plan was made for; `ready`: whether
    every planned unit of the workload is Ready. A workload no longer planned (its claim is
    gone) drops its sighting.
    """
    observations: list[Observation] = []
    keep: list[Sighting] = []
    drop: list[str] = []
    for s in sightings:
        version = planned.get(s.workload)
        current = s
        if s.planned is None:
            if version is None or version < s.claim_version:
                if now - s.seen > give_up:
                    drop.append(s.workload)
                continue
            observations.append(Observation(DECISION, s.workload, max(0.0, now - s.seen)))
            current = Sighting(s.workload, s.claim_version, s.seen, now)
        elif version is None:
            drop.append(s.workload)
            continue
        if ready.get(s.workload, False):
            observations.append(Observation(READY, s.workload, max(0.0, now - s.seen)))
            drop.append(s.workload)
        elif now - s.seen > give_up:
            drop.append(s.workload)
        elif current is not s:
            keep.append(current)
    return LatencyDecision(tuple(observations), tuple(keep), tuple(drop))


def all_ready(planned_units: int, statuses: Sequence[InstanceStatus]) -> bool:
    """Every planned unit of a workload is a Ready instance (and some unit is planned)."""
    ready = sum(1 for s in statuses if s == InstanceStatus.READY)
    return planned_units > 0 and ready >= planned_units


def observe(histogram: Histogram, seconds: float) -> Histogram:
    """The histogram with one more observation."""
    index = bisect.bisect_left(BUCKETS, seconds)  # the first bucket whose bound is ≥ seconds
    counts = list(histogram.counts)
    counts[index] += 1
    return Histogram(tuple(counts), histogram.total + seconds)


def cumulative(histogram: Histogram) -> list[tuple[str, int]]:
    """``(le, count)`` pairs as Prometheus writes them: cumulative, ending with ``+Inf``."""
    out: list[tuple[str, int]] = []
    running = 0
    for bound, n in zip((*BUCKETS, math.inf), histogram.counts, strict=True):
        running += n
        out.append(("+Inf" if bound == math.inf else repr(bound), running))
    return out


def quantile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q` quantile (0 < q ≤ 1) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]
