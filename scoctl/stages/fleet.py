"""What the state says the fleet holds: live and in-flight units per workload and pool."""

from __future__ import annotations

from scoctl.state import Store

LIVE_STATUSES = frozenset({"requested", "building", "active", "ready"})
IN_FLIGHT_LAUNCHES = ("intent", "called")


def current_units(store: Store) -> dict[str, dict[str, int]]:
    """Units each workload holds per pool: live instances plus launches not yet recorded."""
    out: dict[str, dict[str, int]] = {}
    for inst in store.instances():
        if inst.status in LIVE_STATUSES and inst.workload and inst.pool:
            pools = out.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    for launch in store.launches(status=IN_FLIGHT_LAUNCHES):
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
