"""What the state says the fleet holds: live and in-flight units per workload and pool."""

from __future__ import annotations

from collections.abc import Iterable

from scoctl.core.reconcile import LIVE
from scoctl.state import InstanceRecord, LaunchRecord, Store

LIVE_STATUSES = LIVE  # one definition of a live instance, shared with the reconciler
IN_FLIGHT_LAUNCHES = ("intent", "called")


def current_units(store: Store) -> dict[str, dict[str, int]]:
    """Units each workload holds per pool: live instances plus launches not yet recorded."""
    return units_of(store.instances(), store.launches(status=IN_FLIGHT_LAUNCHES))


def units_of(instances: Iterable[InstanceRecord],
             in_flight: Iterable[LaunchRecord]) -> dict[str, dict[str, int]]:
    """Units per workload and pool: the live `instances` plus the `in_flight` launches (pure)."""
    out: dict[str, dict[str, int]] = {}
    for inst in instances:
        if inst.status in LIVE_STATUSES and inst.workload and inst.pool:
            pools = out.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    for launch in in_flight:
        pools = out.setdefault(launch.workload, {})
        pools[launch.pool] = pools.get(launch.pool, 0) + launch.count
    return out


DIRTY_KEY = "plan:dirty"


def mark_dirty(store: Store, workloads: set[str], reason: str) -> None:
    """Ask the next `plan` to re-plan these workloads (units lost, pool excluded, ...)."""
    if not workloads:
        return
    dirty = dict(store.get_kv(DIRTY_KEY, {}))
    for name in workloads:
        dirty[name] = reason
    store.set_kv(DIRTY_KEY, dirty)


def take_dirty(store: Store) -> dict[str, str]:
    return dict(store.get_kv(DIRTY_KEY, {}))


def clear_dirty(store: Store, names: set[str]) -> None:
    dirty = {k: v for k, v in dict(store.get_kv(DIRTY_KEY, {})).items() if k not in names}
    store.set_kv(DIRTY_KEY, dirty)
