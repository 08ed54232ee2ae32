"""`scoctl events`: the token and event log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from scoctl.cli.common import JsonOption

if TYPE_CHECKING:
    from datetime import datetime


def events(
    ctx: typer.Context,
    json_out: JsonOption = False,
    workload: Annotated[str | None, typer.Option("--workload", "-w",
                                                 help="Only this workload's events.")] = None,
    since: Annotated[str | None, typer.Option(
        "--since", help="Only events at or after this time: RFC 3339 (2026-11-30T05:00:00Z) "
        "or an age (30m, 2h, 1d).")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f",
                                         help="Keep printing new events until interrupted.")
                      ] = False,
    limit: Annotated[int | None, typer.Option("--limit", min=1,
                                              help="At most this many events.")] = None,
) -> None:
    """Print the event log (tokens, statuses, gate verdicts, cloud calls), oldest first.

    With --json, one JSON object per line: {"ts", "workload", "token", "level", "status",
    "detail"}. Read-only: never takes the run lock.

    \b
    Example:
      scoctl events --workload orders-daily --since 1h --json
    """
    import time

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.views import event_json
    from scoctl.clock import SystemClock
    from scoctl.core.model import is_slug
    from scoctl.errors import UsageError

    g = globals_of(ctx, json=json_out)
    if workload is not None and not is_slug(workload):
        raise UsageError(f"--workload: {workload!r} is not a slug")
    since_ts = _since(since, SystemClock().now()) if since else None
    store = g.open_store(reader=True)
    last = 0
    header = not g.json
    try:
        while True:
            batch = store.events(workload=workload, since=since_ts, after_id=last, limit=limit)
            for e in batch:
                last = e.id
                if g.json:
                    render.print_json_line(event_json(e))
                    continue
                if header:  # kubectl get events' columns: time, type, reason, object, message
                    render.line(f"{'TIME':<27} {'TYPE':<7} {'REASON':<28} {'OBJECT':<20} "
                                f"{'STATUS':<10} MESSAGE")
                    header = False
                detail = " ".join(f"{k}={v}" for k, v in sorted(e.detail.items()))
                status = render.styled(e.status) if e.status else "-"
                render.line(f"{e.ts:<27} {event_type(e.level):<7} {reason_of(e.token):<28} "
                            f"{e.workload or '-':<20} {status:<10} {detail}")
            if not follow:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


def reason_of(token: str) -> str:
    """A token as a Kubernetes Event reason: ``PLAN_UPDATED`` → ``PlanUpdated``."""
    return "".join(part.capitalize() for part in token.split("_") if part)


def event_type(level: str) -> str:
    """The level as a Kubernetes Event type: ``Normal`` for info, ``Warning`` otherwise."""
    return "Normal" if level in ("info", "debug") else "Warning"


def _since(text: str, now: datetime) -> str:
    """``--since``: an age (``30m``, ``2h``, ``1d``) before `now`, or an RFC 3339 time, as the
    state's timestamp text. UsageError (exit 2) naming --since for anything else."""
    from datetime import timedelta

    from scoctl.clock import parse_rfc3339, rfc3339
    from scoctl.config.schema import parse_duration
    from scoctl.errors import UsageError

    try:
        age = parse_duration(text)
    except ValueError as exc:
        if "too long" in str(exc):
            raise UsageError(f"--since: {exc}") from exc
    else:
        try:
            return rfc3339(now - timedelta(seconds=age))
        except OverflowError as exc:  # an age reaching back before year 1
            raise UsageError(f"--since: {text!r} reaches back before year 1") from exc
    try:
        return rfc3339(parse_rfc3339(text))
    except (ValueError, OverflowError) as exc:
        raise UsageError(f"--since: {text!r} is neither RFC 3339 nor an age") from exc


def register(app: typer.Typer) -> None:
    app.command("events")(events)
