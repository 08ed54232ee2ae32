"""`scoctl drift resume`: go on with a drift rollout that halted (design: Drift)."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption, WaitOption

app = typer.Typer(rich_markup_mode=None, name="drift", no_args_is_help=True,
                  help="Drift rollouts: a changed image or launch spec rolled through the "
                       "fleet (design: Drift).")


@app.command("resume")
def resume(
    ctx: typer.Context,
    workload: Annotated[str | None, typer.Option(
        "--workload", "-w", help="Resume this workload's rollout only (default: every "
        "workload's).", show_default=False)] = None,
    wait: WaitOption = None,
    json_out: JsonOption = False,
) -> None:
    """Resume a rollout halted after drift.halt_after failed replacements in a row
    (DRIFT_ROLLOUT_HALTED): the failures before now no longer count, and the next reconcile
    starts the canary again. Records DRIFT_RESUMED; takes the run lock between passes. A
    rollout that is not halted (or no halted rollout at all, without --workload) is left as
    it is: exit 2, saying so.

    \b
    Example:
      scoctl drift resume --workload web
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.core.model import is_slug
    from scoctl.errors import UsageError
    from scoctl.services.drift import halted_or_why
    from scoctl.services.drift import resume as record_resume

    g = globals_of(ctx, json=json_out)
    if workload is not None and not is_slug(workload):
        raise UsageError(f"--workload: {workload!r} is not a slug")
    with g.writer(wait) as store:
        why = halted_or_why(g.config(), store, SystemClock().now(), workload)
        if why is not None:
            raise UsageError(why)
        event = record_resume(store, workload)
    if g.json:
        render.print_json({"resumed": workload or "*", "event": event})
    else:
        render.line(f"drift rollout of {workload or 'every workload'} resumed: the next "
                    "reconcile goes on")


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="drift")
