"""`scoctl watch`: demand intake and the runtime status backstop."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption, WaitOption


def watch(
    ctx: typer.Context,
    source: Annotated[str, typer.Option(
        "--source", help="k8s, slurm or all (every configured one).")] = "all",
    once: Annotated[bool, typer.Option(
        "--once", help="List once, record, exit (for timers; the default).")] = False,
    follow_: Annotated[bool, typer.Option(
        "--follow", help="Stream until interrupted (SIGINT/SIGTERM); claims are committed "
        "after the intake batch window.")] = False,
    no_teardown: Annotated[bool, typer.Option(
        "--no-teardown", help="Never delete the Kubernetes objects of failed workloads.")
                           ] = False,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """Turn pending pods and Slurm jobs into claims, and keep workload statuses honest.

    Ingests the event spool first, then reads Kubernetes (provisionable pods of managed
    workloads, pods on nodes scoctl launched, quota blocks, availability) and Slurm (pending and
    tracked jobs). A claim gets a new version only when its normalised demand changes; a quota
    block or a pod no node or pool can ever hold fails the workload and tears down its objects
    labelled sco/managed=true (unless --no-teardown). Exit 1 when a source's API failed.

    \b
    Example:
      scoctl watch --source k8s --once --json
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.errors import EXIT_FAILURE, UsageError
    from scoctl.runner.serve import connected
    from scoctl.runner.watch import serve_watch
    from scoctl.stages.watch import WatchResult, resolve_sources, run_pass

    if once and follow_:
        raise UsageError("--once and --follow exclude each other")
    g = globals_of(ctx, json=json_out)
    config = g.config()
    sources = resolve_sources(config, source)
    clock = SystemClock()

    def show(result: WatchResult) -> None:
        if g.json:
            body = result.as_dict()
            if follow_:
                render.print_json_line(body)
            else:
                render.print_json(body)
            return
        if follow_:
            parts = [f"{name}: {c.seen} seen, {c.claims_changed} claim(s) changed, "
                     f"{c.tokens} token(s)" for name, c in result.sources.items()]
            render.line(f"watch pass: {'; '.join(parts)}; spool {result.spool_events}; "
                        f"{result.seconds * 1000:.0f} ms")
        else:
            render.table("Watch", ["source", "seen", "workloads", "claims written",
                                   "claims changed", "tokens", "error"],
                         [(name, c.seen, c.workloads, c.claims_written, c.claims_changed,
                           c.tokens, c.error or "") for name, c in result.sources.items()])
            render.line(f"spool: {result.spool_events} event(s); changed claims: "
                        f"{', '.join(sorted(result.changed)) or 'none'}; "
                        f"{result.seconds:.3f} s")
        for t in result.teardowns:
            render.info(f"teardown {t.workload}: deleted {', '.join(t.deleted) or 'nothing'}"
                        + (f"; kept {', '.join(t.kept)}" if t.kept else "")
                        + (f"; {t.skipped}" if t.skipped else ""))
        for warning in result.warnings:
            render.warn(warning)
        for error in result.errors:
            render.warn(error)

    if follow_:
        serve_watch(config, g.state_path(), clock, sources=sources, lock_path=g.lock_path(),
                    lock_wait=config.timeouts.lock_wait if wait is None else wait,
                    on_pass=show, on_error=render.warn, teardown=not no_teardown)
        return
    with connected(config, sources) as (cluster, scheduler):
        with g.writer(wait, create=True) as store:
            result = run_pass(config, store, clock, sources=sources, teardown=not no_teardown,
                              cluster=cluster, scheduler=scheduler)
    show(result)
    if result.errors:
        raise typer.Exit(EXIT_FAILURE)


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)
