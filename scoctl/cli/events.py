"""`scoctl events`: the token and event log."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from scoctl.cli.common import JsonOption

if TYPE_CHECKING:
    from datetime import datetime

    from scoctl.core.model import EventRecord
    from scoctl.state import Store


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
    token: Annotated[list[str] | None, typer.Option(
        "--token", "-t", help="Only events with this token (CAPACITY_EXCEEDED, or its "
        "reason CapacityExceeded); repeat for several.", show_default=False)] = None,
    level: Annotated[str | None, typer.Option(
        "--level", help="Only events at this level or above: debug, info, warning, error "
        "(Normal = info, Warning = warning).", show_default=False)] = None,
) -> None:
    """Print the event log (tokens, statuses, gate verdicts, cloud calls), oldest first:
    each event's TOKEN (as DD-0018 and the hooks name it) and its kubectl-style REASON.

    With --json, one JSON object per line: {"ts", "workload", "token", "level", "status",
    "detail"}. A --workload the state has never seen is an error (exit 2), unless --follow
    waits for it. Read-only: never takes the run lock.

    \b
    Example:
      scoctl events --workload orders-daily --since 1h --level warning
      scoctl events --token DISRUPTION_BLOCKED --json
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
    tokens = [_token(t) for t in token] if token else None
    levels = _levels(level) if level is not None else None
    since_ts = _since(since, SystemClock().now()) if since else None
    g.config(reader=True)  # a config failing a check only launching needs: a warning
    store = g.open_store(reader=True)
    last = 0
    header = not g.json
    try:
        if workload is not None and not _known(store, workload):
            if not follow:
                raise UsageError(f"--workload: no such workload {workload!r} (no workload "
                                 "and no event of that name in the state)")
            render.warn(f"no workload {workload!r} yet: waiting for its events")
        while True:
            batch = store.events(workload=workload, since=since_ts, after_id=last, limit=limit,
                                 tokens=tokens, levels=levels)
            for e in batch:
                last = e.id
                if g.json:
                    render.print_json_line(event_json(e))
                    continue
                if header:
                    render.line(HEADER)
                    header = False
                render.line(event_line(e, render.styled(e.status) if e.status else "-"))
            if not follow:
                break
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()


# kubectl get events' columns (time, type, reason, object, message), with the token before
# the reason it is written as: operators know the tokens from DD-0018 and the hooks
HEADER = (f"{'TIME':<27} {'TYPE':<7} {'TOKEN':<26} {'REASON':<26} {'OBJECT':<20} "
          f"{'STATUS':<10} MESSAGE")


def event_line(e: EventRecord, status: str) -> str:
    """One event as a row of `HEADER`: its detail as ``key=value`` for people
    (`core.text.human_detail`), never Python's reprs."""
    from scoctl.core.text import human_detail

    return (f"{e.ts:<27} {event_type(e.level):<7} {e.token:<26} {reason_of(e.token):<26} "
            f"{e.workload or '-':<20} {status:<10} {human_detail(e.detail)}")


def _known(store: Store, workload: str) -> bool:
    """The state has a workload row, or an event, of that name."""
    return any(w.slug == workload for w in store.workloads()) \
        or bool(store.events(workload=workload, limit=1))


def _token(text: str) -> str:
    """``--token``: a token (``CAPACITY_EXCEEDED``) or the reason it is shown as
    (``CapacityExceeded``), as the token. UsageError (exit 2) for anything else."""
    from scoctl.errors import UsageError

    if text and text.replace("_", "").isalnum() and text.upper() == text:
        return text
    if text.isalnum() and text[:1].isupper():
        out = "".join(f"_{ch}" if ch.isupper() and i else ch for i, ch in enumerate(text))
        return out.upper()
    raise UsageError(f"--token: {text!r} is neither a token (CAPACITY_EXCEEDED) nor a reason "
                     "(CapacityExceeded)")


def _levels(text: str) -> list[str]:
    """``--level``: that level and the more severe ones; kubectl's types name them too."""
    from scoctl.core.model.vocabulary import EventLevel
    from scoctl.errors import UsageError

    named = {"normal": "info"}.get(text.lower(), text.lower())
    try:
        return list(EventLevel(named).at_least())
    except ValueError:
        raise UsageError(f"--level: {text!r} is not one of debug, info, warning, error "
                         "(or Normal, Warning)") from None


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
