"""Blast radius (design: Notices), pure: what a workload loses if one of its pools, or one of its
correlation groups, were reclaimed at once — and whether its floor and its coverage would
still hold.

The input is the plan's rows (pool, tier, group, units) with each row's coverage of the claim
(`Holding`): from the planner's own `WorkloadPlan`, or computed from a stored plan, its claim
and the flavors (`holdings_of_record`). `blast_radius` folds them per pool and per group.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scoctl.core.model import Claim, Flavor, PlanWorkloadRecord, Pool
from scoctl.core.planner import EPS, WorkloadPlan, coverage


@dataclass(frozen=True)
class Holding:
    """One plan row: `units` of a pool, covering `coverage` of the claim together."""

    pool: str
    tier: str
    group: str
    units: int
    coverage: float


@dataclass(frozen=True)
class BlastLine:
    """What losing one pool (or one group) at once does to the workload: `lost` is the share
    of the plan's capacity that goes; `coverage_after` / `committed_after` what is left, as
    fractions of the claim."""

    scope: Literal["pool", "group"]
    name: str
    units: int
    lost: float
    coverage_after: float
    committed_after: float
    coverage_holds: bool
    floor_holds: bool

    def as_json(self) -> dict[str, Any]:
        return {self.scope: self.name, "units": self.units, "lost": round(self.lost, 4),
                "coverage_after": round(self.coverage_after, 4),
                "committed_after": round(self.committed_after, 4),
                "coverage_holds": self.coverage_holds, "floor_holds": self.floor_holds}


@dataclass(frozen=True)
class Blast:
    """The blast radius of one workload's plan."""

    coverage: float
    committed: float
    floor: float
    pools: tuple[BlastLine, ...]
    groups: tuple[BlastLine, ...]

    def as_json(self) -> dict[str, Any]:
        return {"coverage": round(self.coverage, 4), "committed": round(self.committed, 4),
                "floor": self.floor, "pools": [b.as_json() for b in self.pools],
                "groups": [b.as_json() for b in self.groups]}


def holdings_of_plan(plan: WorkloadPlan) -> list[Holding]:
    """The planner's own rows, with the coverage it computed."""
    return [Holding(p.pool, p.tier, p.group, p.units, p.coverage) for p in plan.pools
            if p.units > 0]


def holdings_of_record(record: PlanWorkloadRecord, claim: Claim,
                       flavors: Mapping[str, Flavor], pools: Iterable[Pool]) -> list[Holding]:
    """A stored plan's rows, each unit covering what its flavor covers of `claim`."""
    flavor_of = {p.name: p.flavor for p in pools}
    out = []
    for row in record.pools:
        flavor = flavors.get(flavor_of.get(row.pool, ""))
        per_unit = coverage(flavor, claim) if flavor is not None else 0.0
        out.append(Holding(row.pool, row.tier, row.group, row.units, row.units * per_unit))
    return out


def _line(scope: Literal["pool", "group"], name: str, lost: Sequence[Holding], total: float,
          committed: float, floor: float) -> BlastLine:
    gone = math.fsum(h.coverage for h in lost)
    gone_committed = math.fsum(h.coverage for h in lost if h.tier == "committed")
    after, committed_after = max(0.0, total - gone), max(0.0, committed - gone_committed)
    return BlastLine(scope=scope, name=name, units=sum(h.units for h in lost),
                     lost=gone / total if total > 0 else 0.0, coverage_after=after,
                     committed_after=committed_after, coverage_holds=after >= 1 - EPS,
                     floor_holds=committed_after >= floor - EPS)


def blast_radius(holdings: Sequence[Holding], floor: float) -> Blast:
    """Per pool and per correlation group holding units: the share of capacity lost if it
    were reclaimed at once, and whether coverage (≥ 1) and the floor (committed coverage ≥
    `floor`) would hold. Largest loss first, then by name."""
    held = [h for h in holdings if h.units > 0]
    total = math.fsum(h.coverage for h in held)
    committed = math.fsum(h.coverage for h in held if h.tier == "committed")
    pools = [_line("pool", h.pool, [h], total, committed, floor) for h in held]
    groups = [_line("group", g, [h for h in held if h.group == g], total, committed, floor)
              for g in sorted({h.group for h in held})]

    def order(line: BlastLine) -> tuple[float, str]:
        return (-line.lost, line.name)

    return Blast(coverage=total, committed=committed, floor=floor,
                 pools=tuple(sorted(pools, key=order)), groups=tuple(sorted(groups, key=order)))


def blast_radii(records: Mapping[str, PlanWorkloadRecord], claims: Iterable[Claim],
                plans: Mapping[str, WorkloadPlan], flavors: Mapping[str, Flavor],
                pools: Iterable[Pool], floors: Mapping[str, float]) -> dict[str, Blast]:
    """The blast radius of every plan in `records`: from the planner's `plans` where this run
    made them, else from the stored rows and the workload's claim (a plan whose claim is
    unknown gets none). `floors[contract]` is each contract's floor."""
    by_name = {c.workload: c for c in claims}
    pool_list = list(pools)
    out: dict[str, Blast] = {}
    for name, record in records.items():
        if name in plans:
            holdings = holdings_of_plan(plans[name])
        elif name in by_name:
            holdings = holdings_of_record(record, by_name[name], flavors, pool_list)
        else:
            continue
        out[name] = blast_radius(holdings, floors.get(record.contract, 0.0))
    return out
