"""Capacity buffers (design: Buffers): Ready headroom a workload keeps for the pods to come."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scoctl.core.cron import Cron
from scoctl.core.model.pools import Limits

BufferTier = Literal["any", "committed", "reclaimable"]
BUFFER_TIERS: tuple[BufferTier, ...] = ("any", "committed", "reclaimable")


@dataclass(frozen=True)
class Buffer:
    """`buffers[]`: keep `desired` chunks of capacity for `workload` beyond its pods, where
    desired = min(max(`replicas`, ⌈`percentage`% × the workload's pods⌉), `limits`) and 0
    outside the window (`schedule` for `duration` seconds in `time_zone`; always without a
    schedule). `chunk` is in canonical units (cpu millicores, memory bytes, accelerator
    counts); None: the workload's largest pod. `limits` bounds the chunks' resources summed,
    and `limits.units` the number of chunks. `tier`: the pools the chunks are planned in —
    any of the workload's eligible pools, or only those of that pool tier."""

    workload: str
    chunk: Mapping[str, int] | None = None
    replicas: int = 0
    percentage: float = 0.0
    limits: Limits = field(default_factory=Limits)
    tier: BufferTier = "any"
    schedule: Cron | None = None
    duration: float | None = None
    time_zone: str = "UTC"
