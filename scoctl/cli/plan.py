"""`scoctl plan`: the incremental portfolio planner."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from scoctl.cli.common import WAIT_HELP, JsonOption


def plan(
    ctx: typer.Context,
    workload: Annotated[list[str] | None, typer.Option(
        "--workload", "-w", help="Re-plan this workload (repeatable).")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Full re-plan of every claim.")] = False,
    claims: Annotated[Path | None, typer.Option(
        "--claims", help="Plan the claims of this YAML/JSON file instead of the state's "
        "(what-if; add --dry-run to write nothing).")] = None,
    explain: Annotated[str | None, typer.Option(
        "--explain", help="Show per pool: units, share, score, why other pools were skipped "
        "or capped, and the blast radius of each pool and group.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Decide and print; write nothing.")
                       ] = False,
    check: Annotated[bool, typer.Option(
        "--check", help="Exit 4 when any workload's plan is infeasible or degraded (CI).")
                     ] = False,
    json_out: JsonOption = False,
    wait: Annotated[float | None, typer.Option("--wait", help=WAIT_HELP)] = None,
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
    from dataclasses import replace

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.views import plan_workload_json
    from scoctl.clock import SystemClock
    from scoctl.core.blast import blast_radii
    from scoctl.errors import EXIT_PLAN_CHECK
    from scoctl.stages.plan import claims_from_state, run_plan

    g = globals_of(ctx, json=json_out)
    config = g.config()
    clock = SystemClock()
    exists = g.state_path().exists()
    if dry_run:
        # a dry run takes no lock and writes nothing; without a state file it plans from empty
        from scoctl.state import Store, open_store

        if exists:
            store_cm: contextlib.AbstractContextManager[Store] = g.open_store()
        else:
            import tempfile

            tmp = tempfile.TemporaryDirectory()
            store_cm = contextlib.closing(open_store(Path(tmp.name) / "what-if.db", create=True))
    else:
        store_cm = g.writer(wait, create=claims is not None)
    with store_cm as store:
        only = list(workload or [])
        result = run_plan(config, store, clock, only=only, full=all_, claims_path=claims,
                          dry_run=dry_run, explain=[explain] if explain else [])
        stored = store.plans() if not dry_run else {}
        wanted = g.json or bool(explain)  # the text table needs no blast radius
        known_claims = claims_from_state(store, config) if claims is None and wanted else []
        explained = result.records.get(explain) if explain else None
        if explain and explained is None:
            # an unchanged claim re-plans to the very same plan (no churn), so a dry re-plan of
            # just this workload explains the committed one
            probe = run_plan(config, store, clock, only=[explain], dry_run=True,
                             explain=[explain], option="--explain")
            explained = probe.records.get(explain)
    records = dict(stored)
    records.update(result.records)
    if claims is not None:
        records = dict(result.records)
    if explained is not None:
        records[explained.workload] = replace(explained,
                                              generation=records[explain].generation
                                              if explain in records else explained.generation)
    shown = records if g.json else {k: v for k, v in records.items() if k == explain}
    blasts = blast_radii(shown, known_claims, result.plans, config.flavors, config.pools,
                         {name: c.floor for name, c in config.contracts.items()})
    body = {
        "generation": result.generation,
        "ranking": result.ranking.id,
        "changed": list(result.changed),
        "dry_run": dry_run,
        "workloads": [plan_workload_json(r, explain=(r.workload == explain),
                                         blast=blasts[name].as_json() if name in blasts
                                         else None)
                      for name, r in sorted(records.items())],
    }
    if explain and explain not in records:
        from scoctl.errors import UsageError

        raise UsageError(f"--explain {explain}: no plan for this workload")
    if result.ranking.stale:
        render.warn(f"ranking URL unreachable: using the last good ranking {result.ranking.id}")
    if g.json:
        render.print_json(body)
    else:
        verb = "would commit" if dry_run else ("committed" if result.committed else "unchanged:")
        render.line(f"plan generation {result.generation} {verb} (ranking {result.ranking.id}), "
                    f"{len(result.changed)} re-planned in {result.seconds * 1000:.1f} ms")
        rows = []
        for name, r in sorted(records.items()):
            units = sum(u.units for u in r.pools)
            committed = sum(u.share for u in r.pools if u.tier == "committed")
            flag = "infeasible" if not r.feasible else ("degraded" if r.degraded else "ok")
            rows.append((name, units, len(r.pools), f"{committed:.0%}", flag,
                         "; ".join(r.reasons), result.reasons_for_change.get(name, "")))
        render.table("Plans", ["workload", "units", "pools", "committed", "plan", "reasons",
                               "re-planned because"], rows)
        if explain:
            _show_explain(records[explain], result)
            if explain in blasts:
                _show_blast(explain, blasts[explain])
    if check and any(not r.feasible or r.degraded for r in records.values()):
        raise typer.Exit(EXIT_PLAN_CHECK)


def _show_explain(record: object, result: object) -> None:
    from scoctl.cli import render
    from scoctl.core.model import PlanWorkloadRecord

    assert isinstance(record, PlanWorkloadRecord)
    render.table(f"{record.workload}: pools holding units",
                 ["pool", "tier", "group", "units", "share", "score"],
                 [(u.pool, u.tier, u.group, u.units, f"{u.share:.1%}", f"{u.score:.3f}")
                  for u in record.pools])
    render.table(f"{record.workload}: why each pool holds what it holds", ["pool", "units", "why"],
                 [(e.get("pool"), e.get("units"), e.get("reason")) for e in record.explain])
    for reason in record.reasons:
        render.line(f"reason: {reason}")


def _show_blast(workload: str, blast: object) -> None:
    from scoctl.cli import render
    from scoctl.core.blast import Blast

    assert isinstance(blast, Blast)

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
