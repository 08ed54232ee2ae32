"""Rebalance (design: Rebalance), pure: whether a workload's fleet should move back to its fresh
plan,
which units move, and when.

The planner is stable (design: Planner invariant 5): a plan degraded by reclaims or exclusions stays
degraded after the cause is gone. Each workload is therefore also planned afresh
(`core.planner.plan_fresh`: the same claim, exclusions, depth and scores, as if it held no unit)
and the two plans are compared:

- `triggers`: why the current plan should move — it is degraded and the fresh one is not; a
  reclaimable pool or a correlation group above its cap; reclaimable units in fewer than
  ``min_pools`` pools; committed units beyond the floor's need (more than the fresh plan
  holds); the fresh plan's mean key (per unit) better by ``rebalance.min_gain``. There are none
  when the fresh plan is infeasible or degraded — a rebalance never moves into a plan that
  breaks an invariant of Planner, so a strict contract never rebalances into a degraded plan — and
  none when no unit would move (a fleet that matches its fresh plan gets no churn).
- `moves`: the units the current plan holds beyond the fresh plan, per pool, the worst-keyed
  pool first and each pool's oldest unit first (by creation, then name), round-robin over
  pools; a unit younger than ``rebalance.min_age``, or moved (chosen by a rebalance) within it,
  does not move. Each move is a `rebalanced` disruption: replaced first, removed under the
  `rebalanced` budgets (`core.disruption`).
- `decide`: a trigger must hold for ``rebalance.stabilize`` (`Pending.since`, carried by the
  caller from one pass to the next) before the moves are planned (`REBALANCE_PLANNED
  {trigger, moves}`).

No I/O, no clock: time comes in as `now`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from scoctl.core.model import Contract
from scoctl.core.model.disruption import Rebalance
from scoctl.core.model.vocabulary import RebalanceTrigger
from scoctl.core.planner import EPS, WorkloadPlan
from scoctl.core.timefmt import parse_rfc3339


@dataclass(frozen=True)
class Held:
    """A ready unit of the workload as a rebalance sees it: its server, pool, when it was
    created (RFC 3339) and when a rebalance last chose it (None: never)."""

    server_id: str
    name: str
    pool: str
    created: str | None = None
    moved_at: str | None = None


@dataclass(frozen=True)
class Move:
    """One unit to move: it leaves `pool`; its replacement comes where the fresh plan says."""

    server_id: str
    name: str
    pool: str


@dataclass(frozen=True)
class Pending:
    """A workload's rebalance waiting out ``stabilize``: the first trigger that holds, since
    when (continuously) some trigger has held, and the moves it would make now."""

    workload: str
    trigger: RebalanceTrigger
    since: datetime
    moves: tuple[Move, ...] = ()


@dataclass(frozen=True)
class Decision:
    """What a pass does: `pending` (None: nothing to rebalance), and when `planned`, the
    moves to start now (the caller records `REBALANCE_PLANNED {trigger, moves}`)."""

    pending: Pending | None
    planned: bool = False
    into: Mapping[str, int] | None = None  # the pools the replacements go to, and how many

    @property
    def moves(self) -> tuple[Move, ...]:
        return self.pending.moves if self.pending is not None and self.planned else ()


def _reclaimable(plan: WorkloadPlan) -> list[tuple[str, str, float]]:
    return [(p.pool, p.group, p.coverage) for p in plan.pools
            if p.tier == "reclaimable" and p.units > 0]


def _mean_key(plan: WorkloadPlan) -> float:
    units = sum(p.units for p in plan.pools)
    return math.fsum(p.units * p.key for p in plan.pools) / units if units else 0.0


def surplus(current: WorkloadPlan, fresh: WorkloadPlan) -> dict[str, int]:
    """Per pool, the units the current plan holds beyond the fresh plan (what moves)."""
    want = fresh.units()
    return {p.pool: p.units - want.get(p.pool, 0) for p in current.pools
            if p.units > want.get(p.pool, 0)}


def into(current: WorkloadPlan, fresh: WorkloadPlan) -> dict[str, int]:
    """Per pool, the units the fresh plan holds beyond the current plan (where they go)."""
    have = current.units()
    return {p.pool: p.units - have.get(p.pool, 0) for p in fresh.pools
            if p.units > have.get(p.pool, 0)}


def triggers(current: WorkloadPlan, fresh: WorkloadPlan, contract: Contract,
             min_gain: float) -> tuple[RebalanceTrigger, ...]:
    """Why `current` should move to `fresh` (in `RebalanceTrigger` order); none when the
    fresh plan is infeasible, degraded or not covering, or holds the same units."""
    if not fresh.feasible or fresh.degraded or fresh.coverage < 1 - EPS \
            or not surplus(current, fresh):
        return ()
    found: list[RebalanceTrigger] = []
    if current.degraded:
        found.append(RebalanceTrigger.DEGRADED)
    reclaimable = _reclaimable(current)
    if contract.pool_cap < 1 and any(cov > contract.pool_cap + EPS
                                     for _, _, cov in reclaimable):
        found.append(RebalanceTrigger.POOL_CAP)
    groups: dict[str, list[float]] = {}
    for _, group, cov in reclaimable:
        groups.setdefault(group, []).append(cov)
    if contract.group_cap < 1 and any(math.fsum(c) > contract.group_cap + EPS
                                      for c in groups.values()):
        found.append(RebalanceTrigger.GROUP_CAP)
    if reclaimable and len(reclaimable) < contract.min_pools \
            and len(_reclaimable(fresh)) > len(reclaimable):
        found.append(RebalanceTrigger.MIN_POOLS)
    committed = sum(p.units for p in current.pools if p.tier == "committed")
    if committed > sum(p.units for p in fresh.pools if p.tier == "committed"):
        found.append(RebalanceTrigger.COMMITTED)
    if _mean_key(fresh) >= _mean_key(current) + min_gain - EPS:
        found.append(RebalanceTrigger.GAIN)
    return tuple(found)


def moves(current: WorkloadPlan, fresh: WorkloadPlan, held: Iterable[Held], *,
          now: datetime, min_age: float) -> tuple[Move, ...]:
    """The units that move from `current` to `fresh`: per pool, as many as it holds beyond
    the fresh plan, of the units old enough (created at least `min_age` ago and not chosen by
    a rebalance within it), oldest first; pools worst key first, taken round-robin so that
    no pool is emptied before another starts. Deterministic in the order of `held`."""
    extra = surplus(current, fresh)
    if not extra:
        return ()
    oldest = now - timedelta(seconds=min_age)

    def settled(stamp: str | None) -> bool:
        return stamp is None or parse_rfc3339(stamp) <= oldest

    lanes: dict[str, list[Held]] = {}
    for unit in held:
        if unit.pool in extra and unit.created is not None and settled(unit.created) \
                and settled(unit.moved_at):
            lanes.setdefault(unit.pool, []).append(unit)
    keys = {p.pool: p.key for p in current.pools}
    queues = [sorted(lanes[pool], key=lambda u: (u.created or "", u.name, u.server_id))
              [:extra[pool]]
              for pool in sorted(lanes, key=lambda name: (keys.get(name, 0.0), name))]
    out: list[Move] = []
    while any(queues):
        for queue in queues:
            if queue:
                unit = queue.pop(0)
                out.append(Move(unit.server_id, unit.name, unit.pool))
    return tuple(out)


def decide(workload: str, current: WorkloadPlan, fresh: WorkloadPlan, contract: Contract,
           held: Sequence[Held], pending: Pending | None, settings: Rebalance, *,
           now: datetime) -> Decision:
    """One pass of a workload's rebalance (design: Rebalance): no trigger, or nothing old enough to
    move → nothing pending; a trigger → pending since `pending.since` (or `now`, when none
    held before); once some trigger has held for `settings.stabilize` → planned, with the
    moves to start now."""
    found = triggers(current, fresh, contract, settings.min_gain)
    chosen = moves(current, fresh, held, now=now, min_age=settings.min_age) if found else ()
    if not found or not chosen:
        return Decision(None)
    since = pending.since if pending is not None and pending.workload == workload else now
    waiting = Pending(workload, found[0], since, chosen)
    if (now - since).total_seconds() + EPS >= settings.stabilize:
        return Decision(waiting, planned=True, into=into(current, fresh))
    return Decision(waiting)
