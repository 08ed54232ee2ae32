"""What the state says the fleet holds: live and in-flight units per workload and pool."""

from __future__ import annotations

from collections.abc import Iterable

from scoctl.core.model import InstanceRecord, LaunchRecord
from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus
from scoctl.core.reconcile import LIVE

LIVE_STATUSES = LIVE  # one definition of a live instance, shared with the reconciler
IN_FLIGHT_LAUNCHES = (LaunchStatus.INTENT, LaunchStatus.CALLED)


def units_of(instances: Iterable[InstanceRecord],
             in_flight: Iterable[LaunchRecord]) -> dict[str, dict[str, int]]:
    """Units per workload and pool: the live `instances` plus the `in_flight` launches (pure).
    A unit being disrupted (design: Disruption: a `disruption` reason set, e.g. expired or unhealthy
    units awaiting their replacement) counts toward neither coverage nor caps, as a noticed
    one (not live): its replacement is launched."""
    out: dict[str, dict[str, int]] = {}
    for inst in instances:
        if inst.status in LIVE_STATUSES and inst.workload and inst.pool \
                and inst.disruption is None:
            pools = out.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    for launch in in_flight:
        pools = out.setdefault(launch.workload, {})
        pools[launch.pool] = pools.get(launch.pool, 0) + launch.count
    return out


def idle_units_of(instances: Iterable[InstanceRecord]) -> dict[str, dict[str, int]]:
    """Idle units per workload and pool (pure): ready instances that run no work
    (`idle_since` set by reconcile) and no disruption holds. The planner gives these back
    first when a claim shrinks (design: Disruption)."""
    out: dict[str, dict[str, int]] = {}
    for inst in instances:
        if inst.status == InstanceStatus.READY and inst.idle_since and inst.workload \
                and inst.pool and inst.disruption is None:
            pools = out.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    return out
