"""Small builders for planner tests: flavors, pools, claims, contracts and the seed scenario."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scoctl.core.model import Claim, Contract, Flavor, Pool, Tier
from scoctl.core.planner import WorkloadPlan

GI = 2**30
RESERVE_CPU = 100  # millicores kept by the node (kubelet, system daemons)
RESERVE_MEMORY = 1 * GI

T1 = Contract(name="T1", floor=0.30, pool_cap=0.15, group_cap=0.30, min_pools=8, strict=False)


def make_flavor(
    name: str,
    vcpus: int,
    ram_gi: int,
    gpus: int = 0,
    reserve: bool = True,
) -> Flavor:
    """A flavor whose allocatable is its capacity minus the node reserve (or unset)."""
    accelerators = {"nvidia.com/gpu": gpus} if gpus else {}
    allocatable: dict[str, int] = {}
    if reserve:
        allocatable = {"cpu": vcpus * 1000 - RESERVE_CPU, "memory": ram_gi * GI - RESERVE_MEMORY}
        allocatable.update(accelerators)
    return Flavor(name=name, vcpus=vcpus, ram=ram_gi * GI, accelerators=accelerators,
                  allocatable=allocatable)


def make_pool(
    name: str,
    flavor: str = "c4.xlarge",
    group: str = "row-a",
    tier: Tier = "reclaimable",
    depth: int = 40,
) -> Pool:
    """A pool in region-a; the AZ is the name's second dotted part when there is one."""
    parts = name.split(".")
    az = parts[-2] if len(parts) > 2 else "az1"
    return Pool(name=name, region="region-a", az=az, flavor=flavor, group=group, tier=tier,
                depth=depth)


def make_claim(
    workload: str = "orders-daily",
    pods: int = 42,
    cpu: int = 4,
    memory_gi: int = 16,
    gpus: int = 0,
    contract: str = "T1",
    tolerates_reclaimable: bool = True,
) -> Claim:
    """`pods` identical pods of `cpu` vCPU and `memory_gi` GiB (plus GPUs) as one claim."""
    pod = {"cpu": cpu * 1000, "memory": memory_gi * GI}
    if gpus:
        pod["nvidia.com/gpu"] = gpus
    return Claim(
        workload=workload,
        contract=contract,
        requests={k: v * pods for k, v in pod.items()},
        largest_pod=pod,
        pods=pods,
        tolerates_reclaimable=tolerates_reclaimable,
    )


SEED_FLAVORS: dict[str, Flavor] = {
    f.name: f
    for f in (
        make_flavor("m5.large", 8, 32),
        make_flavor("c4.xlarge", 16, 64),
        make_flavor("m5.xlarge", 16, 64),
        make_flavor("r5.large", 8, 64),
        make_flavor("c4.2xlarge", 32, 128),
        make_flavor("c5.4xlarge", 64, 256),
        make_flavor("t3.medium", 2, 4),  # cannot hold a 4 vCPU / 16 GiB pod
        make_flavor("g5.xlarge", 16, 64, gpus=1),
    )
}

# Flavors that hold the seed's 4 vCPU / 16 GiB pod, cycled over the seed's pools.
_SEED_CYCLE = ("c4.xlarge", "m5.large", "m5.xlarge", "r5.large", "c4.2xlarge", "c4.xlarge",
               "m5.large", "c5.4xlarge", "g5.xlarge")
SEED_GROUPS = tuple(f"row-{c}" for c in "abcdefghi")  # 9 correlation groups


def seed_pools() -> list[Pool]:
    """The seed scenario's 71 eligible pools in 9 groups (8 committed) plus 2 it cannot use."""
    pools: list[Pool] = []
    for i in range(71):
        group = SEED_GROUPS[i % 9]
        committed = i % 9 == 4
        flavor = "c4.xlarge" if committed else _SEED_CYCLE[(i * 7) % len(_SEED_CYCLE)]
        tier: Tier = "committed" if committed else "reclaimable"
        suffix = "res" if committed else "spot"
        depth = 3 if committed else 10 + (i * 13) % 31
        pools.append(make_pool(f"{flavor}.az{i % 3 + 1}.{suffix}{i:02d}", flavor=flavor,
                               group=group, tier=tier, depth=depth))
    pools.append(make_pool("t3.medium.az1.spot90", flavor="t3.medium", group="row-a"))
    pools.append(make_pool("c4.xlarge.az2.spot91", flavor="c4.xlarge", group="row-b"))
    return pools


def seed_scores(pools: Sequence[Pool]) -> dict[str, float]:
    """Deterministic scores in [0.50, 0.99]; the last pool is left out of the ranking."""
    return {p.name: 0.5 + ((i * 37) % 50) / 100 for i, p in enumerate(pools[:-1])}


def seed_claim() -> Claim:
    """42 pods of 4 vCPU and 16 GiB: 168 vCPU · 672 GiB."""
    return make_claim(pods=42, cpu=4, memory_gi=16)


def held_units(plan: WorkloadPlan) -> dict[str, int]:
    """Units per pool of a plan (what the fleet holds once it is acquired)."""
    return plan.units()


def depth_after(pools: Sequence[Pool], plan: WorkloadPlan,
                current: Mapping[str, int]) -> dict[str, int]:
    """Pool depths once the plan's new units (beyond `current`) have been acquired."""
    units = plan.units()
    return {p.name: max(p.depth - max(units.get(p.name, 0) - current.get(p.name, 0), 0), 0)
            for p in pools}


def with_depth(pools: Sequence[Pool], depth: Mapping[str, int]) -> list[Pool]:
    """The same pools with new depths."""
    return [Pool(p.name, p.region, p.az, p.flavor, p.group, p.tier, depth[p.name]) for p in pools]
