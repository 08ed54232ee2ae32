"""`scoctl reconcile`: bring the state in line with what Nova, Kubernetes and Slurm hold."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from scoctl.cli.common import JsonOption, WaitOption

if TYPE_CHECKING:
    from scoctl.core.disruption import Disruption
    from scoctl.core.reconcile import Decision
    from scoctl.stages.notice import NoticeResult
    from scoctl.stages.reconcile import ReconcileResult


def reconcile(
    ctx: typer.Context,
    region: Annotated[str | None, typer.Option("--region", help="Only this region.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Read everything, print the decision; change nothing.")] = False,
    no_teardown: Annotated[bool, typer.Option(
        "--no-teardown", help="Never delete the Kubernetes objects of failed workloads.")
                           ] = False,
    explain: Annotated[bool, typer.Option(
        "--explain", help="List each disruption the pass starts (or, with --dry-run, would "
        "start), blocks or holds for a pause: its reason and the budget that allows or "
        "blocks it.")] = False,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """Bring the state in line with what Nova, Kubernetes and Slurm really hold.

    Track every server tagged sco:managed (building → active → ready), delete launches that
    time out or fail (a capacity fault excludes the pool for a while), adopt the servers of
    crashed launches, report orphans, scale down idle units the plan no longer needs (under
    the disruption budget) and tear down failed deployments. Then, on the same server listing,
    handle reclaim notices (design: Notices): take in spooled ones (`scoctl notice`) and the
    sco:reclaim-at metadata key, record RECLAIM_NOTICED, exclude the pool, cordon and drain
    the node, and delete the server once it is empty or at its deadline — so a timer that runs
    the stages one by one handles notices too (the replacements follow in the next plan and
    acquire). A dry run reconciles only.

    A second reconcile in a row changes nothing. Exit 1 when an API failed.

    \b
    Examples:
      scoctl reconcile --region region-a --dry-run --json
      scoctl reconcile --dry-run --explain
    """
    import contextlib

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.errors import EXIT_FAILURE
    from scoctl.runner.compose import reconcile_with_notices
    from scoctl.state import Store

    g = globals_of(ctx, json=json_out)
    config = g.config()
    store_cm: contextlib.AbstractContextManager[Store] = (
        g.open_store() if dry_run else g.writer(wait))
    with g.leading() as lead, store_cm as store:
        if not dry_run:  # a non-leader exits 75 naming the leader (design: Runners)
            lead.require([region] if region else [r.name for r in config.regions])
            lead.fence(store)
        result, notices = reconcile_with_notices(
            config, store, SystemClock(), region=region, dry_run=dry_run,
            teardown=not no_teardown, leads=None if dry_run else lead.leads)
    body = result_json(result, notices)
    if g.json:
        render.print_json(body)
    else:
        _show(result, notices)
        if explain:
            _explain(body)
    errors = [*result.errors, *(notices.errors if notices is not None else ())]
    if errors:
        for error in errors:
            render.warn(error)
        raise typer.Exit(EXIT_FAILURE)


def result_json(result: ReconcileResult, notices: NoticeResult | None = None,
                ) -> dict[str, Any]:
    """The ``--json`` document of a reconcile pass and, unless it was a dry run, of its
    reclaim notices (``notices``)."""
    regions = []
    for r in result.regions:
        d = r.decision
        regions.append({
            "region": r.region,
            "adopted": [i.id for i in d.new_instances],
            "launches": [{"launch": u.launch_id, "status": u.status} for u in d.launch_updates],
            "updates": [{"id": u.id, **u.fields} for u in d.updates],
            "deletions": [{"server": x.server_id or None, "name": x.name, "reason": x.reason,
                           "workload": x.workload, "slurm_node": x.slurm_node}
                          for x in d.deletions],
            "scale_downs": [{"server": s.server_id, "name": s.name, "workload": s.workload,
                             "pool": s.pool} for s in d.scale_downs],
            "exclusions": [{"pool": e.pool, "until": e.until, "reason": e.reason}
                           for e in d.exclusions],
            "events": [{"workload": e.workload, "token": e.token, "level": e.level,
                        "detail": dict(e.detail)} for e in d.events],
            "replan": dict(d.dirty),
            "orphans": [{"server": o.server_id, "name": o.name, "first_seen": o.first_seen,
                         "workload": o.workload, "delete": o.delete} for o in d.orphans],
            "held": {w: dict(p) for w, p in d.held.items()},
            "node_addresses": [{"node": a.node, "address": a.address, "hostname": a.hostname}
                               for a in d.addresses],
            "deleted": list(r.deleted), "scaled_down": list(r.scaled_down),
            "kept": list(r.kept),
            "disruptions": disruptions_json(d),
        })
    return {"dry_run": result.dry_run, "changed": result.changed, "regions": regions,
            "torn_down": list(result.torn_down), "pruned": dict(result.pruned),
            "errors": list(result.errors),
            "notices": None if notices is None else {
                "spooled": notices.spooled,
                "regions": [{"region": r.region, "evicted": r.evicted, "refused": r.refused,
                             "pods_deleted": r.pods_deleted, "deleted": list(r.deleted),
                             "events": [{"workload": e.workload, "token": e.token,
                                         "detail": dict(e.detail)}
                                        for e in r.decision.events]}
                            for r in notices.regions],
                "replan": dict(notices.replan), "errors": list(notices.errors)},
            "seconds": round(result.seconds, 4)}


def disruptions_json(d: Decision) -> list[dict[str, Any]]:
    """Each disruption the decision starts, blocks, or holds for an operator's pause: its
    reason, and the budget that allows (the tightest active one; None: none limits it) or
    blocks it (its index in the workload's budgets, the budget, until when)."""
    from scoctl.cli.views import budget_json
    from scoctl.core.timefmt import rfc3339

    def entry(x: Disruption, verdict: str, **rest: Any) -> dict[str, Any]:
        return {"server": x.server_id, "name": x.name, "workload": x.workload, "pool": x.pool,
                "reason": x.reason.value, "verdict": verdict, **rest}

    out = []
    for x in d.started:
        room = d.allowed.get(x.server_id)
        limited = room is not None and room.budget is not None
        out.append(entry(x, "start", budget=room.index if limited and room else None,
                         limit=budget_json(room.budget) if room and room.budget else None,
                         allowed=room.units if room else None, until=None))
    out += [entry(b.disruption, "blocked", budget=b.index, limit=budget_json(b.budget),
                  allowed=0, until=rfc3339(b.until) if b.until else None)
            for b in d.blocked]
    out += [entry(x, "paused", budget=None, limit=None, allowed=0, until=None)
            for x in d.paused]
    return out


def _explain(body: dict[str, Any]) -> None:
    from scoctl.cli import render

    for r in body["regions"]:
        rows = []
        for x in r["disruptions"]:
            if x["verdict"] == "paused":
                why = "held: disruptions are paused (scoctl status shows the pause)"
            elif x["limit"] is None:
                why = "allowed: no active budget counts this reason"
            else:
                limit = x["limit"]
                said = f"budget #{x['budget']} (units {limit['units']}" + (
                    f", reasons {','.join(limit['reasons'])}" if limit["reasons"] else "") + (
                    f", rate {limit['rate']['units']} per {limit['rate']['per']:g}s"
                    if "rate" in limit else "") + ")"
                why = (f"allowed by {said}: {x['allowed']} may start" if x["verdict"] == "start"
                       else f"blocked by {said}" + (f" until {x['until']}" if x["until"]
                                                     else " until a disruption ends"))
            rows.append((x["name"], x["workload"], x["pool"], x["reason"], x["verdict"], why))
        render.table(f"{r['region']}: disruptions", ["name", "workload", "pool", "reason",
                                                     "verdict", "why"], rows)


def _show(result: ReconcileResult, notices: NoticeResult | None) -> None:
    from scoctl.cli import render

    verb = "would" if result.dry_run else "did"
    for r in result.regions:
        d = r.decision
        render.line(f"{r.region}: {len(d.updates)} instance changes, {len(d.new_instances)} "
                    f"adopted, {len(d.deletions)} deletions, {len(d.scale_downs)} scale-downs, "
                    f"{len(d.exclusions)} exclusions, {len(d.orphans)} orphans ({verb})")
        rows = [(x.name, x.server_id or "-", x.reason) for x in d.deletions]
        rows += [(s.name, s.server_id, "scale-down: idle, not in the plan")
                 for s in d.scale_downs]
        if rows:
            render.table(f"{r.region}: removals", ["name", "server", "why"], rows)
        if d.paused:
            render.line(f"{r.region}: {len(d.paused)} disruption(s) held: disruptions are "
                        "paused (--explain lists them)")
        if d.orphans:
            render.table(f"{r.region}: orphans", ["server", "name", "first seen", "delete"],
                         [(o.server_id, o.name, o.first_seen, o.delete) for o in d.orphans])
    if result.torn_down:
        render.line(f"torn down: {', '.join(result.torn_down)}")
    for n in notices.regions if notices is not None else ():
        if n.decision.events or n.deleted or n.evicted or n.pods_deleted:
            render.line(f"{n.region}: reclaim notices: {len(n.decision.events)} events, "
                        f"{n.evicted} pods evicted, {n.pods_deleted} deleted, servers removed: "
                        f"{', '.join(n.deleted) or 'none'}")
    if not result.changed:
        render.line("nothing to change")


def register(app: typer.Typer) -> None:
    app.command("reconcile")(reconcile)
