"""`scoctl acquire`: turn the latest plan into Nova instances (design: Acquirer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from scoctl.cli.common import JsonOption, WaitOption, finite_seconds

if TYPE_CHECKING:
    from scoctl.cli.render import Progress
    from scoctl.stages.acquire import AcquireResult, LaunchOutcome


def acquire(
    ctx: typer.Context,
    region: Annotated[str | None, typer.Option(
        "--region", "-r", help="Only this region (default: every region of the config).")
                      ] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="Print the create calls it would make (user-data redacted); make "
        "none and write nothing.")] = False,
    watch: Annotated[float, typer.Option(
        "--watch", help="Seconds to watch new servers for NoValidHost / quota ERROR "
        "(0: do not watch).", min=0, max=120, callback=finite_seconds)] = 15.0,
    json_out: JsonOption = False,
    wait: WaitOption = None,
) -> None:
    """Launch what the latest plan needs beyond live and in-flight instances.

    Only pools that gain units get a call: one Nova multi-create per workload and pool (one
    create per Slurm CLOUD node), clamped to the quota headroom, through the host-wide token
    budget, each recorded as a launch intent first. New servers are watched briefly: a capacity
    fault puts the pool on the negative cache and the workload is re-planned and launched
    elsewhere in the same run; quota faults are recorded. A second acquire in a row does nothing.

    \b
    Example:
      scoctl acquire --region region-a --dry-run
    """
    import contextlib

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.runner.compose import acquire_with_fallback, slurm_of
    from scoctl.state import Store

    g = globals_of(ctx, json=json_out)
    config = g.config()
    if region is not None:
        config.region(region)  # ConfigError (exit 2) for an unknown region, before any lock
    store_cm: contextlib.AbstractContextManager[Store]
    if dry_run:
        store_cm = contextlib.closing(g.open_store())  # reads only: no lock
    else:
        store_cm = g.writer(wait)
    observer = _Bar(enabled=not g.json and g.verbosity >= 0)
    try:
        with g.leading() as lead, store_cm as store:
            if not dry_run:  # a non-leader exits 75 naming the leader (design: Runners)
                lead.require([region] if region else [r.name for r in config.regions])
                lead.fence(store)
            result = acquire_with_fallback(
                config, store, SystemClock(), region=region, dry_run=dry_run, watch=watch,
                observer=observer, scheduler=None if dry_run else slurm_of(config))
    finally:
        observer.round_done()
    if g.json:
        render.print_json(result_json(result))
    else:
        _show(result)
    if not result.ok:
        for error in result.errors:
            render.warn(error)
        raise typer.Exit(1)


class _Bar:
    """The progress bar of one round of launches (drawn on stderr when it is a terminal)."""

    def __init__(self, *, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Progress | None = None

    def round_started(self, round_no: int, instances: int) -> None:
        from scoctl.cli.render import Progress

        self.round_done()
        label = "launching" if round_no == 0 else f"launching fallback {round_no}"
        self.bar = Progress(label, instances, enabled=self.enabled)
        self.bar.__enter__()

    def launched(self, outcome: LaunchOutcome) -> None:
        if self.bar is not None:
            self.bar.advance(outcome.requested, f"{outcome.workload} → {outcome.pool}")

    def round_done(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


def result_json(result: AcquireResult) -> dict[str, Any]:
    """The `--json` document of one acquire run."""
    return {
        "dry_run": result.dry_run,
        "generation": result.generation,
        "launches": [{
            "launch_id": o.launch_id, "region": o.region, "workload": o.workload,
            "pool": o.pool, "generation": o.generation, "requested": o.requested,
            "created": o.created, "status": o.status, "reservation_id": o.reservation_id,
            "server_ids": list(o.server_ids), "node_names": list(o.node_names),
            "fallback": o.round_no > 0, "error": o.error,
        } for o in result.launches],
        "calls_planned": [{
            "region": c.region, "workload": c.workload, "pool": c.pool, "name": c.name,
            "flavor": c.flavor, "image": c.image, "az": c.az,
            "networks": c.networks if isinstance(c.networks, str) else list(c.networks),
            "min_count": c.min_count, "max_count": c.max_count, "tags": list(c.tags),
            "metadata": dict(c.metadata), "node_names": list(c.node_names),
            "user_data": c.user_data,
        } for c in result.planned],
        "shortfalls": [{"workload": s.workload, "pool": s.pool, "wanted": s.wanted,
                        "allowed": s.allowed, "limit": s.limit} for s in result.shortfalls],
        "exclusions": [{"pool": e.pool, "until": e.until, "reason": e.reason,
                        "workloads": list(e.workloads)} for e in result.exclusions],
        "quota_faults": [{"workload": q.workload, "pool": q.pool, "launch_id": q.launch_id,
                          "servers": q.servers, "message": q.message,
                          "asynchronous": q.asynchronous} for q in result.quota_faults],
        "replanned": list(result.replanned),
        "powered_down": list(result.powered_down),
        "errors": list(result.errors),
        "calls": result.calls,
        "seconds": round(result.seconds, 3),
        "paused": result.paused or None,
    }


def _show(result: AcquireResult) -> None:
    from scoctl.cli import render

    if result.paused:
        render.line(f"PAUSED: {result.paused}: nothing was created")
    if result.dry_run:
        render.line(f"dry run: {len(result.planned)} create call(s) would be made "
                    f"(plan generation {result.generation}); nothing was sent")
        render.table("Calls", ["workload", "pool", "name", "flavor", "az", "count", "tags"],
                     [(c.workload, c.pool, c.name, c.flavor, c.az,
                       f"{c.min_count}..{c.max_count}", ",".join(c.tags))
                      for c in result.planned])
        for call in result.planned[:1]:
            render.line(f"user-data of {call.name} (secrets redacted):")
            render.line(call.user_data)
    else:
        created = sum(o.created for o in result.launches)
        render.line(f"acquire: {len(result.launches)} launch(es), {created} instance(s), "
                    f"{result.calls} mutating call(s) in {result.seconds:.1f} s "
                    f"(plan generation {result.generation})")
        render.table("Launches", ["workload", "pool", "requested", "created", "status",
                                  "reservation", "launch"],
                     [(o.workload, o.pool, o.requested, o.created,
                       o.status + (" (fallback)" if o.round_no else ""), o.reservation_id or "",
                       o.launch_id) for o in result.launches],
                     empty="nothing to launch: live and in-flight units match the plan")
    if result.shortfalls:
        render.table("Quota shortfalls", ["workload", "pool", "wanted", "allowed", "limit"],
                     [(s.workload, s.pool, s.wanted, s.allowed, s.limit)
                      for s in result.shortfalls])
    if result.exclusions:
        render.table("Pools excluded", ["pool", "until", "workloads", "reason"],
                     [(e.pool, e.until, ",".join(e.workloads), e.reason)
                      for e in result.exclusions])
    if result.quota_faults:
        render.table("Quota faults", ["workload", "pool", "servers", "message"],
                     [(q.workload, q.pool, q.servers, q.message) for q in result.quota_faults])
    if result.replanned:
        render.line(f"re-planned in this run: {', '.join(result.replanned)}")
    if result.powered_down:
        render.line("Slurm nodes back to powered-down after a failed launch: "
                    f"{', '.join(result.powered_down)}")


def register(app: typer.Typer) -> None:
    app.command("acquire")(acquire)
