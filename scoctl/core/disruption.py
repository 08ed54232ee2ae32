"""Disruption (DESIGN §16), pure: every voluntary change to a live unit, and a reclaim, goes
through one decision — candidates per reason, then the budget, then replace-before-remove.

A rule per reason turns what the caller read into candidate `Disruption`s (today: `empty`, the
idle scale-down of DESIGN §7, and `late`, the units of a launch that was failed before its
servers appeared). `plan` runs them, in the order the rules gave them, through the
one budget function, `allowed`, and returns a `DisruptionPlan`: the disruptions to start now and
those blocked, each with the `Budget` that blocked it. Each `Disruption` says whether its
replacement must be ready before it is removed (`replace_first`); the stages act on that.

Budgets count disruptions *in flight* (from cordon until the server is deleted or the unit is
back in service), not per pass, so faster passes do not mean more churn. `noticed` (a reclaim
notice, DESIGN §14) is never held back; it still counts against the budgets that name no reason.

No I/O, no clock: time comes in as `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from scoctl.core.diff import surplus
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


def disruption_allowance(units: int, share: float) -> int:
    """How many of a workload's `units` may be in flight: the share, rounded up, at least 1."""
    if units <= 0:
        return 0
    return max(1, -(-int(units * share * 1_000_000) // 1_000_000))


@dataclass(frozen=True)
class Budget:
    """At most `share` of a workload's registered units in flight at once (rounded up, at
    least one: `disruption_allowance`), counting the disruptions for `reasons` — every reason,
    reclaim notices included, when it names none."""

    share: float
    reasons: frozenset[DisruptionReason] = frozenset()

    def counts(self, reason: DisruptionReason) -> bool:
        """Whether a disruption for `reason` counts against this budget."""
        return not self.reasons or reason in self.reasons

    def limit(self, registered: int) -> int:
        """How many disruptions this budget lets be in flight in a workload of `registered`
        units."""
        return disruption_allowance(registered, self.share)


@dataclass(frozen=True)
class Allowance:
    """How many more disruptions may start (`units`; None: no budget limits them), and the
    budget that leaves the fewest (None when none does)."""

    units: int | None
    budget: Budget | None = None


@dataclass(frozen=True)
class Blocked:
    """A candidate the budget held back."""

    disruption: Disruption
    budget: Budget


@dataclass(frozen=True)
class DisruptionPlan:
    """What to start now, in order, and what the budgets hold back."""

    start: tuple[Disruption, ...] = ()
    blocked: tuple[Blocked, ...] = ()


def allowed(workload: str, reason: DisruptionReason, *, registered: int,
            in_flight: Iterable[Disruption], budgets: Sequence[Budget]) -> Allowance:
    """The one budget rule: the minimum, over the budgets counting `reason`, of the budget's
    limit for a workload of `registered` units less that workload's disruptions in flight that
    budget counts (never below 0). `noticed` is never held back (units None)."""
    if reason is DisruptionReason.NOTICED:
        return Allowance(None)
    mine = [d.reason for d in in_flight if d.workload == workload]
    best = Allowance(None)
    for budget in budgets:
        if not budget.counts(reason):
            continue
        left = max(0, budget.limit(registered) - sum(1 for r in mine if budget.counts(r)))
        if best.units is None or left < best.units:
            best = Allowance(left, budget)
    return best


def plan(candidates: Iterable[Disruption], *, in_flight: Sequence[Disruption],
         registered: Mapping[str, int], budgets: Sequence[Budget]) -> DisruptionPlan:
    """Take the candidates in order: each starts when `allowed` leaves room (and then counts
    as in flight for the next), else it is blocked by the budget that leaves none.
    `registered[workload]` is the workload's registered units (0 when absent)."""
    flying = list(in_flight)
    start: list[Disruption] = []
    blocked: list[Blocked] = []
    for candidate in candidates:
        room = allowed(candidate.workload, candidate.reason,
                       registered=registered.get(candidate.workload, 0), in_flight=flying,
                       budgets=budgets)
        if room.units == 0 and room.budget is not None:
            blocked.append(Blocked(candidate, room.budget))
            continue
        start.append(candidate)
        flying.append(candidate)
    return DisruptionPlan(tuple(start), tuple(blocked))


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
