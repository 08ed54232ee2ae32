"""Disruption (design: Disruption), pure: every voluntary change to a live unit, and a reclaim, goes
through one decision — candidates per reason, then the budget, then replace-before-remove.

A rule per reason turns what the caller read into candidate `Disruption`s: `empty` (the idle
scale-down of design: Reconciler), `underutilized` (a unit the plan no longer holds whose pods fit
on the
workload's kept units), `expired` (older than `expire_after`, each unit within ±10 %, stable per
server id: `jitter`), `unhealthy` (its node not ready for `repair_after`, never in a pool where
too many units are: `unhealthy_pools`) and `late` (the units of a launch that was failed before
its servers appeared). `in_flight_of` and `starts_of` read what is in flight, and what started
recently, from the instance rows (their `disruption` and `disruption_at`). `plan` runs them,
in the order the rules gave them, through the one budget
function, `scoctl.core.budgets.allowed`, and returns a `DisruptionPlan`: the disruptions to
start now and those blocked, each with the `Budget` that blocked it and until when. Each
`Disruption` says whether its replacement must be ready before it is removed
(`replace_first`); the stages act on that.

Budgets count disruptions *in flight* (from cordon until the server is deleted or the unit is
back in service), not per pass, so faster passes do not mean more churn. `noticed` (a reclaim
notice, design: Notices) is never held back; it still counts against the budgets that name no
reason.

No I/O, no clock: time comes in as `now`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from scoctl.core.budgets import Allowance, held_text, select
from scoctl.core.diff import surplus
from scoctl.core.model import InstanceRecord
from scoctl.core.model.disruption import Budget, Units
from scoctl.core.model.vocabulary import BudgetLimit, DisruptionReason, InstanceStatus
from scoctl.core.quantity import Resources, add, fits
from scoctl.core.timefmt import parse_rfc3339

# whether a unit disrupted for a reason is replaced before it is removed (design: Disruption's
# table)
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
    """A ready unit as the candidate rules see it: its server, workload and pool, since when
    it has been idle (RFC 3339; None while it runs work), when it was created, since when its
    node is unhealthy (None: healthy). For `underutilized`, a Kubernetes unit also carries its
    node's `allocatable`, what every pod on it requests (`used`) and the requests of the pods
    a drain must move (`movable`, `core.demand.must_move`); `slurm` for a Slurm node."""

    server_id: str
    name: str
    workload: str
    pool: str
    idle_since: str | None = None
    created: str | None = None
    unhealthy_since: str | None = None
    allocatable: Resources = field(default_factory=dict)
    used: Resources = field(default_factory=dict)
    movable: tuple[Resources, ...] = ()
    slurm: bool = False


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
    budgets; `by`: its units in flight or its rate), until time alone lifts it (`until`;
    None: until a disruption ends)."""

    disruption: Disruption
    budget: Budget
    index: int = 0
    until: datetime | None = None
    by: BudgetLimit = BudgetLimit.UNITS

    def text(self) -> str:
        """What holds it back, as a person reads it."""
        return held_text(self.budget, self.index, self.by, self.until)


@dataclass(frozen=True)
class DisruptionPlan:
    """What to start now, in order, and what the budgets hold back; for each start, the room
    the budgets left it (`allowed[server id]`: the tightest active budget, or none)."""

    start: tuple[Disruption, ...] = ()
    blocked: tuple[Blocked, ...] = ()
    allowed: Mapping[str, Allowance] = field(default_factory=dict)


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
    rooms: dict[str, Allowance] = {}
    held: dict[str, Blocked] = {}
    for workload, mine in by_workload.items():
        flying = {d.server_id: d.reason for d in in_flight if d.workload == workload}
        chosen = select([(d.server_id, d.reason) for d in mine],
                        (workload_budgets or {}).get(workload, budgets),
                        registered=registered.get(workload, 0), now=now, in_flight=flying,
                        starts=(starts or {}).get(workload, ()))
        started |= {unit for unit, _ in chosen.start}
        rooms.update(chosen.room)
        first = {d.server_id: d for d in reversed(mine)}
        for unit, _, room in chosen.blocked:
            assert room.budget is not None and room.index is not None
            held[unit] = Blocked(first[unit], room.budget, room.index, room.until,
                                 room.by or BudgetLimit.UNITS)
    start: list[Disruption] = []
    for candidate in listed:
        if candidate.server_id in started:
            start.append(candidate)
            started.discard(candidate.server_id)
    order = dict.fromkeys(c.server_id for c in listed)
    return DisruptionPlan(tuple(start), tuple(held[u] for u in order if u in held),
                          {d.server_id: rooms[d.server_id] for d in start
                           if d.server_id in rooms})


def _age(now: datetime, since: str) -> float:
    return (now - parse_rfc3339(since)).total_seconds() if since else 0.0


def _oldest(entry: tuple[str, str, Unit]) -> tuple[str, str]:
    """Longest idle first (RFC 3339 sorts as text), then by name."""
    return entry[0], entry[1]


# -- candidates, one rule per reason -----------------------------------------------------------

def empty(units: Iterable[Unit], *, targets: Mapping[str, Mapping[str, int]],
          held: Mapping[str, Mapping[str, int]], in_flight: Sequence[Disruption],
          now: datetime, idle_timeout: float) -> tuple[Disruption, ...]:
    """`empty` (design: Reconciler's scale-down): ready units idle for `idle_timeout` seconds or
    more,
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
    """`late` (design: Runners): live units of a launch that was failed before its servers appeared
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


def kept_units(units: Iterable[Unit], targets: Mapping[str, Mapping[str, int]],
               gone: Iterable[str] = ()) -> set[str]:
    """The units the plan keeps: per (workload, pool), its planned count of the units not
    `gone` (disrupted), busiest first (most pods to move), then by name — so the units that
    stay are the ones whose pods would otherwise move, and the rest are emptied."""
    skip = set(gone)
    by_key: dict[tuple[str, str], list[Unit]] = {}
    for unit in units:
        if unit.server_id not in skip:
            by_key.setdefault((unit.workload, unit.pool), []).append(unit)
    kept: set[str] = set()
    for (workload, pool), mine in by_key.items():
        want = targets.get(workload, {}).get(pool, 0)
        ranked = sorted(mine, key=lambda u: (-len(u.movable), u.name))
        kept |= {u.server_id for u in ranked[:max(0, want)]}
    return kept


def underutilized(units: Iterable[Unit], *, targets: Mapping[str, Mapping[str, int]],
                  held: Mapping[str, Mapping[str, int]], in_flight: Sequence[Disruption],
                  chosen: Sequence[Disruption]) -> tuple[Disruption, ...]:
    """`underutilized` (design: Disruption, consolidation): in the (workload, pool)s that hold more
    units than the plan wants, after the disruptions in flight and those already `chosen`
    (`empty`, `late`), the busy Kubernetes units the plan does not keep (`kept_units`) whose
    movable pods all fit, by requests, on the free allocatable of the workload's kept units;
    fewest pods to move first, then by name. A unit's pods, once it is taken, use up the room
    they would take. Slurm nodes are taken without a fit (their jobs end in place: the node
    is drained and removed once idle)."""
    listed = list(units)
    live = {(w, pool): n for w, pools in held.items() for pool, n in pools.items()}
    gone = {d.server_id for d in [*in_flight, *chosen]}
    kept = kept_units(listed, targets, gone)
    room: dict[str, dict[str, Resources]] = {}  # workload -> server id -> free allocatable
    for unit in listed:
        if unit.server_id in kept and not unit.slurm and unit.allocatable:
            free = {k: v - unit.used.get(k, 0) for k, v in unit.allocatable.items()}
            room.setdefault(unit.workload, {})[unit.server_id] = free
    busy: dict[tuple[str, str], list[Unit]] = {}
    for unit in listed:
        if unit.server_id not in gone and unit.server_id not in kept \
                and (unit.movable or unit.slurm and unit.idle_since is None):
            busy.setdefault((unit.workload, unit.pool), []).append(unit)
    out: list[Disruption] = []
    for key, count in sorted(surplus(targets, live).items()):
        count -= sum(1 for d in [*in_flight, *chosen] if (d.workload, d.pool) == key)
        for unit in sorted(busy.get(key, []), key=lambda u: (len(u.movable), u.name)):
            if count <= 0:
                break
            if unit.slurm or _place(unit.movable, room.setdefault(unit.workload, {})):
                out.append(disruption(unit, DisruptionReason.UNDERUTILIZED))
                count -= 1
    return tuple(out)


def _place(pods: Sequence[Resources], room: dict[str, Resources]) -> bool:
    """First fit, largest pod first, of `pods` onto `room` (server id → free allocatable, a
    pod also takes one of a node's ``pods``); on success `room` is used up by them, else it
    is left as it was."""
    trial = {server: dict(free) for server, free in room.items()}
    for pod in sorted(pods, key=lambda r: sorted(r.items()), reverse=True):
        for server in sorted(trial):
            free = trial[server]
            need = add(pod, {"pods": 1}) if "pods" in free else dict(pod)
            if fits(need, free):
                trial[server] = {k: v - need.get(k, 0) for k, v in free.items()}
                break
        else:
            return False
    room.update(trial)
    return True


def jitter(server_id: str) -> float:
    """A unit's own share of `expire_after`, in [0.9, 1.1], stable per server id (the first
    eight bytes of the SHA-256 of the id), so units launched together expire spread out."""
    digest = hashlib.sha256(server_id.encode()).digest()
    return 0.9 + 0.2 * int.from_bytes(digest[:8], "big") / 2**64


def expired(units: Iterable[Unit], *, now: datetime,
            expire_after: Mapping[str, float | None]) -> tuple[Disruption, ...]:
    """`expired` (design: Disruption): ready units older (since `created`) than their workload's
    `expire_after[workload]` seconds times their `jitter`; oldest first. None: never."""
    found: list[tuple[str, str, Unit]] = []
    for unit in units:
        limit = expire_after.get(unit.workload)
        if limit is None or not unit.created:
            continue
        if _age(now, unit.created) >= limit * jitter(unit.server_id):
            found.append((unit.created, unit.name, unit))
    return tuple(disruption(unit, DisruptionReason.EXPIRED) for _, _, unit in sorted(found,
                                                                                      key=_oldest))


def unhealthy_pools(units: Iterable[Unit], *,
                    max_unhealthy: Mapping[str, Units]) -> dict[str, tuple[int, int]]:
    """Pools where more than `max_unhealthy[workload]` of the pool's units are unhealthy at
    once (a pool problem, not a unit's: `POOL_UNHEALTHY`, no repair there): pool → (unhealthy,
    units)."""
    counts: dict[str, list[int]] = {}
    limits: dict[str, Units] = {}
    for unit in units:
        entry = counts.setdefault(unit.pool, [0, 0])
        entry[1] += 1
        entry[0] += unit.unhealthy_since is not None
        if unit.workload in max_unhealthy:
            limits.setdefault(unit.pool, max_unhealthy[unit.workload])
    out: dict[str, tuple[int, int]] = {}
    for pool, (sick, total) in sorted(counts.items()):
        limit = limits.get(pool)
        if limit is not None and sick > limit.of(total):
            out[pool] = (sick, total)
    return out


def unhealthy(units: Iterable[Unit], *, now: datetime, repair_after: Mapping[str, float],
              excluded: Iterable[str] = ()) -> tuple[Disruption, ...]:
    """`unhealthy` (design: Disruption, repair): ready units whose node has been unhealthy
    (Kubernetes
    NotReady or Unknown, Slurm DOWN or NOT_RESPONDING) for their workload's `repair_after`
    seconds, outside the `excluded` pools (`unhealthy_pools`); longest unhealthy first."""
    skip = set(excluded)
    found: list[tuple[str, str, Unit]] = []
    for unit in units:
        since = unit.unhealthy_since
        if since is None or unit.pool in skip or unit.workload not in repair_after:
            continue
        if _age(now, since) >= repair_after[unit.workload]:
            found.append((since, unit.name, unit))
    return tuple(disruption(unit, DisruptionReason.UNHEALTHY)
                 for _, _, unit in sorted(found, key=_oldest))


def in_flight_of(instances: Iterable[InstanceRecord]) -> tuple[Disruption, ...]:
    """The disruptions in flight: instances with a disruption reason that are not deleted
    (from the start until the server is gone or the unit is back in service, which clears
    the reason)."""
    return tuple(Disruption(i.id, i.name, i.workload, i.pool or "",
                            DisruptionReason(i.disruption),
                            REPLACE_FIRST[DisruptionReason(i.disruption)])
                 for i in instances
                 if i.disruption and i.workload and i.status != InstanceStatus.DELETED)


def starts_of(instances: Iterable[InstanceRecord]
              ) -> dict[str, list[tuple[datetime, DisruptionReason]]]:
    """When each workload's recorded disruptions started, and why (the budgets' rates)."""
    out: dict[str, list[tuple[datetime, DisruptionReason]]] = {}
    for inst in instances:
        if inst.disruption and inst.disruption_at and inst.workload:
            out.setdefault(inst.workload, []).append(
                (parse_rfc3339(inst.disruption_at), DisruptionReason(inst.disruption)))
    return out


def replacements(retiring: Sequence[InstanceRecord], units: Iterable[InstanceRecord]
                 ) -> dict[str, str | None]:
    """Which unit replaced each of one workload's `retiring` units (replaced first, with their
    `disruption_at`; those retired before included, so that no unit is credited twice): in
    the order their disruptions started, each takes the first of `units` (ready, healthy,
    under no disruption) launched at or after its start that no earlier one took — of its own
    pool first — so an older unit, or one of another pool already there, is never named.
    None: no unit launched since (a surplus unit let it go)."""
    free = sorted(units, key=lambda u: (u.created, u.name))
    out: dict[str, str | None] = {}
    for old in sorted(retiring, key=lambda i: (i.disruption_at or "", i.name)):
        since = parse_rfc3339(old.disruption_at) if old.disruption_at else None
        later = [u for u in free if since is None or parse_rfc3339(u.created) >= since]
        pick = next((u for u in later if u.pool == old.pool), later[0] if later else None)
        out[old.id] = pick.id if pick is not None else None
        if pick is not None:
            free.remove(pick)
    return out


SHOWN_REASONS = tuple(DisruptionReason)  # every reason, those only a budget may name included


@dataclass(frozen=True)
class ReasonStatus:
    """One workload's budget for one reason now (`status --json`'s ``disruption`` list):
    how many more may start (`allowed`; None: no limit), how many of that reason are in
    flight, when the window of a scheduled budget counting it that is open now closes
    (`window_end`) and when the next one opens (`next_window`); when none may start, what
    holds them (`held`: the budget, what of it, until when)."""

    workload: str
    reason: DisruptionReason
    allowed: int | None
    in_flight: int
    next_window: datetime | None
    window_end: datetime | None = None
    held: Allowance | None = None

    def held_text(self) -> str:
        """What holds this reason's disruptions back, as a person reads it ('' when none)."""
        held = self.held
        if held is None or held.budget is None:
            return ""
        return held_text(held.budget, held.index, held.by, held.until)


def status(workloads: Iterable[str], *, instances: Iterable[InstanceRecord],
           budgets_of: Mapping[str, Sequence[Budget]], now: datetime,
           reasons: Sequence[DisruptionReason] = SHOWN_REASONS) -> tuple[ReasonStatus, ...]:
    """Per workload (sorted) and reason, what the budgets allow at `now`, from the instance
    rows (deleted ones included: the rates' starts); a workload's registered units are its
    live ones and those in flight, a noticed unit counts as a `noticed` disruption."""
    from scoctl.core.budgets import (  # one rule: the budgets' own
        active,
        allowed,
        next_opening,
        window_end,
    )

    rows = list(instances)
    flying = list(in_flight_of(rows))
    flying += [Disruption(i.id, i.name, i.workload, i.pool or "", DisruptionReason.NOTICED,
                          True) for i in rows
               if i.workload and i.status == InstanceStatus.NOTICED and not i.disruption]
    starts = starts_of(rows)
    out: list[ReasonStatus] = []
    live = {InstanceStatus.REQUESTED, InstanceStatus.BUILDING, InstanceStatus.ACTIVE,
            InstanceStatus.READY, InstanceStatus.DRAINING, InstanceStatus.NOTICED}
    for workload in sorted(set(workloads)):
        budgets = budgets_of.get(workload, ())
        registered = sum(1 for i in rows if i.workload == workload and i.status in live)
        mine = [d.reason for d in flying if d.workload == workload]
        for reason in reasons:
            room = allowed(budgets, reason, registered=registered, now=now, in_flight=mine,
                           starts=starts.get(workload, ()))
            counting = [b for b in budgets if b.counts(reason) and b.schedule is not None]
            opens = [t for b in counting if (t := next_opening(b, now)) is not None]
            ends = [t for b in counting if active(b, now)
                    and (t := window_end(b, now)) is not None]
            out.append(ReasonStatus(workload, reason, room.units,
                                    sum(1 for r in mine if r is reason),
                                    min(opens) if opens else None,
                                    min(ends) if ends else None,
                                    room if room.units == 0 else None))
    return tuple(out)
