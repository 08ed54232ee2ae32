"""Capacity buffers as the state shows them (DESIGN §20): desired and held chunks per buffer.

Reads the stored claims (the buffer is part of each) and the workload's Ready instances, with
their flavors' allocatable from the config; the arithmetic is `core.buffers.buffer_states`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from scoctl.config.schema import Config
from scoctl.core.buffers import BufferState, buffer_states
from scoctl.core.model import ClaimRecord, InstanceRecord, flavor_allocatable
from scoctl.core.model.vocabulary import InstanceStatus


def buffers_now(config: Config, claims: Iterable[ClaimRecord],
                instances: Iterable[InstanceRecord], now: datetime) -> tuple[BufferState, ...]:
    """Each configured buffer's desired and held chunks at `now`."""
    if not config.buffers:
        return ()
    wanted = {b.workload for b in config.buffers}
    by_claim: dict[str, tuple[int, Mapping[str, int], Mapping[str, int]]] = {
        c.workload: (c.pods, c.requests, c.largest_pod) for c in claims if c.workload in wanted}
    flavors = {p.name: p.flavor for p in config.pools}
    allocatable: dict[str, list[Mapping[str, int]]] = {}
    for inst in instances:
        if (inst.workload in wanted and inst.status == InstanceStatus.READY
                and not inst.disruption and inst.pool in flavors):
            flavor = config.flavors.get(flavors[inst.pool])
            if flavor is not None:
                allocatable.setdefault(inst.workload or "", []).append(
                    flavor_allocatable(flavor, config.node_reserve))
    return buffer_states(config.buffers, by_claim, allocatable, now)
