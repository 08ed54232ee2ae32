"""`scoctl status`: workloads, claims, the latest plan and the fleet."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import typer

from scoctl.cli.common import JsonOption

if TYPE_CHECKING:
    from scoctl.core.disruption import ReasonStatus
    from scoctl.core.model import InstanceRecord
    from scoctl.core.model.disruption import Budget


def status(ctx: typer.Context, json_out: JsonOption = False) -> None:
    """Show every workload's status, its claim, the latest plan and the fleet (a noticed
    instance with its reclaim deadline), and any pause of launches or disruptions.

    The last line (``latency`` in --json) gives the p50 / p99 of the latest placement decisions
    (first sight of pending demand → committed plan) and of pending → every node Ready.

    Read-only: never takes the run lock and never blocks a running stage.

    \b
    Example:
      scoctl status --json | jq '.workloads[] | select(.status=="failed")'
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.views import (
        claim_json,
        instance_json,
        latency_json,
        plan_json,
        reason_status_json,
        workload_json,
    )
    from scoctl.clock import SystemClock
    from scoctl.core import pause
    from scoctl.core.disruption import status as disruption_status
    from scoctl.core.model.latency import METRICS
    from scoctl.core.model.vocabulary import DisruptionReason
    from scoctl.core.quantity import format_resources
    from scoctl.core.timefmt import rfc3339
    from scoctl.services.buffers import buffers_now
    from scoctl.services.drift import progress as drift_progress
    from scoctl.stages.reconcile import rate_horizon

    g = globals_of(ctx, json=json_out)
    config = g.config(reader=True)  # a check only launching needs failing: a warning
    now = SystemClock().now()
    with g.open_store(reader=True) as store:
        workloads = store.workloads()
        claims = store.claims()
        generation = store.latest_generation()
        plans = store.plans()
        instances = store.instances()
        from scoctl.state.coordination import leases_of

        leaders = leases_of(store)
        latency = latency_json({m: store.latency_samples(m) for m in METRICS})
        notices = {row.server_id: row for row in store.noticed()}  # the open ones
        disrupted = store.disrupted(rfc3339(now - timedelta(seconds=rate_horizon(config))))
        rollouts = drift_progress(config, store, now)
        rebalancing = list(store.rebalances().values())  # design: Rebalance
        paused = pause.active(store.pauses(), now)
    rebalances = [{"workload": r.workload, "trigger": r.trigger, "since": r.since,
                   "moves": list(r.moves), "planned": r.planned} for r in rebalancing]
    recorded = {i.id: i for i in disrupted}
    recorded.update({i.id: i for i in instances})
    budgets = {name: config.disruption_of(name).budgets
               for name in {*plans, *(i.workload for i in instances if i.workload)}}
    reasons = disruption_status(budgets, instances=recorded.values(), budgets_of=budgets, now=now)
    drift_held = {r.workload: r.held_text() for r in reasons
                  if r.reason is DisruptionReason.DRIFTED and r.held is not None}
    for rollout in rollouts:  # phase open, nothing in flight: say what holds it
        rollout["held"] = drift_held.get(str(rollout["workload"])) or None
    buffers = buffers_now(config, claims, instances, now)
    if g.json:
        plan = plan_json(generation, plans)
        plan.pop("changed", None)
        render.print_json({
            "workloads": [workload_json(w) for w in workloads],
            "claims": [claim_json(c) for c in claims],
            "plan": plan,
            "instances": [instance_json(i, notices.get(i.id)) for i in instances],
            "leaders": [{"region": lease.region, "holder": lease.holder,
                         "generation": lease.generation,
                         "expires_at": rfc3339(lease.expires_at)} for lease in leaders],
            "latency": latency,
            "disruption": [reason_status_json(r) for r in reasons],
            "drift": rollouts,
            "rebalance": rebalances,
            "buffers": [{"workload": b.workload, "desired": b.desired, "held": b.held,
                         "problem": "BUFFER_SHORT" if b.short else None} for b in buffers],
            "paused": pause.summary(paused),
        })
        return
    for held_by in paused.values():
        render.line("PAUSED: " + pause.describe(held_by))
    render.table("Workloads", ["slug", "kind", "source", "contract", "status", "last token"],
                 [(w.slug, w.kind, w.source, w.contract, render.styled(w.status),
                   workload_json(w).get("reason") or w.last_token or "") for w in workloads])
    render.table("Claims", ["workload", "version", "pods", "requests", "largest pod"],
                 [(c.workload, c.version, c.pods, format_resources(c.requests),
                   format_resources(c.largest_pod)) for c in claims])
    title = (f"Plan generation {generation.generation} (ranking {generation.ranking})"
             if generation else "Plan")
    rows = []
    for p in plans.values():
        units = sum(u.units for u in p.pools)
        flag = "infeasible" if not p.feasible else ("degraded" if p.degraded else "ok")
        rows.append((p.workload, p.generation, units, len(p.pools), flag,
                     "; ".join(p.reasons)))
    render.table(title, ["workload", "gen", "units", "pools", "plan", "reasons"], rows)
    counts: dict[str, int] = {}
    for i in instances:
        counts[i.status] = counts.get(i.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    with_nodes = any(i.node_name for i in instances)  # Slurm node names (Kubernetes: by id)
    with_notices = any(i.id in notices for i in instances)
    render.table(f"Instances ({summary})" if summary else "Instances",
                 ["name", "workload", "pool", "status"] + (["slurm node"] if with_nodes else [])
                 + (["reclaim deadline"] if with_notices else []),
                 [(i.name, i.workload, i.pool, instance_status(i))
                  + ((i.node_name or "",) if with_nodes else ())
                  + ((notices[i.id].deadline if i.id in notices else "",) if with_notices
                     else ()) for i in instances])
    _budgets(budgets, reasons, now)
    if rollouts:
        render.table("Drift", ["workload", "drifted", "in flight", "replaced", "phase",
                               "held by"],
                     [(r["workload"], r["drifted"], r["in_flight"], r["replaced"],
                       "canary (soaking)" if r["soaking"] else r["phase"], r["held"] or "")
                      for r in rollouts])
    if rebalancing:
        render.table("Rebalance", ["workload", "trigger", "since", "moves", "planned"],
                     [(r.workload, r.trigger, r.since, len(r.moves), r.planned or "waiting")
                      for r in rebalancing])
    if buffers:
        render.table("Buffers", ["workload", "desired", "held", "problem"],
                     [(b.workload, b.desired, b.held, "BUFFER_SHORT" if b.short else "")
                      for b in buffers])
    if leaders:
        render.table("Leaders", ["region", "holder", "term", "expires"],
                     [(lease.region, lease.holder, lease.generation, rfc3339(lease.expires_at))
                      for lease in leaders])
    parts = [f"{metric.replace('_', ' ')} p50 {v['p50']:.2f} s, p99 {v['p99']:.2f} s "
             f"({v['samples']} samples)" for metric, v in latency.items() if v["samples"]]
    if parts:
        render.line("Latency: " + "; ".join(parts))


def instance_status(i: InstanceRecord) -> str:
    """An instance's status for people: a ready unit whose node is not (Kubernetes NotReady,
    Slurm DOWN) says so from the pass that saw it, not only once its repair starts."""
    from scoctl.cli import render
    from scoctl.core.model.vocabulary import InstanceStatus

    if i.status == InstanceStatus.READY and i.unhealthy_since:
        return f"[red]ready, node not ready since {i.unhealthy_since}[/red]"
    return render.styled(i.status)


def _budgets(budgets: Mapping[str, Sequence[Budget]], reasons: Sequence[ReasonStatus],
             now: datetime) -> None:
    """The disruption budgets of each workload with units, whether each limits
    now, and the reasons whose disruptions are in flight or held, by what."""
    from scoctl.cli import render
    from scoctl.core.budgets import active, describe, next_opening, window_end
    from scoctl.core.timefmt import rfc3339

    def when(b: Budget) -> str:
        if b.schedule is None:
            return "always"
        if active(b, now):
            end = window_end(b, now)
            return f"open until {rfc3339(end)}" if end else "open"
        opens = next_opening(b, now)
        return f"closed; opens {rfc3339(opens)}" if opens else "closed"

    render.table("Disruption budgets", ["workload", "#", "budget", "limits"],
                 [(name, n, describe(b), when(b)) for name, mine in sorted(budgets.items())
                  for n, b in enumerate(mine)])
    held = [r for r in reasons if r.in_flight or r.allowed == 0]
    if held:
        render.table("Disruptions", ["workload", "reason", "in flight", "allowed", "held by"],
                     [(r.workload, r.reason, r.in_flight,
                       "no limit" if r.allowed is None else r.allowed, r.held_text())
                      for r in held])


def register(app: typer.Typer) -> None:
    app.command("status")(status)
