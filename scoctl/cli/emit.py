"""`scoctl emit`: record a token through the spool (for hooks and wrappers)."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption


def emit(
    ctx: typer.Context,
    token: Annotated[str, typer.Argument(help="The token, e.g. SLURM_JOB_SUBMITTED.")],
    workload: Annotated[str, typer.Option("--workload", "-w", help="The workload slug.")],
    job_id: Annotated[str | None, typer.Option("--job-id", help="Slurm job id.")] = None,
    detail: Annotated[list[str] | None, typer.Option(
        "--detail", "-d", help="Extra detail as KEY=VALUE (repeatable).")] = None,
    hook: Annotated[bool, typer.Option(
        "--hook", help="Hook mode: never fail (exit 0 even on error), so a Slurm hook "
        "can never drain a node or fail a job.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Drop a token into the event spool; `scoctl watch` records it in the state.

    Takes no lock and never blocks, so Slurm's PrologSlurmctld/EpilogSlurmctld (as SlurmUser)
    and a submit wrapper (as the submitting user) can call it.

    \b
    Example:
      scoctl emit SLURM_JOB_STATUS --workload train-7 --job-id 42 --detail state=COMPLETED
    """
    import re
    import sys

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock, rfc3339
    from scoctl.core.model import is_slug
    from scoctl.errors import ConfigError, ScoctlError, UsageError
    from scoctl.host.spool import write_event

    g = globals_of(ctx, json=json_out)
    try:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]{1,63}", token):
            raise UsageError(f"TOKEN: {token!r} is not a token (UPPER_SNAKE_CASE)")
        if not is_slug(workload):
            raise UsageError(f"--workload: {workload!r} is not a slug")
        details: dict[str, str] = {}
        for item in detail or []:
            key, sep, value = item.partition("=")
            if not sep or not key:
                raise UsageError(f"--detail: {item!r} is not KEY=VALUE")
            details[key] = value
        if job_id:
            details["job_id"] = job_id
        try:
            path = write_event(g.config().spool, ts=rfc3339(SystemClock().now()), token=token,
                               workload=workload, detail=details)
        except ConfigError as exc:  # token and workload are checked above: the details
            raise UsageError(f"--detail: {exc}") from None
    except (ScoctlError, OSError) as exc:
        if hook:
            print(f"scoctl: emit (hook mode, ignored): {exc}", file=sys.stderr)
            return
        if isinstance(exc, OSError):
            raise ScoctlError(f"cannot write to the spool: {exc}") from exc
        raise
    if g.json:
        render.print_json({"spooled": str(path), "token": token, "workload": workload})


def register(app: typer.Typer) -> None:
    app.command("emit")(emit)
