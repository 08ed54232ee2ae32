"""Showback (pure): what the fleet cost over a window, and how much of it the demand used.

A unit costs its pool's `price` per hour when the pool sets one, else its flavor's `price` times
its tier's `price_factor` (`tiers: {reclaimable: {price_factor: 0.3}}`), else it has no price
(unit-hours are still counted). A unit lives from its creation to its deletion (or now), the
window clips it. Efficiency is requested over provisioned, per resource: the workload's claim
(a step function over its recorded versions) against the allocatable of its units, both
integrated over the window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from scoctl.core.model import Flavor, InstanceRecord, Pool
from scoctl.core.model.controls import ClaimStep
from scoctl.core.model.pools import flavor_allocatable
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.timefmt import parse_rfc3339

By = Literal["workload", "pool", "tier"]
BY: tuple[By, ...] = ("workload", "pool", "tier")
RESOURCES = ("cpu", "memory")
HOUR = 3600.0


@dataclass(frozen=True)
class Prices:
    """Prices per hour: by flavor, by pool (overriding the flavor's), and each tier's factor on
    a flavor's price (absent: 1)."""

    flavors: Mapping[str, float] = field(default_factory=dict)
    pools: Mapping[str, float] = field(default_factory=dict)
    tier_factor: Mapping[str, float] = field(default_factory=dict)

    def of(self, pool: Pool) -> float | None:
        """The hourly price of one unit of `pool`, or None when nothing prices it."""
        if pool.name in self.pools:
            return self.pools[pool.name]
        base = self.flavors.get(pool.flavor)
        return None if base is None else base * self.tier_factor.get(pool.tier, 1.0)


@dataclass(frozen=True)
class Lifetime:
    """One unit's life: whose, which pool, from when to when (None: still alive)."""

    workload: str
    pool: str
    start: datetime
    end: datetime | None


@dataclass(frozen=True)
class CostLine:
    """One row of `scoctl cost`: unit-hours, cost (None when some unit has no price), and, by
    workload, requested and provisioned resource-hours with their ratio per resource."""

    key: str
    unit_hours: float
    cost: float | None
    provisioned: Mapping[str, float] = field(default_factory=dict)  # resource-hours
    requested: Mapping[str, float] = field(default_factory=dict)
    efficiency: Mapping[str, float | None] = field(default_factory=dict)


def lifetimes(instances: Iterable[InstanceRecord]) -> list[Lifetime]:
    """The lives of the workload units the state records: a deleted one ended when it was
    last updated (its deletion)."""
    return [Lifetime(i.workload, i.pool, parse_rfc3339(i.created),
                     parse_rfc3339(i.updated) if i.status == InstanceStatus.DELETED else None)
            for i in instances if i.workload and i.pool]


def _hours(start: datetime, end: datetime | None, since: datetime, now: datetime) -> float:
    lo, hi = max(start, since), min(end or now, now)
    return max(0.0, (hi - lo).total_seconds() / HOUR)


def _requested(steps: Sequence[ClaimStep], since: datetime, now: datetime) -> dict[str, float]:
    """Resource-hours a workload's claim requested over [since, now] (its steps in time order;
    the last one before `since` holds at its start)."""
    out = dict.fromkeys(RESOURCES, 0.0)
    for step, after in zip(steps, [*steps[1:], None][:len(steps)], strict=True):
        hours = _hours(step.at, after.at if after else None, since, now)
        for res in RESOURCES:
            out[res] += step.requests.get(res, 0) * hours
    return out


def _key(life: Lifetime, pool: Pool, by: By) -> str:
    return {"workload": life.workload, "pool": life.pool, "tier": pool.tier}[by]


def costs(lives: Iterable[Lifetime], *, pools: Mapping[str, Pool], flavors: Mapping[str, Flavor],
          prices: Prices, since: datetime, now: datetime, by: By = "workload",
          claims: Iterable[ClaimStep] = (), reserve: Mapping[str, int] | None = None,
          ) -> list[CostLine]:
    """The cost lines of [since, now], one per `by` key with a unit alive in the window (units
    of pools the config no longer names are left out), sorted by key."""
    hours: dict[str, float] = {}
    money: dict[str, float | None] = {}
    provisioned: dict[str, dict[str, float]] = {}
    for life in lives:
        pool = pools.get(life.pool)
        alive = _hours(life.start, life.end, since, now)
        if pool is None or alive <= 0:
            continue
        key = _key(life, pool, by)
        hours[key] = hours.get(key, 0.0) + alive
        price, spent = prices.of(pool), money.get(key, 0.0)
        money[key] = None if price is None or spent is None else spent + price * alive
        room = flavor_allocatable(flavors[pool.flavor], reserve)
        have = provisioned.setdefault(key, dict.fromkeys(RESOURCES, 0.0))
        for res in RESOURCES:
            have[res] += room.get(res, 0) * alive
    steps: dict[str, list[ClaimStep]] = {}
    for step in sorted(claims, key=lambda s: s.at):
        steps.setdefault(step.workload, []).append(step)
    out = []
    for key in sorted(hours):
        wanted = _requested(steps.get(key, []), since, now) if by == "workload" else {}
        have = provisioned[key]
        ratio = {res: (wanted[res] / have[res] if have[res] else None) for res in wanted}
        out.append(CostLine(key, hours[key], money[key], have, wanted, ratio))
    return out
