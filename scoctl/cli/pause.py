"""`scoctl pause` and `scoctl resume`: stop launches or voluntary disruptions during an
incident or a maintenance, for every runner of the state."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption, WaitOption
from scoctl.core.model.vocabulary import PauseScope

LaunchesOption = Annotated[bool, typer.Option(
    "--launches", help="New servers (plans are still made; acquire creates nothing).")]
DisruptionsOption = Annotated[bool, typer.Option(
    "--disruptions", help="Voluntary disruptions: none starts (empty, underutilized, drifted, "
    "expired, rebalanced, unhealthy); those in flight finish.")]


def _scopes(launches: bool, disruptions: bool) -> list[PauseScope]:
    """The scopes named; neither flag names both."""
    named = [s for s, on in ((PauseScope.LAUNCHES, launches),
                             (PauseScope.DISRUPTIONS, disruptions)) if on]
    return named or list(PauseScope)


def _author() -> str:
    import getpass
    import socket

    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def pause(
    ctx: typer.Context,
    launches: LaunchesOption = False,
    disruptions: DisruptionsOption = False,
    until: Annotated[str | None, typer.Option(
        "--until", help="Resume by itself at this RFC 3339 time (2026-05-01T12:00:00Z).",
        show_default=False)] = None,
    for_: Annotated[str | None, typer.Option(
        "--for", help="Resume by itself after this long (90s, 15m, 2h).",
        show_default=False)] = None,
    reason: Annotated[str, typer.Option(
        "--reason", help="Why (required: shown in status, top and the events).",
        show_default=False)] = "",
    wait: WaitOption = None,
    json_out: JsonOption = False,
) -> None:
    """Pause launches, voluntary disruptions, or both (neither flag: both), for every runner
    and host of this state, until --until, for --for, or until `scoctl resume`. Reclaim
    notices are still handled while paused: noticed nodes are drained and deleted before their
    deadline (their replacements launch unless launches are paused). Records PAUSED; takes
    the run lock between passes.

    \b
    Examples:
      scoctl pause --disruptions --for 2h --reason "INC-4711: storage degraded"
      scoctl pause --reason "Nova upgrade" --until 2026-05-01T06:00:00Z
    """
    from datetime import timedelta

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.config.schema import parse_duration
    from scoctl.core import pause as pauses
    from scoctl.core.timefmt import parse_rfc3339
    from scoctl.errors import UsageError
    from scoctl.services import controls

    g = globals_of(ctx, json=json_out)
    if not reason.strip():
        raise UsageError("--reason: say why (it is shown to everyone who looks)")
    if until is not None and for_ is not None:
        raise UsageError("--until and --for: give one of them, not both")
    now = SystemClock().now()
    end = None
    if until is not None:
        try:
            end = parse_rfc3339(until)
        except ValueError as exc:
            raise UsageError(f"--until: {until!r} is not an RFC 3339 time") from exc
        if end <= now:
            raise UsageError(f"--until: {until} is not in the future")
    elif for_ is not None:
        try:
            end = now + timedelta(seconds=parse_duration(for_))
        except ValueError as exc:
            raise UsageError(f"--for: {exc}") from exc
    with g.writer(wait) as store:
        made = controls.pause(store, _scopes(launches, disruptions),
                              now=now, until=end, reason=reason.strip(), author=_author())
    if g.json:
        render.print_json({"paused": pauses.summary({p.scope: p for p in made})})
        return
    for p in made:
        render.line(pauses.describe(p))


def resume(
    ctx: typer.Context,
    launches: LaunchesOption = False,
    disruptions: DisruptionsOption = False,
    wait: WaitOption = None,
    json_out: JsonOption = False,
) -> None:
    """End a pause now (neither flag: every pause). Records RESUMED; the next pass launches
    and disrupts as the plan and the budgets say.

    \b
    Example:
      scoctl resume --disruptions
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.services import controls

    g = globals_of(ctx, json=json_out)
    with g.writer(wait) as store:
        ended = controls.resume(store, _scopes(launches, disruptions),
                                author=_author())
    if g.json:
        render.print_json({"resumed": [p.scope.value for p in ended]})
        return
    render.line("resumed: " + ", ".join(p.scope.value for p in ended) if ended
                else "nothing was paused")


def register(app: typer.Typer) -> None:
    app.command("pause")(pause)
    app.command("resume")(resume)
