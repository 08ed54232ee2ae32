"""Capacity buffers as the state shows them (design: Buffers): desired and held chunks per buffer.

Reads the stored claims (the buffer is part of each) and the workload's Ready instances, with
their pools' tiers and their flavors' allocatable from the config; the arithmetic is
`core.buffers.buffer_states`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from scoctl.config.schema import Config
from scoctl.core.buffers import BufferState, buffer_states, short
from scoctl.core.model import ClaimRecord, InstanceRecord, NewEvent, Tier, flavor_allocatable
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.timefmt import parse_rfc3339
from scoctl.state import Store


def buffers_now(config: Config, claims: Iterable[ClaimRecord],
                instances: Iterable[InstanceRecord], now: datetime) -> tuple[BufferState, ...]:
    """Each configured buffer's desired and held chunks at `now`."""
    if not config.buffers:
        return ()
    wanted = {b.workload for b in config.buffers}
    by_claim: dict[str, tuple[int, Mapping[str, int], Mapping[str, int]]] = {
        c.workload: (c.pods, c.requests, c.largest_pod) for c in claims if c.workload in wanted}
    pools = {p.name: p for p in config.pools}
    allocatable: dict[str, list[tuple[Tier, Mapping[str, int]]]] = {}
    for inst in instances:
        if (inst.workload in wanted and inst.status == InstanceStatus.READY
                and not inst.disruption and inst.pool in pools):
            pool = pools[inst.pool]
            flavor = config.flavors.get(pool.flavor)
            if flavor is not None:
                allocatable.setdefault(inst.workload or "", []).append(
                    (pool.tier, flavor_allocatable(flavor, config.node_reserve)))
    return buffer_states(config.buffers, by_claim, allocatable, now)


def record_short(config: Config, store: Store, now: datetime) -> int:
    """Write `BUFFER_SHORT {desired, held, claim_version}` for each buffer still unmet a
    launch timeout after its claim was written, once per claim write; returns how many."""
    if not config.buffers:
        return 0
    claims = {c.workload: c for c in store.claims()}
    states = buffers_now(config, claims.values(), store.instances(), now)
    unmet = [s for s in states if s.short and s.workload in claims]
    if not unmet:
        return 0
    ages = {s.workload: (claims[s.workload].version,
                         (now - parse_rfc3339(claims[s.workload].updated)).total_seconds())
            for s in unmet}
    reported = [s.workload for s in unmet
                if any(e.token == "BUFFER_SHORT"
                       for e in store.events(workload=s.workload,
                                             since=claims[s.workload].updated))]
    events = short(unmet, ages, reported, config.timeouts.launch)
    with store.transaction():
        for workload, detail in events:
            store.append_event(NewEvent(workload, "BUFFER_SHORT", "warning", detail))
    return len(events)
