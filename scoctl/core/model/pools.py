"""Plain frozen values shared by the pure decisions and the stages.

Quantities are canonical integers (see `scoctl.core.quantity`): cpu in millicores, memory in
bytes, accelerators as counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scoctl.core.model.vocabulary import PartSource
from scoctl.core.quantity import Resources

Tier = Literal["committed", "reclaimable"]
Source = Literal["k8s", "slurm"]
Kind = Literal["job", "deployment", "inference"]
Isolation = Literal["exclusive", "shared"]

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9.-]{0,46}$")
KINDS: tuple[Kind, ...] = ("job", "deployment", "inference")
SOURCES: tuple[Source, ...] = ("k8s", "slurm")
TIERS: tuple[Tier, ...] = ("committed", "reclaimable")
# workloads[].isolation: exclusive units carry the workload's taint, shared ones do not
ISOLATIONS: tuple[Isolation, ...] = ("exclusive", "shared")
# the one default of the config's planner.depth_premium (`Config`): the share of a pool's score
# its depth may add when the planner orders pools (`core.planner`)
DEFAULT_DEPTH_PREMIUM = 0.05


def is_slug(value: str) -> bool:
    """A workload slug fits `sco:workload=<slug>` inside Nova's 60-character tag limit."""
    return bool(SLUG_RE.match(value))


@dataclass(frozen=True)
class Limits:
    """At most this much (`workloads[].limits`, design: Constraints): `resources`
    in canonical units (cpu millicores, memory bytes, accelerators counts) summed over the
    units' flavors' capacity, and `units` instances; what is absent is not limited."""

    resources: Mapping[str, int] = field(default_factory=dict)
    units: int | None = None
    # the workload's own limits when these are a share of them (a zone's of a spread, a
    # part's of a claim): what a limit reached is named by
    share_of: Limits | None = None

    def __bool__(self) -> bool:
        return bool(self.resources) or self.units is not None


@dataclass(frozen=True)
class Flavor:
    """A Nova flavor as scoctl plans with it."""

    name: str
    vcpus: int
    ram: int  # bytes
    accelerators: Mapping[str, int] = field(default_factory=dict)
    allocatable: Resources = field(default_factory=dict)  # capacity minus the node reserve
    price: float | None = None  # per unit-hour (showback: `scoctl cost`); None: unpriced

    @property
    def capacity(self) -> dict[str, int]:
        out = {"cpu": self.vcpus * 1000, "memory": self.ram}
        out.update({k: v for k, v in self.accelerators.items() if v})
        return out


def flavor_allocatable(flavor: Flavor, node_reserve: Resources | None = None) -> dict[str, int]:
    """What one instance of `flavor` offers to pods (design: Planner): ``flavors[].allocatable``
    when
    set, else its capacity minus `node_reserve` (never below zero), else its capacity."""
    if flavor.allocatable:
        return dict(flavor.allocatable)
    reserve = node_reserve or {}
    return {k: max(0, v - reserve.get(k, 0)) for k, v in flavor.capacity.items()}


@dataclass(frozen=True)
class Pool:
    """One place instances can come from: a flavor in an availability zone of a region.
    `labels` are put on its units' Nodes (`core.constraints.unit_labels`); `limits` cap the
    units every workload together holds in it (`pools[].limits`, design: Constraints)."""

    name: str
    region: str
    az: str
    flavor: str
    group: str
    tier: Tier
    depth: int
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    limits: Limits = field(default_factory=Limits, hash=False)
    price: float | None = None  # per unit-hour, where the pool's differs from its flavor's


@dataclass(frozen=True)
class Contract:
    """The rules for a tier (design: Words, Planner)."""

    name: str
    floor: float = 0.30
    pool_cap: float = 0.15
    group_cap: float = 0.30
    min_pools: int = 8
    strict: bool = False


@dataclass(frozen=True)
class ClaimPart:
    """The pods of a claim that may run in the same pools (design: Constraints: pods of a workload
    whose constraints differ are separate claims, `<workload>/<n>` with n from 1): their
    requests, largest pod, count, the pools their placement rules out (each with the
    constraint) and their zone spread's maxSkew (0: none). A part of `source` buffer is the
    workload's capacity buffer (design: Buffers, `<workload>/buffer`): its `pods` are its chunks,
    its `largest_pod` one chunk, its `ineligible` the pools its tier rules out."""

    requests: Resources
    largest_pod: Resources
    pods: int
    ineligible: Mapping[str, str] = field(default_factory=dict, hash=False)
    zone_spread: int = 0
    preferred: Mapping[str, int] = field(default_factory=dict, hash=False)
    source: PartSource = PartSource.PODS


def part_name(workload: str, n: int, part: ClaimPart) -> str:
    """How plans and views name the `n`th part (from 1) of `workload`'s claim: `<workload>/<n>`,
    and `<workload>/buffer` for its buffer (at most one per workload)."""
    return f"{workload}/buffer" if part.source == PartSource.BUFFER else f"{workload}/{n}"


@dataclass(frozen=True)
class Claim:
    """A workload's whole normalised demand (never instance counts)."""

    workload: str
    contract: str
    requests: Resources
    largest_pod: Resources
    pods: int = 1
    version: int = 0
    tolerates_reclaimable: bool = True
    # pools the pods' placement rules out (design: Constraints), each with the constraint that does
    ineligible: Mapping[str, str] = field(default_factory=dict, hash=False)
    limits: Limits = field(default_factory=Limits, hash=False)  # workloads[].limits
    # the maxSkew of the pods' DoNotSchedule topology spread over topology.kubernetes.io/zone
    # (0: none): the planner splits the claim's coverage across the eligible zones (Constraints)
    zone_spread: int = 0
    # per flavor, what the DaemonSet pods that would land on a new unit request (Constraints)
    overhead: Mapping[str, Resources] = field(default_factory=dict, hash=False)
    # the claim split by where its pods may run, when they differ (Constraints; two or more, else
    # none): each is planned in its own pools, the plan is their sum
    parts: tuple[ClaimPart, ...] = field(default=(), hash=False)
    # per eligible pool, the summed weight of the pods' preferred node affinity terms it
    # matches (Constraints: soft terms only order pools, the best-matched first)
    preferred: Mapping[str, int] = field(default_factory=dict, hash=False)
    # design: Gangs: members per gang (0: not a gang); `pods // gang` gangs, one member per unit
    gang: int = 0
    # design: Buffers: the claim is a buffer's part (`parts`), planned as a claim of its own
    buffer: bool = False
