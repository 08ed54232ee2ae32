"""Typed rows of the state file that the controller keeps beside the workloads: each workload's
claim and the metric counters (no hook writes them, so the gate, run before every ``sbatch``,
does not build them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scoctl.core.model.pools import ClaimPart


@dataclass(frozen=True)
class ClaimRecord:
    workload: str
    version: int
    contract: str
    requests: Mapping[str, int]
    largest_pod: Mapping[str, int]
    pods: int
    tolerates_reclaimable: bool
    source: str
    updated: str
    nodes: tuple[str, ...] = ()  # Slurm: the node names this claim asks for
    # pool -> the constraint (Constraints)
    ineligible: Mapping[str, str] = field(default_factory=dict)
    zone_spread: int = 0  # maxSkew of the pods' DoNotSchedule zone spread, 0: none (Constraints)
    # per flavor, what the DaemonSet pods on a new unit request (Constraints)
    overhead: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    parts: tuple[ClaimPart, ...] = ()  # split by where its pods may run (Constraints)
    preferred: Mapping[str, int] = field(default_factory=dict)  # soft terms' weight per pool
    gang: int = 0  # members per gang (design: Gangs), 0: not a gang


@dataclass(frozen=True)
class MetricCounters:
    """What `scoctl run` counts across runs, for its metrics textfile."""

    cloud_calls: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (region, outcome)
    tokens_spent: Mapping[str, int] = field(default_factory=dict)  # by region
    last_success: float | None = None  # Unix time of the last fully successful pass
    # voluntary disruptions started, by (workload, reason, decision: delete | replace)
    disruptions: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    # what each workload's units have cost since metrics began, up to `cost_at` (Unix time)
    cost: Mapping[str, float] = field(default_factory=dict)
    cost_at: float | None = None
