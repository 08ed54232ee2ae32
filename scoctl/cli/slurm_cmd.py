"""`scoctl slurm resume|suspend|resume-fail HOSTLIST`: Slurm power saving into scoctl."""

from __future__ import annotations

from typing import Annotated

import typer

from scoctl.cli.common import JsonOption

app = typer.Typer(rich_markup_mode=None, name="slurm", no_args_is_help=True,
                  help="Slurm power-saving programs (ResumeProgram, SuspendProgram, "
                       "ResumeFailProgram) hand their hostlists to scoctl here.")

HostList = Annotated[str, typer.Argument(help="A Slurm hostlist, e.g. gpu-a100-[1-2].")]


def _expand(config: object, hostlist: str) -> list[str]:
    """`scontrol show hostnames HOSTLIST` (Slurm's own expansion)."""
    import subprocess

    from scoctl.config.schema import Config
    from scoctl.errors import ApiError, UsageError

    assert isinstance(config, Config)
    try:
        done = subprocess.run([config.slurm.scontrol, "show", "hostnames", hostlist],
                              capture_output=True, text=True, timeout=config.slurm.timeout,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ApiError(f"scontrol show hostnames: {exc}") from exc
    if done.returncode != 0:
        raise UsageError(f"HOSTLIST {hostlist!r}: {done.stderr.strip() or 'not a hostlist'}")
    return [n for n in done.stdout.split() if n]


def _resume_jobs() -> dict[str, str]:
    """node → job id from Slurm's SLURM_RESUME_FILE (ResumeProgram only)."""
    import json
    import os

    from scoctl.core.intake import expand_hostlist

    path = os.environ.get("SLURM_RESUME_FILE")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    out: dict[str, str] = {}
    for job in data.get("jobs") or []:
        for node in expand_hostlist(str(job.get("nodes") or "")):
            out.setdefault(node, str(job.get("job_id")))
    return out


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
    """ResumeProgram: Slurm wants these CLOUD nodes. Adds them to their workload's claim, so
    plan and acquire create one server per node name (the next `scoctl run`).

    Writes one claim in one short SQLite transaction without the run lock: Slurm gives
    ResumeProgram no retry, so it must never wait behind a long run.

    \b
    Example (slurm.conf):
      ResumeProgram=/usr/lib/scoctl/slurm/resume
    """
    from scoctl.adapters.factory import scheduler_for
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.stages.slurm_power import resume_nodes

    g = globals_of(ctx, json=json_out)
    config = g.config()
    names = _expand(config, hostlist)
    with g.open_store() as store:
        added = resume_nodes(config, store, scheduler_for(config), names, workload=workload,
                             jobs=_resume_jobs())
    if g.json:
        render.print_json({"resumed": added})
    else:
        for slug, nodes in sorted(added.items()):
            render.line(f"{slug}: claim now includes {', '.join(nodes)}")


def _release(ctx: typer.Context, hostlist: str, reason: str, json_out: bool,
             power_down: bool) -> None:
    from scoctl.adapters.factory import scheduler_for
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.core.model import NodeRelease
    from scoctl.errors import ApiError
    from scoctl.stages.slurm_power import POWER_DOWN, release_nodes

    g = globals_of(ctx, json=json_out)
    config = g.config()
    names = _expand(config, hostlist)
    failed: list[str] = []
    if power_down:
        scheduler = scheduler_for(config)
        for name in names:
            try:
                scheduler.update_node(name, state=POWER_DOWN, reason=f"scoctl: {reason}")
            except ApiError as exc:
                failed.append(f"{name}: {exc}")
    with g.open_store() as store:
        dropped = release_nodes(store, [NodeRelease(n, reason) for n in names], suspend=True)
    if g.json:
        render.print_json({"released": dropped, "nodes": names, "errors": failed})
    else:
        render.line(f"released {', '.join(names)} ({reason}); their servers go on the next "
                    "reconcile")
    for error in failed:
        render.warn(error)
    if failed:
        raise typer.Exit(1)


@app.command("suspend")
def suspend(ctx: typer.Context, hostlist: HostList, json_out: JsonOption = False) -> None:
    """SuspendProgram: Slurm powered these nodes down after SuspendTime idle. Their demand
    leaves the claim and the next reconcile deletes their servers (no drain: they are idle).

    \b
    Example (slurm.conf):
      SuspendProgram=/usr/lib/scoctl/slurm/suspend
    """
    _release(ctx, hostlist, "suspended by Slurm power saving", json_out, power_down=False)


@app.command("resume-fail")
def resume_fail(ctx: typer.Context, hostlist: HostList, json_out: JsonOption = False) -> None:
    """ResumeFailProgram: these nodes missed ResumeTimeout. Puts them back to powered-down
    (`scontrol update State=POWER_DOWN_FORCE`, never DOWN, so Slurm can resume them again and
    requeues their jobs), drops them from the claim; reconcile deletes whatever was launched.

    \b
    Example (slurm.conf):
      ResumeFailProgram=/usr/lib/scoctl/slurm/resume-fail
    """
    _release(ctx, hostlist, "resume failed (ResumeTimeout)", json_out, power_down=True)


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="slurm")
