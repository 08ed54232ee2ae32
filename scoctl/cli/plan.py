"""`scoctl plan`: the incremental portfolio planner."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scoctl.cli.common import JsonOption, WaitOption

if TYPE_CHECKING:
    from scoctl.core.blast import Blast
    from scoctl.stages.plan import PlanView


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
        "or capped, and the blast radius of each pool and group.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and print; write nothing.")
                       ] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 4 when any workload's plan is infeasible or degraded (CI).")
                     ] = False,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """Plan the claims that changed into a new plan generation.

    Floor first on committed pools, then reclaimable units water-filled by score under the pool
    and group caps, across at least min_pools pools.

    Commits one new plan generation when anything changed; untouched workloads keep their rows.

    \b
    Example:
      scoctl plan --claims what-if.yaml --dry-run --check --json
    """
    import contextlib

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.views import plan_workload_json
    from scoctl.clock import SystemClock
    from scoctl.errors import EXIT_PLAN_CHECK
    from scoctl.stages.plan import plan_view, what_if_store
    from scoctl.state import Store

    g = globals_of(ctx, json=json_out)
    config = g.config()
    store_cm: contextlib.AbstractContextManager[Store] = (
        what_if_store(g.state_path(), password_file=config.state_password_file) if dry_run
        else g.writer(wait, create=claims is not None))
    with store_cm as store:
        view = plan_view(config, store, SystemClock(), only=list(workload or []), full=all_,
                         claims_path=claims, dry_run=dry_run, explain=explain,
                         blast=g.json or explain is not None)
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
                          for name, r in view.records.items()]})
    else:
        _show(view, dry_run)
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
