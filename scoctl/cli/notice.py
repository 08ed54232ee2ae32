"""`scoctl notice`: announce a reclaim (design: Notices) through the spool."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption


def notice(
    ctx: typer.Context,
    server: Annotated[str | None, typer.Option(
        "--server", help="The server to be reclaimed, one scoctl manages: its id, or its name "
        "when the state knows it (Nova is asked by id only).",
        show_default=False)] = None,
    pool: Annotated[str | None, typer.Option(
        "--pool", help="Reclaim every server of this configured pool.",
        show_default=False)] = None,
    at: Annotated[str, typer.Option(
        "--at", help="The deadline: an RFC 3339 time (2026-05-01T12:00:00Z), or +DURATION "
        "from now (+90s, +5m). A time in the past is acted on at once.",
        show_default=False)] = "",
    reason: Annotated[str, typer.Option("--reason", help="Why (shown in the events).")] = "",
    withdraw: Annotated[bool, typer.Option(
        "--withdraw", help="Take back the notice given to this --server or --pool: its nodes "
        "are uncordoned and back in service at the next pass (no --at).")] = False,
    json_out: JsonOption = False,
) -> None:
    """Announce that a server, or every server of a pool, is reclaimed at --at: the next pass
    re-plans and launches the replacements, cordons and drains the nodes (PodDisruptionBudgets
    respected; Slurm: DRAIN, then requeue) and deletes each server once empty or at the
    deadline.

    For a Blazar lease-end bridge, an oslo.messaging listener or a person; the reclaimer may
    instead set the server metadata key sco:reclaim-at. Takes no lock: the notice goes through
    the spool. Nothing is recorded on bad input (exit 2).

    \b
    Examples:
      scoctl notice --pool c4.xlarge.az1.spot --at +10m --reason "lease ends"
      scoctl notice --pool c4.xlarge.az1.spot --withdraw --reason "lease extended"
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.stages.notice import announce

    g = globals_of(ctx, json=json_out)
    spooled = announce(g.config(), g.state_path(), SystemClock(), server=server, pool=pool,
                       at=at, reason=reason, withdraw=withdraw)
    if g.json:
        render.print_json(spooled.as_json())
        return
    what = f"server {spooled.name} ({spooled.target})" if spooled.kind == "server" \
        else f"every server of pool {spooled.target}"
    if withdraw:
        render.line(f"withdrawal of the reclaim notice for {what} spooled: the next pass "
                    "uncordons what it held")
        return
    render.line(f"reclaim notice for {what} at {spooled.deadline} spooled: the next pass acts "
                "on it")


def register(app: typer.Typer) -> None:
    app.command("notice")(notice)
