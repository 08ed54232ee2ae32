"""Disruption (DESIGN §16), pure: every voluntary change to a live unit, and a reclaim, goes
through one decision — candidates per reason, then the budget, then replace-before-remove.

A rule per reason turns what the caller read into candidate `Disruption`s (today: `empty`, the
idle scale-down of DESIGN §7, and `late`, the units of a launch that was failed before its
servers appeared). `plan` runs them, in the order the rules gave them, through the one budget
function, `scoctl.core.budgets.allowed`, and returns a `DisruptionPlan`: the disruptions to
start now and those blocked, each with the `Budget` that blocked it and until when. Each
`Disruption` says whether its replacement must be ready before it is removed
(`replace_first`); the stages act on that.

Budgets count disruptions *in flight* (from cordon until the server is deleted or the unit is
back in service), not per pass, so faster passes do not mean more churn. `noticed` (a reclaim
notice, DESIGN §14) is never held back; it still counts against the budgets that name no reason.

No I/O, no clock: time comes in as `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scoctl.core.budgets import select
from scoctl.core.diff import surplus
from scoctl.core.model.disruption import Budget
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.core.timefmt import parse_rfc3339

# whether a unit disrupted for a reason is replaced before it is removed (DESIGN §16's table)
REPLACE_FIRST: Mapping[DisruptionReason, bool] = {
    DisruptionReason.EMPTY: False,
    DisruptionReason.UNDERUTILIZED: False,  # its pods move by eviction
    DisruptionReason.DRIFTED: True,
    DisruptionReason.EXPIRED: True,
    DisruptionReason.REBALANCED: True,
    DisruptionReason.UNHEALTHY: True,
    DisruptionReason.NOTICED: True,
    DisruptionReason.LATE: False,  # surplus by definition: its units were launched again
}


@dataclass(frozen=True)
class Unit:
    """A ready unit as the candidate rules see it: its server, workload and pool, and since
    when it has been idle (RFC 3339; None while it runs work)."""

    server_id: str
    name: str
    workload: str
    pool: str
    idle_since: str | None = None


@dataclass(frozen=True)
class Disruption:
    """One unit to disrupt, and why; `replace_first`: start its replacement and remove it only
    once the replacement is ready."""

    server_id: str
    name: str
    workload: str
    pool: str
    reason: DisruptionReason
    replace_first: bool


def disruption(unit: Unit, reason: DisruptionReason) -> Disruption:
    """`unit` disrupted for `reason`, replaced first when the reason says so."""
    return Disruption(unit.server_id, unit.name, unit.workload, unit.pool, reason,
                      REPLACE_FIRST[reason])


@dataclass(frozen=True)
class Blocked:
    """A candidate the budget held back: by `budget` (the `index`-th of its workload's
    budgets), until time alone lifts it (`until`; None: until a disruption ends)."""

    disruption: Disruption
    budget: Budget
    index: int = 0
    until: datetime | None = None


@dataclass(frozen=True)
class DisruptionPlan:
    """What to start now, in order, and what the budgets hold back."""

    start: tuple[Disruption, ...] = ()
    blocked: tuple[Blocked, ...] = ()


def plan(candidates: Iterable[Disruption], *, in_flight: Sequence[Disruption],
         registered: Mapping[str, int], budgets: Sequence[Budget], now: datetime,
         workload_budgets: Mapping[str, Sequence[Budget]] | None = None,
         starts: Mapping[str, Sequence[tuple[datetime, DisruptionReason]]] | None = None,
         ) -> DisruptionPlan:
    """Take the candidates in order, per workload (`budgets.select`): each starts when
    `budgets.allowed` leaves room (and then counts as in flight, and as started at `now`,
    for the next), else it is blocked by the budget that leaves none. A workload's budgets
    are `workload_budgets[workload]`, else `budgets`; `registered[workload]` its registered
    units (0 when absent); `starts[workload]` when its recent disruptions started (rates)."""
    listed = list(candidates)
    by_workload: dict[str, list[Disruption]] = {}
    for candidate in listed:
        by_workload.setdefault(candidate.workload, []).append(candidate)
    started: set[str] = set()
    held: dict[str, Blocked] = {}
    for workload, mine in by_workload.items():
        flying = {d.server_id: d.reason for d in in_flight if d.workload == workload}
        chosen = select([(d.server_id, d.reason) for d in mine],
                        (workload_budgets or {}).get(workload, budgets),
                        registered=registered.get(workload, 0), now=now, in_flight=flying,
                        starts=(starts or {}).get(workload, ()))
        started |= {unit for unit, _ in chosen.start}
        first = {d.server_id: d for d in reversed(mine)}
        for unit, _, room in chosen.blocked:
            assert room.budget is not None and room.index is not None
            held[unit] = Blocked(first[unit], room.budget, room.index, room.until)
    start: list[Disruption] = []
    for candidate in listed:
        if candidate.server_id in started:
            start.append(candidate)
            started.discard(candidate.server_id)
    order = dict.fromkeys(c.server_id for c in listed)
    return DisruptionPlan(tuple(start), tuple(held[u] for u in order if u in held))


def _age(now: datetime, since: str) -> float:
    return (now - parse_rfc3339(since)).total_seconds() if since else 0.0


def _oldest(entry: tuple[str, str, Unit]) -> tuple[str, str]:
    """Longest idle first (RFC 3339 sorts as text), then by name."""
    return entry[0], entry[1]


# -- candidates, one rule per reason -----------------------------------------------------------

def empty(units: Iterable[Unit], *, targets: Mapping[str, Mapping[str, int]],
          held: Mapping[str, Mapping[str, int]], in_flight: Sequence[Disruption],
          now: datetime, idle_timeout: float) -> tuple[Disruption, ...]:
    """`empty` (DESIGN §7's scale-down): ready units idle for `idle_timeout` seconds or more,
    in the (workload, pool)s that hold more units (`held`, in flight included) than the plan
    (`targets`) wants, at most that surplus less the (workload, pool)'s disruptions already in
    flight; by (workload, pool), longest idle first."""
    live = {(w, pool): n for w, pools in held.items() for pool, n in pools.items()}
    idle: dict[tuple[str, str], list[tuple[str, str, Unit]]] = {}
    for unit in units:
        since = unit.idle_since
        if since is None or _age(now, since) < idle_timeout:
            continue
        idle.setdefault((unit.workload, unit.pool), []).append((since, unit.name, unit))
    out: list[Disruption] = []
    for key, count in sorted(surplus(targets, live).items()):
        count -= sum(1 for d in in_flight if (d.workload, d.pool) == key)
        out.extend(disruption(unit, DisruptionReason.EMPTY)
                   for _, _, unit in sorted(idle.get(key, []), key=_oldest)[:max(0, count)])
    return tuple(out)


def late(units: Iterable[Unit], *, targets: Mapping[str, Mapping[str, int]],
         held: Mapping[str, Mapping[str, int]],
         in_flight: Sequence[Disruption]) -> tuple[Disruption, ...]:
    """`late` (DESIGN §15): live units of a launch that was failed before its servers appeared
    (a deposed leader's call carried out late; the launch's units were launched again), in the
    (workload, pool)s that hold more units (`held`) than the plan (`targets`) wants: at once,
    idle or not, at most that surplus less the (workload, pool)'s disruptions in flight; by
    (workload, pool), then name."""
    live = {(w, pool): n for w, pools in held.items() for pool, n in pools.items()}
    found: dict[tuple[str, str], list[Unit]] = {}
    for unit in units:
        found.setdefault((unit.workload, unit.pool), []).append(unit)
    out: list[Disruption] = []
    for key, count in sorted(surplus(targets, live).items()):
        count -= sum(1 for d in in_flight if (d.workload, d.pool) == key)
        out.extend(disruption(unit, DisruptionReason.LATE)
                   for unit in sorted(found.get(key, []), key=lambda u: u.name)[:max(0, count)])
    return tuple(out)
