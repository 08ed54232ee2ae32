"""`scoctl slurm resume|suspend|resume-fail HOSTLIST`, `scoctl slurm apply`: Slurm power saving."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import WAIT_HELP, JsonOption

app = typer.Typer(rich_markup_mode=None, name="slurm", no_args_is_help=True,
                  help="Slurm power-saving programs (ResumeProgram, SuspendProgram, "
                       "ResumeFailProgram) hand their hostlists to scoctl here.")

HostList = Annotated[str, typer.Argument(help="A Slurm hostlist, e.g. gpu-a100-[1-2].")]


def _spool(ctx: typer.Context, action: str, hostlist: str, json_out: bool,
           workload: str | None = None) -> None:
    """Record one power request through the spool: no state, no lock (design: State)."""
    import os

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.core.model import is_slug
    from scoctl.core.slurm_power import RESUME, PowerRequest, node_names
    from scoctl.errors import UsageError
    from scoctl.stages.slurm_power import resume_jobs, spool_request

    g = globals_of(ctx, json=json_out)
    if workload is not None and not is_slug(workload):
        raise UsageError(f"--workload: {workload!r} is not a slug")
    jobs = resume_jobs(os.environ.get("SLURM_RESUME_FILE")) if action == RESUME else {}
    request = PowerRequest(action, node_names(hostlist), workload, jobs)
    path = spool_request(g.config(), SystemClock(), request)
    if g.json:
        render.print_json({"spooled": str(path), "action": action,
                           "nodes": list(request.nodes), "workload": workload})
    else:
        render.line(f"{', '.join(request.nodes)}: recorded ({path.name}); the next scoctl run "
                    "applies it")


@app.command("resume")
def resume(
    ctx: typer.Context,
    hostlist: HostList,
    workload: Annotated[str | None, typer.Option(
        "--workload", "-w", help="Claim the nodes for this workload (default: the workload "
        "tracking the job Slurm resumes them for, else the config's workload for the node's "
        "partition, else slurm-<partition>).")] = None,
    json_out: JsonOption = False,
) -> None:
    """ResumeProgram: Slurm wants these CLOUD nodes. Records the request through the spool;
    the next pass (`scoctl run`, or `scoctl slurm apply`) adds them to their workload's claim,
    so plan and acquire create one server per node name.

    Runs as SlurmUser without access to the state: it only writes the spool, takes no lock
    and never waits behind a long run. Exit 0 once recorded; 1 when the spool is not writable
    (Slurm logs it, the node misses ResumeTimeout and ResumeFailProgram runs).

    \b
    Example (slurm.conf):
      ResumeProgram=/usr/lib/scoctl/slurm/resume
    """
    from scoctl.core.slurm_power import RESUME

    _spool(ctx, RESUME, hostlist, json_out, workload)


@app.command("suspend")
def suspend(ctx: typer.Context, hostlist: HostList, json_out: JsonOption = False) -> None:
    """SuspendProgram: Slurm powered these nodes down after SuspendTime idle. Records the
    request through the spool; the next pass drops their demand from the claim and reconcile
    deletes their servers (no drain: they are idle). Exit 0 once recorded.

    \b
    Example (slurm.conf):
      SuspendProgram=/usr/lib/scoctl/slurm/suspend
    """
    from scoctl.core.slurm_power import SUSPEND

    _spool(ctx, SUSPEND, hostlist, json_out)


@app.command("resume-fail")
def resume_fail(ctx: typer.Context, hostlist: HostList, json_out: JsonOption = False) -> None:
    """ResumeFailProgram: these nodes missed ResumeTimeout. Records the request through the
    spool; the next pass puts them back to powered-down (`scontrol update
    State=POWER_DOWN_FORCE`, never DOWN, so Slurm can resume them again and requeues their
    jobs), drops them from the claim, and reconcile deletes whatever was launched.

    \b
    Example (slurm.conf):
      ResumeFailProgram=/usr/lib/scoctl/slurm/resume-fail
    """
    from scoctl.core.slurm_power import RESUME_FAIL

    _spool(ctx, RESUME_FAIL, hostlist, json_out)


@app.command("apply")
def apply(ctx: typer.Context, json_out: JsonOption = False,
          wait: Annotated[float | None, typer.Option("--wait", help=WAIT_HELP)] = None) -> None:
    """Apply the power requests Slurm's programs recorded in the spool (every `scoctl run`
    pass does this too): resumed nodes join their workload's claim, suspended and failed ones
    leave it. Exit 1 when Slurm could not be asked (the requests stay for the next pass).

    \b
    Example:
      scoctl slurm apply --json
    """
    from scoctl.adapters.factory import scheduler_for
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.stages.slurm_power import apply_requests

    g = globals_of(ctx, json=json_out)
    config = g.config()
    with g.writer(wait) as store:
        result = apply_requests(config, store, scheduler_for(config))
    if g.json:
        render.print_json({"applied": result.applied, "resumed": result.resumed,
                           "released": result.released, "powered_down": result.powered_down,
                           "errors": result.errors})
    else:
        render.line(f"{result.applied} power request(s) applied")
        for slug, nodes in sorted(result.resumed.items()):
            render.line(f"{slug}: claim now includes {', '.join(nodes)}")
        for slug, nodes in sorted(result.released.items()):
            render.line(f"{slug}: released {', '.join(nodes)}")
    for error in result.errors:
        render.warn(error)
    if result.errors:
        raise typer.Exit(1)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="slurm")
