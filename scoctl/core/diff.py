"""The plan/fleet diff for `acquire` and `reconcile` (pure).

`diff_plan` says which pools gain units (one launch per workload and pool; Slurm CLOUD nodes,
which need their own names, one launch per node), `clamp_to_headroom` fits the launches into
Nova's quota headroom (instances, cores, RAM) and reports the shortfall, and `surplus` says
which units the plan no longer needs (candidates for scale-down).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from scoctl.core.model import Flavor, Headroom, Pool

Key = tuple[str, str]  # (workload, pool)


@dataclass(frozen=True)
class LaunchPlan:
    """Units of one pool for one workload to create in one multi-create call."""

    workload: str
    pool: str
    region: str
    az: str
    flavor: str
    tier: str
    generation: int
    count: int
    node_names: tuple[str, ...] = ()  # Slurm CLOUD nodes: one name per instance (count == 1)


@dataclass(frozen=True)
class Shortfall:
    workload: str
    pool: str
    wanted: int
    allowed: int
    limit: str  # instances | cores | ram


def diff_plan(targets: Mapping[str, Mapping[str, int]], live: Mapping[Key, int],
              pools: Mapping[str, Pool], generations: Mapping[str, int], *,
              node_names: Mapping[str, Sequence[str]] | None = None) -> list[LaunchPlan]:
    """Launches that bring `live` units (including in-flight ones) up to the plan `targets`.

    `targets[workload][pool]` is the planned unit count. `node_names[workload]` lists Slurm node
    names still waiting for a server: each becomes its own launch of one instance, handed out
    over the workload's gaining pools in pool order. Pools that do not gain get no launch.
    """
    launches: list[LaunchPlan] = []
    for workload in sorted(targets):
        names = list((node_names or {}).get(workload, ()))
        for pool_name in sorted(targets[workload]):
            gain = targets[workload][pool_name] - live.get((workload, pool_name), 0)
            if gain <= 0 or pool_name not in pools:
                continue
            pool = pools[pool_name]
            base = LaunchPlan(workload=workload, pool=pool_name, region=pool.region, az=pool.az,
                              flavor=pool.flavor, tier=pool.tier,
                              generation=generations.get(workload, 0), count=gain)
            if names:
                for _ in range(gain):
                    if not names:
                        break
                    launches.append(replace(base, count=1, node_names=(names.pop(0),)))
            else:
                launches.append(base)
    return launches


def waiting_node_names(claim_nodes: Mapping[str, Sequence[str]],
                       held: Mapping[str, Collection[str]]) -> dict[str, list[str]]:
    """Slurm node names each workload asks for that no live or in-flight unit holds."""
    out: dict[str, list[str]] = {}
    for workload, names in claim_nodes.items():
        waiting = [n for n in names if n not in held.get(workload, ())]
        if waiting:
            out[workload] = waiting
    return out


def launches_needed(targets: Mapping[str, Mapping[str, int]],
                    units: Mapping[str, Mapping[str, int]], pools: Mapping[str, Pool],
                    generations: Mapping[str, int], *,
                    claim_nodes: Mapping[str, Sequence[str]] | None = None,
                    held_nodes: Mapping[str, Collection[str]] | None = None
                    ) -> list[LaunchPlan]:
    """What acquire launches: `diff_plan` of the plan `targets` against the live and in-flight
    `units`, where a Slurm claim (`claim_nodes`) launches only for node names no unit holds
    yet (`held_nodes`) — none waiting, nothing to launch."""
    live = {(w, p): n for w, per_pool in units.items() for p, n in per_pool.items()}
    claim_nodes = claim_nodes or {}
    names = waiting_node_names(claim_nodes, held_nodes or {})
    for name in claim_nodes:
        names.setdefault(name, [])
    return [plan for plan in diff_plan(targets, live, pools, generations, node_names=names)
            if plan.workload not in claim_nodes or plan.node_names]


def clamp_to_headroom(launches: Sequence[LaunchPlan], flavors: Mapping[str, Flavor],
                      headroom: Headroom) -> tuple[list[LaunchPlan], list[Shortfall]]:
    """Shrink launches, in order, to what the quota allows; report every shortfall."""
    left_i, left_c, left_r = headroom.instances, headroom.cores, headroom.ram_mb
    out: list[LaunchPlan] = []
    short: list[Shortfall] = []
    for launch in launches:
        flavor = flavors[launch.flavor]
        ram_mb = -(-flavor.ram // 2**20)
        limits = {"instances": left_i if left_i is not None else launch.count,
                  "cores": (left_c // flavor.vcpus) if left_c is not None else launch.count,
                  "ram": (left_r // ram_mb) if left_r is not None and ram_mb else launch.count}
        allowed = max(0, min(launch.count, *limits.values()))
        if allowed < launch.count:
            limit = min(limits, key=lambda k: limits[k])
            short.append(Shortfall(launch.workload, launch.pool, launch.count, allowed, limit))
        if allowed:
            out.append(replace(launch, count=allowed))
            if left_i is not None:
                left_i -= allowed
            if left_c is not None:
                left_c -= allowed * flavor.vcpus
            if left_r is not None:
                left_r -= allowed * ram_mb
    return out, short


def surplus(targets: Mapping[str, Mapping[str, int]], live: Mapping[Key, int]) -> dict[Key, int]:
    """Units above the plan, per (workload, pool)."""
    out = {}
    for (workload, pool), count in sorted(live.items()):
        want = targets.get(workload, {}).get(pool, 0)
        if count > want:
            out[(workload, pool)] = count - want
    return out
