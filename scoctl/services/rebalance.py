"""Rebalance between passes (design: Rebalance): the plan stage's decisions over the state.

The decision is `core.rebalance.decide` (pure). This module gives it what it needs from the
state — each workload's ready units, and the trigger's `since` carried from the last pass
(`Store.rebalances`) — and records what it decided: a waiting rebalance is kept with its
trigger and since; a planned one with its moves (server ids) for reconcile to start as
`rebalanced` disruptions under the budgets (`core.reconcile`), with `REBALANCE_PENDING` once
when a trigger first holds and `REBALANCE_PLANNED {trigger, moves, into}` each time the
planned moves take a unit they did not name before. A workload whose triggers stop holding
loses its row (a planned move not started yet is dropped with it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime

from scoctl.config.schema import Config
from scoctl.core import rebalance
from scoctl.core.model import InstanceRecord, NewEvent, RebalanceRecord
from scoctl.core.model.vocabulary import InstanceStatus, RebalanceTrigger
from scoctl.core.planner import WorkloadPlan
from scoctl.core.timefmt import parse_rfc3339, rfc3339
from scoctl.state import Store


def held_units(instances: Iterable[InstanceRecord],
               workloads: Collection[str]) -> dict[str, list[rebalance.Held]]:
    """The ready units no disruption holds, of `workloads`, as a rebalance sees them."""
    out: dict[str, list[rebalance.Held]] = {}
    for inst in instances:
        if inst.workload and inst.workload in workloads and inst.pool \
                and inst.status == InstanceStatus.READY and not inst.disruption:
            out.setdefault(inst.workload, []).append(
                rebalance.Held(inst.id, inst.name, inst.pool, inst.created))
    return out


def pending_of(record: RebalanceRecord | None) -> rebalance.Pending | None:
    """The stored rebalance as the decision's `pending` (None: none held at the last pass)."""
    if record is None:
        return None
    return rebalance.Pending(record.workload, RebalanceTrigger(record.trigger),
                             parse_rfc3339(record.since))


def decide_all(config: Config, instances: Iterable[InstanceRecord],
               plans: Mapping[str, WorkloadPlan], fresh: Mapping[str, WorkloadPlan],
               stored: Mapping[str, RebalanceRecord], *,
               now: datetime) -> dict[str, rebalance.Decision]:
    """Each workload planned now and afresh: its rebalance this pass (design: Rebalance)."""
    names = [n for n in plans if n in fresh and plans[n].contract in config.contracts]
    held = held_units(instances, set(names))
    return {name: rebalance.decide(name, plans[name], fresh[name],
                                   config.contracts[plans[name].contract],
                                   held.get(name, []), pending_of(stored.get(name)),
                                   config.disruption_of(name).rebalance, now=now)
            for name in names}


def record(store: Store, decisions: Mapping[str, rebalance.Decision],
           stored: Mapping[str, RebalanceRecord], *, gone: Collection[str] = ()) -> None:
    """Keep what `decisions` say (rows of other workloads stay, but those of `gone`, whose
    claim or plan is gone, are removed) with the events of what changed."""
    stamp = store.now()
    rows: list[RebalanceRecord] = []
    for name, decided in sorted(decisions.items()):
        waiting, before = decided.pending, stored.get(name)
        if waiting is None:
            continue
        moves = tuple(m.server_id for m in waiting.moves)
        planned = ((before.planned if before is not None and before.planned else stamp)
                   if decided.planned else None)
        rows.append(RebalanceRecord(name, waiting.trigger.value, rfc3339(waiting.since), moves,
                                    planned))
        if before is None:
            store.append_event(NewEvent(name, "REBALANCE_PENDING", "info", {
                "trigger": waiting.trigger.value, "since": rfc3339(waiting.since),
                "moves": len(moves)}))
        fresh_moves = set(moves) - set(before.moves if before and before.planned else ())
        if decided.planned and fresh_moves:
            store.append_event(NewEvent(name, "REBALANCE_PLANNED", "info", {
                "trigger": waiting.trigger.value, "since": rfc3339(waiting.since),
                "moves": [{"server": m.server_id, "name": m.name, "pool": m.pool}
                          for m in waiting.moves],
                "into": dict(sorted((decided.into or {}).items()))}))
    touched = set(decisions) | set(gone)
    if rows or touched & set(stored):
        store.save_rebalances(touched, rows)


def planned_moves(stored: Mapping[str, RebalanceRecord]) -> tuple[str, ...]:
    """The server ids of every planned rebalance's moves, in their order (what reconcile
    starts)."""
    return tuple(s for _, r in sorted(stored.items()) if r.planned for s in r.moves)
