"""`scoctl plan`: the incremental portfolio planner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from scoctl.cli.common import JsonOption, WaitOption

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.core.blast import Blast
    from scoctl.stages.plan import PlanView
    from scoctl.state import Store


def plan(
    ctx: typer.Context,
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", "-w", help="Re-plan this workload (repeatable).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Full re-plan of every claim.")] = False,
    claims: Annotated[Path | None, typer.Option(
        "--claims", help="Plan the claims of this YAML/JSON file: with --dry-run a what-if "
        "that writes nothing; without it, the file's claims are recorded as those workloads' "
        "claims (source file) and planned.")] = None,
    explain: Annotated[str | None, typer.Option(
        "--explain", help="Show per pool: units, share, score, why other pools were skipped "
        "or capped, the blast radius of each pool and group, and per disruption reason what "
        "waits on which budget.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and print; write nothing.")
                       ] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 4 when any workload's plan is infeasible or degraded (CI).")
                     ] = False,
    blast: Annotated[bool, typer.Option(
        "--blast", help="The blast radius of every shown plan (JSON: under `blast`), not only "
        "of the --explain workload's.")] = False,
    pretty: Annotated[bool, typer.Option(
        "--pretty", help="Indented JSON (the default when stdout is a terminal; else compact, "
        "one line).")] = False,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """Plan the claims that changed into a new plan generation.

    Floor first on committed pools, then reclaimable units water-filled by score under the pool
    and group caps, across at least min_pools pools.

    Commits one new plan generation when anything changed; untouched workloads keep their rows.

    `--json` prints compact JSON unless stdout is a terminal (or `--pretty`); the blast radius
    is computed for the --explain workload, and with `--blast` for every shown one.

    \b
    Example:
      scoctl plan --claims what-if.yaml --dry-run --check --json
    """
    import contextlib
    import sys

    from scoctl.bulk import collector_paused
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.views import plan_workload_json
    from scoctl.clock import SystemClock
    from scoctl.errors import EXIT_PLAN_CHECK
    from scoctl.stages.plan import plan_view, what_if_store

    # one process over 10,000s of fresh values (config, claims, plans, output): full
    # collections free nothing in it (scoctl.bulk); the planner itself already runs paused
    with collector_paused():
        g = globals_of(ctx, json=json_out)
        config = g.config()
        store_cm: contextlib.AbstractContextManager[Store] = (
            what_if_store(g.state_path(), password_file=config.state_password_file) if dry_run
            else g.writer(wait, create=claims is not None))
        with store_cm as store:
            view = plan_view(config, store, SystemClock(), only=list(workload or []), full=all_,
                             claims_path=claims, dry_run=dry_run, explain=explain,
                             blast=blast)
            waits = _waits(config, store, explain) if explain is not None else []
            placement = _placement(store, explain) if explain is not None else None
        result = view.result
        if result.ranking.stale:
            render.warn(f"ranking URL unreachable: using the last good ranking {result.ranking.id}")
        if g.json:
            render.print_json({
                "generation": result.generation, "ranking": result.ranking.id,
                "changed": list(result.changed), "dry_run": dry_run,
                "workloads": [plan_workload_json(r, explain=(r.workload == explain),
                                                 blast=view.blasts[name].as_json()
                                                 if name in view.blasts else None)
                              | ({"disruption": waits, "rebalance": _rebalance_json(view),
                                  "placement": placement}
                                 if r.workload == explain else {})
                              for name, r in view.records.items()]},
                pretty=pretty or sys.stdout.isatty())
        else:
            _show(view, dry_run)
            if blast:
                for name, shown in view.blasts.items():
                    if name != view.explain:
                        _show_blast(name, shown)
            if explain is not None:
                _show_waits(explain, waits)
                _show_rebalance(view, dry_run)
                _show_placement(explain, placement)
        if check and any(not r.feasible or r.degraded for r in view.records.values()):
            raise typer.Exit(EXIT_PLAN_CHECK)


def _show(view: PlanView, dry_run: bool) -> None:
    from scoctl.cli import render

    result = view.result
    verb = "would commit" if dry_run else ("committed" if result.committed else "unchanged:")
    render.line(f"plan generation {result.generation} {verb} (ranking {result.ranking.id}), "
                f"{len(result.changed)} re-planned in {result.seconds * 1000:.1f} ms")
    rows = []
    for name, r in view.records.items():
        units = sum(u.units for u in r.pools)
        committed = sum(u.share for u in r.pools if u.tier == "committed")
        flag = "infeasible" if not r.feasible else ("degraded" if r.degraded else "ok")
        rows.append((name, units, len(r.pools), f"{committed:.0%}", flag,
                     "; ".join(r.reasons), result.reasons_for_change.get(name, "")))
    render.table("Plans", ["workload", "units", "pools", "committed", "plan", "reasons",
                           "re-planned because"], rows)
    if view.explain is None:
        return
    record = view.records[view.explain]
    render.table(f"{record.workload}: pools holding units",
                 ["pool", "tier", "group", "units", "share", "score"],
                 [(u.pool, u.tier, u.group, u.units, f"{u.share:.1%}", f"{u.score:.3f}")
                  for u in record.pools])
    render.table(f"{record.workload}: why each pool holds what it holds", ["pool", "units", "why"],
                 [(e.get("pool"), e.get("units"), e.get("reason")) for e in record.explain])
    for reason in record.reasons:
        render.line(f"reason: {reason}")
    if view.explain in view.blasts:
        _show_blast(view.explain, view.blasts[view.explain])


def _rebalance_json(view: PlanView) -> dict[str, Any] | None:
    """The explained workload's rebalance (design: Rebalance): None when nothing triggers; else the
    trigger, since when, whether the moves are planned, the units that move and where."""
    decided = view.rebalance
    if decided is None or decided.pending is None:
        return None
    pending = decided.pending
    return {"trigger": pending.trigger.value, "since": pending.since.isoformat(),
            "planned": decided.planned,
            "moves": [{"server": m.server_id, "name": m.name, "pool": m.pool}
                      for m in pending.moves],
            "into": dict(sorted((decided.into or {}).items()))}


def _show_rebalance(view: PlanView, dry_run: bool) -> None:
    from scoctl.cli import render

    shown = _rebalance_json(view)
    if shown is None:
        render.line(f"{view.explain}: no rebalance pending")
        return
    verb = "would move" if dry_run or not shown["planned"] else "moves"
    render.line(f"{view.explain}: rebalance pending ({shown['trigger']}, since "
                f"{shown['since']}); {verb} {len(shown['moves'])} unit(s)"
                + (f" into {', '.join(f'{p} +{n}' for p, n in shown['into'].items())}"
                   if shown["into"] else ""))
    render.table(f"{view.explain}: rebalance moves", ["server", "name", "from pool"],
                 [(m["server"], m["name"], m["pool"]) for m in shown["moves"]])


def _placement(store: Store, workload: str) -> dict[str, Any] | None:
    """Why the workload's pods do not run on its units, when it is queued for that
    (``POD_NOT_ISOLATED`` / ``PODS_UNPLACED``: the token and its latest detail), else None."""
    from scoctl.core.model.vocabulary import WorkloadStatus
    from scoctl.core.tokens import PLACEMENT_TOKENS

    row = store.latest_workload(workload)
    if row is None or row.status != WorkloadStatus.QUEUED or row.last_token not in PLACEMENT_TOKENS:
        return None
    found = [e for e in store.events(workload=workload, after_id=0) if e.token == row.last_token]
    detail = dict(found[-1].detail) if found else {}
    return {"token": row.last_token, **detail}


def _show_placement(workload: str, placement: dict[str, Any] | None) -> None:
    from scoctl.cli import render

    if placement is None:
        render.line(f"{workload}: its pods run on its units, or wait for units on their way")
        return
    render.line(f"{workload}: queued, {placement['token']}: {placement.get('reason', '')}")
    for key in ("names", "missing", "occupants"):
        if placement.get(key):
            render.line(f"  {key}: {', '.join(map(str, placement[key]))}")


def _waits(config: Config, store: Store, workload: str) -> list[dict[str, Any]]:
    """What waits on which budget for `workload` (design: Disruption): the blocks the last reconcile
    stored, and per reason what its budgets allow now (`core.disruption.status`, over the
    instance rows and the recent starts the rates count)."""
    from datetime import timedelta

    from scoctl.cli.views import budget_waits_json
    from scoctl.clock import SystemClock
    from scoctl.core.disruption import status
    from scoctl.core.timefmt import rfc3339
    from scoctl.stages.reconcile import rate_horizon

    now = SystemClock().now()
    rows = {i.id: i for i in store.disrupted(rfc3339(now - timedelta(
        seconds=rate_horizon(config)))) if i.workload == workload}
    rows.update({i.id: i for i in store.instances(workload=workload)})
    budgets = config.disruption_of(workload).budgets
    statuses = status([workload], instances=rows.values(), budgets_of={workload: budgets},
                      now=now)
    blocks = [b for b in store.disruption_blocks() if b.workload == workload]
    return budget_waits_json(statuses, blocks, budgets)


def _show_waits(workload: str, waits: list[dict[str, Any]]) -> None:
    from scoctl.cli import render

    def limit(entry: dict[str, Any]) -> str:
        if not entry["waiting"]:
            return "-"
        budget = entry.get("limit") or {}
        text = f"budget #{entry['budget']}: {budget.get('units', '?')} units"
        if budget.get("reasons"):
            text += " of " + ", ".join(budget["reasons"])
        if budget.get("schedule"):
            text += (f", window {budget['schedule']} for {budget['duration']:g} s "
                     f"({budget['time_zone']})")
        return text

    render.table(f"{workload}: what waits on which disruption budget",
                 ["reason", "in flight", "allowed", "waits on", "until", "window changes"],
                 [(e["reason"], e["in_flight"], "no limit" if e["allowed"] is None
                   else e["allowed"], limit(e),
                   (e["until"] or "a disruption ends") if e["waiting"] else "",
                   e["window_end"] or e["next_window"] or "") for e in waits])


def _show_blast(workload: str, blast: Blast) -> None:
    from scoctl.cli import render

    def held(ok: bool) -> str:
        return "holds" if ok else "breaks"

    render.table(f"{workload}: blast radius (one pool or one group reclaimed at once; "
                 f"coverage {blast.coverage:.0%}, committed {blast.committed:.0%}, floor "
                 f"{blast.floor:.0%})",
                 ["scope", "name", "units", "capacity lost", "coverage after", "coverage",
                  "floor"],
                 [(line.scope, line.name, line.units, f"{line.lost:.1%}",
                   f"{line.coverage_after:.0%}", held(line.coverage_holds),
                   held(line.floor_holds)) for line in (*blast.pools, *blast.groups)])


def register(app: typer.Typer) -> None:
    app.command("plan")(plan)
