"""`scoctl run`: the whole loop (watch → plan → acquire → reconcile → notice) under one run lock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from scoctl.cli.common import JsonOption, WaitOption

if TYPE_CHECKING:
    from scoctl.cli.context import Globals
    from scoctl.clock import Clock
    from scoctl.config.schema import Config
    from scoctl.runner.compose import PassReport
    from scoctl.services.leadership import Leadership


def run(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="One pass, then exit (for timers).")
                    ] = False,
    interval: Annotated[str | None, typer.Option(
        "--interval", help="Loop: one pass every INTERVAL (e.g. 10s, 1m) until stopped.")
                        ] = None,
    follow: Annotated[bool, typer.Option(
        "--follow", help="The controller: one process that watches Kubernetes, polls Slurm and "
        "the spool, and runs each stage as soon as it is due (design: Controller).")] = False,
    region: Annotated[str | None, typer.Option("--region", help="Only this region.")] = None,
    no_teardown: Annotated[bool, typer.Option(
        "--no-teardown", help="Never delete the Kubernetes objects of failed workloads.")
                           ] = False,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """The placement loop: watch → plan → acquire → reconcile → notice under one run lock.

    Run the placement loop: watch (one pass) → plan → acquire → reconcile → reclaim notices
    (a new one is planned and acquired again at once), holding the run lock for the whole pass,
    with per-stage timings and metrics (config `metrics.textfile`).

    Exit codes (--once): 0 success; 1 a stage's API failed after retries (the other stages
    still ran; the failed ones are named); 2 bad config; 75 another scoctl run holds the lock.
    With --interval a pass that finds the lock held is skipped; SIGTERM or SIGINT (Ctrl-C)
    stops the loop after the pass in progress and exits 0; a SIGINT that cuts a pass short
    (--once, or a second Ctrl-C) exits 130.

    With --follow (the controller, for configs/systemd/scoctl-controller.service) demand is
    planned and acquired once the intake batch window closes (1 s idle / 5 s at most),
    reconcile runs every timeouts.reconcile_interval (every timeouts.notice_poll while
    reclaimable capacity is held, for reclaim notices) and right after launches, and the lock
    is held per pass only. SIGTERM finishes the pass in hand and exits 0; SIGHUP reloads the
    config (an invalid one is refused and the old one kept). On a PostgreSQL state the
    controller of each host competes for every region's lease and makes mutating Nova calls
    only for the regions it leads (design: Runners).

    \b
    Example:
      scoctl run --once --json
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.config.schema import parse_duration
    from scoctl.errors import UsageError
    from scoctl.runner.loop import run_loop

    if sum((once, bool(interval), follow)) > 1:
        raise UsageError("give one of --once, --interval and --follow")
    period = 0.0
    if interval:
        try:
            period = parse_duration(interval)
        except ValueError as exc:
            raise UsageError(f"--interval: {exc}") from exc
        if period <= 0:
            raise UsageError("--interval must be more than 0")
    g = globals_of(ctx, json=json_out)
    config = g.config()
    if region is not None:
        config.region(region)  # UsageError naming --region before anything runs
    if follow:
        with g.leading() as lead:  # gives this controller's terms up at the end
            _follow(g, config, SystemClock(), teardown=not no_teardown, wait=wait, lead=lead)
        return

    with g.leading() as lead:  # gives this runner's terms up at the end: a standby leads
        outcome = run_loop(config, SystemClock(), lambda: g.writer(wait), period=period,
                           teardown=not no_teardown, region=region,
                           on_pass=lambda report: _show(g, report),
                           on_skip=render.warn, lead=lead)
    if outcome.interrupted:
        render.warn("interrupted in the middle of a pass")
    elif outcome.stopped_by:
        render.note(f"{outcome.stopped_by}: stopped")
    if outcome.code:
        raise typer.Exit(outcome.code)


def _show(g: Globals, report: PassReport) -> None:
    """One pass, whichever driver ran it: a JSON line, or its steps' times and errors."""
    from scoctl.cli import render

    if g.json:  # every line stamped (RFC 3339, UTC, to the millisecond) as it is written
        from datetime import UTC, datetime

        stamp = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        render.print_json_line({"ts": stamp, **report.as_dict()})
        return
    render.line(f"pass in {report.seconds * 1000:.0f} ms: " + ", ".join(
        f"{s.name} {s.seconds * 1000:.0f} ms" + ("" if s.ok else " FAILED")
        + (f" (skipped: {s.skipped})" if s.skipped else "") for s in report.steps))
    for step in report.steps:
        for error in step.errors:
            render.warn(f"{step.name}: {error}")


def _follow(g: Globals, config: Config, clock: Clock, *, teardown: bool,
            wait: float | None, lead: Leadership) -> None:
    from scoctl.cli import render
    from scoctl.config.schema import load_config, resolve_config_path
    from scoctl.runner.controller import serve

    code = serve(config, g.state_path(), clock, lock_path=g.lock_path(),
                 lock_wait=config.timeouts.lock_wait if wait is None else wait,
                 reload=lambda: load_config(resolve_config_path(g.config_option)[0]),
                 on_pass=lambda report: _show(g, report), report=render.warn,
                 inform=render.note, teardown=teardown, lead=lead)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
