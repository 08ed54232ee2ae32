"""The acquirer's decision for one region (design: Acquirer), pure: what to launch, and how much of
it
the quota allows.

`decide_launches(snapshot, scope)` reads the latest plan rows, the live and in-flight units and
the Slurm node names claims ask for, and returns the launches (`core.diff.launches_needed`:
only pools that gain units, one launch per Slurm node name). `core.diff.clamp_to_headroom` then
clamps them to the region's quota headroom — a separate step because reading the headroom is a
cloud call, made only when something is to be launched.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from scoctl.core.diff import LaunchPlan, launches_needed
from scoctl.core.fleet import LIVE_STATUSES, units_of
from scoctl.core.model import (
    InstanceRecord,
    LaunchRecord,
    PlanWorkloadRecord,
    Pool,
)


@dataclass(frozen=True)
class LaunchSnapshot:
    """What acquire reads for one region: the latest plan rows, the instances and in-flight
    launch intents, the Slurm node names each claim asks for, and the region's pools.

    `claim_nodes` holds every Slurm claim, with the node names Slurm asked for (none yet for a
    job still pending): a Slurm claim launches one server per name no unit holds, never an
    unnamed one — its slurmd could register under no name (design: Operating, Gangs: a pending
    gang's
    members are the nodes Slurm allocates and resumes by name)."""

    plans: Mapping[str, PlanWorkloadRecord]
    instances: tuple[InstanceRecord, ...] = ()
    in_flight: tuple[LaunchRecord, ...] = ()
    claim_nodes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    pools: Mapping[str, Pool] = field(default_factory=dict)


def region_targets(plans: Mapping[str, PlanWorkloadRecord], pools: Collection[str],
                   scope: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """Planned units per workload in the region's `pools` (of the `scope` workloads only, when
    given); workloads planning nothing there are left out."""
    out: dict[str, dict[str, int]] = {}
    for name, record in plans.items():
        if scope is not None and name not in scope:
            continue
        units = {u.pool: u.units for u in record.pools if u.pool in pools}
        if units:
            out[name] = units
    return out


def held_node_names(instances: Sequence[InstanceRecord],
                    in_flight: Sequence[LaunchRecord]) -> dict[str, set[str]]:
    """Slurm node names each workload's live instances and in-flight launches hold."""
    held: dict[str, set[str]] = {}
    for inst in instances:
        if inst.workload and inst.node_name and inst.status in LIVE_STATUSES:
            held.setdefault(inst.workload, set()).add(inst.node_name)
    for launch in in_flight:
        held.setdefault(launch.workload, set()).update(launch.node_names)
    return held


def decide_launches(snapshot: LaunchSnapshot,
                    scope: Collection[str] | None = None) -> list[LaunchPlan]:
    """Launches that bring live + in-flight units up to the plan in this region (of the `scope`
    workloads only, when given: a same-run fallback re-launches just the re-planned ones)."""
    targets = region_targets(snapshot.plans, snapshot.pools, scope)
    if not targets:
        return []
    claim_nodes = {name: list(nodes) for name, nodes in snapshot.claim_nodes.items()
                   if name in targets}
    held = held_node_names(snapshot.instances, snapshot.in_flight) if claim_nodes else {}
    return launches_needed(targets, units_of(snapshot.instances, snapshot.in_flight),
                           snapshot.pools,
                           {name: snapshot.plans[name].generation for name in targets},
                           claim_nodes=claim_nodes, held_nodes=held)
