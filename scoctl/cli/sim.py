"""`scoctl sim up | down | status | reclaim | scale | fail-node`: a simulated region on
127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scoctl.cli.common import JsonOption, finite_seconds

sim_app = typer.Typer(rich_markup_mode=None,
    help=("A simulated region on 127.0.0.1 (Kubernetes and Nova emulators plus a node agent) "
          "for the demo and CI dry-runs: no cloud account needed.\n\n"
          "Example: scoctl sim up && scoctl run --once && scoctl sim status && scoctl sim down"),
    no_args_is_help=True,
)

DirOption = Annotated[Path, typer.Option(
    "--dir", help="The simulated region's folder (PIDs, logs, kubeconfig, clouds.yaml).")]


def _dir(value: Path) -> Path:
    return value if value.is_absolute() else Path.cwd() / value


@sim_app.command("up")
def up(
    ctx: typer.Context,
    scenario: Annotated[Path | None, typer.Option(
        "--scenario", help="Scenario file (default: the bundled one: 42 pending pods of "
        "orders-daily, the demo config's flavors and AZs).", show_default=False)] = None,
    directory: DirOption = Path(".scoctl-sim"),
    json_out: JsonOption = False,
) -> None:
    """Start the simulated region: the Kubernetes API emulator, the Nova emulator and the node
    agent, detached, seeded from the scenario. Writes DIR/kubeconfig, DIR/clouds.yaml (entry
    `scoctl-sim`) and DIR/join-token. Running it again on a running region changes nothing;
    a process of it found dead (its PID gone) is started again on its port, from its seed, and
    the live ones are left alone.

    \b
    Example:
      scoctl sim up --scenario my-scenario.yaml --dir .scoctl-sim
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.config.schema import load_config
    from scoctl.sim import region
    from scoctl.sim.scenario import BUNDLED, load_scenario

    g = globals_of(ctx, json=json_out)
    loaded = load_scenario(scenario)
    if loaded.config == BUNDLED:
        config = load_config(None)
    elif loaded.config is not None:
        config = load_config(loaded.config_path())
    else:
        config = g.config()
    path = _dir(directory)
    if not g.json:
        render.info(f"starting the simulated region in {path} (scenario {loaded.source}, "
                    f"flavors and AZs from {config.source_name})")
    state = region.up(path, loaded, config)
    if g.json:
        render.print_json(state.as_json())
        return
    if state.already_running:
        render.line(f"the simulated region in {path} is already running (started "
                    f"{state.started_at})")
    elif state.restarted:
        render.line(f"restarted {', '.join(state.restarted)} in the simulated region in {path}")
    else:
        render.line(f"simulated region up in {state.start_seconds:.2f} s")
    _show(state.as_json())


def _show(body: dict[str, Any]) -> None:
    from scoctl.cli import render

    render.table(None, ["process", "pid", "running", "log"],
                 [(c["name"], c["pid"], "yes" if c["alive"] else "NO", c["log"])
                  for c in body.get("components", [])])
    if body.get("k8s_url"):
        render.line(f"kubernetes  {body['k8s_url']}  (kubeconfig {body['kubeconfig']})")
        render.line(f"nova        {body['nova_url']}  (clouds.yaml {body['clouds_yaml']}, "
                    f"cloud {body['cloud']})")


@sim_app.command("down")
def down(
    ctx: typer.Context,
    directory: DirOption = Path(".scoctl-sim"),
    timeout: Annotated[float, typer.Option(
        "--timeout", help="Seconds to wait after SIGTERM before SIGKILL.",
        callback=finite_seconds)] = 10.0,
    json_out: JsonOption = False,
) -> None:
    """Stop the simulated region: every recorded process by its PID (SIGTERM, then SIGKILL
    after --timeout). Logs stay in the folder. Safe to run when nothing runs.

    \b
    Example:
      scoctl sim down --dir .scoctl-sim
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.sim import region

    g = globals_of(ctx, json=json_out)
    path = _dir(directory)
    stopped = region.down(path, timeout=timeout)
    if g.json:
        render.print_json({"directory": str(path), "stopped": [
            {**c.as_json(), "how": how} for c, how in stopped]})
        return
    if not stopped:
        render.line(f"no simulated region in {path}")
        return
    for component, how in stopped:
        render.line(f"{component.name} (PID {component.pid}): {how}")
    render.line(f"simulated region in {path} stopped")


@sim_app.command("status")
def status(
    ctx: typer.Context,
    directory: DirOption = Path(".scoctl-sim"),
    json_out: JsonOption = False,
) -> None:
    """Show the simulated region: its processes, Nova servers by status, Kubernetes nodes
    (the instances' and Ready), pods pending and running, Deployments. Exit 1 when it is not
    running.

    \b
    Example:
      scoctl sim status --json
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.errors import EXIT_FAILURE
    from scoctl.sim import region

    g = globals_of(ctx, json=json_out)
    path = _dir(directory)
    body = region.status(path)
    if g.json:
        render.print_json(body)
    else:
        state = "running" if body.get("running") else "not running"
        render.line(f"simulated region in {path}: {state}")
        _show(body)
        if "servers" in body:
            servers = body["servers"]
            counts = ", ".join(f"{k} {v}" for k, v in servers["by_status"].items()) or "none"
            nodes, pods = body["nodes"], body["pods"]
            render.line(f"servers     {servers['managed']} scoctl-managed ({counts})")
            render.line(f"nodes       {nodes['total']} ({nodes['ready']} Ready); instances "
                        f"{nodes['instances']} ({nodes['instances_ready']} Ready)")
            render.line(f"pods        {pods['pending']} pending, {pods['running']} running "
                        f"of {pods['total']}")
            for item in servers.get("noticed", []):
                render.line(f"notice      {item['name']} is reclaimed at {item['reclaim_at']}")
            for d in body["deployments"]:
                render.line(f"deployment  {d['namespace']}/{d['name']}: {d['available']}/"
                            f"{d['replicas']} available (Available={d['condition']})")
        if "error" in body:
            render.warn(body["error"])
    if not body.get("running"):
        raise typer.Exit(EXIT_FAILURE)


@sim_app.command("reclaim")
def reclaim(
    ctx: typer.Context,
    count: Annotated[int | None, typer.Option(
        "--count", "-n", min=1, help="Reclaim this many random reclaimable instances.")] = None,
    server: Annotated[str | None, typer.Option(
        "--server", help="Reclaim this server (id or name).")] = None,
    mode: Annotated[str, typer.Option(
        "--mode", help="delete: the server vanishes; error: it goes ERROR.")] = "delete",
    seed: Annotated[int | None, typer.Option(
        "--seed", help="Make the random choice repeatable.")] = None,
    notice: Annotated[str | None, typer.Option(
        "--notice", help="Give notice first (e.g. 60s): set the server metadata key "
        "sco:reclaim-at to now + NOTICE; the node agent reclaims at that time.",
        show_default=False)] = None,
    directory: DirOption = Path(".scoctl-sim"),
    json_out: JsonOption = False,
) -> None:
    """Spot-reclaim instances of the simulated region, as the provider would: the server is
    deleted (or put in ERROR), the node agent removes its Kubernetes node and replaces the pods
    that ran there with pending ones. Default: one random reclaimable instance. With --notice
    the reclaim is announced first (sco:reclaim-at) and happens at the deadline.

    \b
    Example:
      scoctl sim reclaim --count 2 --notice 60s
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.errors import UsageError
    from scoctl.sim import region
    from scoctl.sim.scenario import RECLAIM_MODES

    g = globals_of(ctx, json=json_out)
    if count is not None and server is not None:
        raise UsageError("give --count or --server, not both")
    if mode not in RECLAIM_MODES:
        raise UsageError(f"--mode must be one of {', '.join(RECLAIM_MODES)}")
    lead = None
    if notice is not None:
        from scoctl.config.schema import parse_duration

        try:
            lead = parse_duration(notice)
        except ValueError as exc:
            raise UsageError(f"--notice {notice!r}: {exc}") from None
    taken = region.reclaim(_dir(directory), count=count if server is None else None,
                           server=server, mode=mode, seed=seed, notice=lead)
    if g.json:
        render.print_json({"noticed" if lead is not None else "reclaimed": taken})
        return
    if not taken:
        render.line("nothing to reclaim: no ACTIVE reclaimable instance")
    for item in taken:
        if lead is not None:
            render.line(f"notice: {item['name']} ({item['id']}) is reclaimed at "
                        f"{item['reclaim_at']} ({item['mode']})")
        else:
            render.line(f"reclaimed {item['name']} ({item['id']}): {item['mode']}")


@sim_app.command("scale")
def scale(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(
        metavar="NAMESPACE/DEPLOYMENT", help="The Deployment to scale, e.g. shop/orders-daily.")],
    replicas: Annotated[int, typer.Option(
        "--replicas", min=0, help="The new replica count (0: demand ends).")],
    directory: DirOption = Path(".scoctl-sim"),
    json_out: JsonOption = False,
) -> None:
    """Scale a Deployment of the simulated region, as `kubectl scale` would: its ReplicaSet
    deletes the surplus pods as the ReplicaSet controller picks them (unassigned, pending, not
    Ready, then those on nodes holding more of its replicas, then the newest) or creates new
    pending ones; the node agent no longer replaces pods beyond the new count. With
    --replicas 0 every instance node becomes idle.

    \b
    Example:
      scoctl sim scale shop/orders-daily --replicas 0
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.sim import region

    g = globals_of(ctx, json=json_out)
    done = region.scale(_dir(directory), target, replicas)
    if g.json:
        render.print_json(done)
        return
    render.line(f"deployment {done['namespace']}/{done['name']} scaled from "
                f"{done['replicas_before']} to {done['replicas']} replicas: "
                f"{len(done['pods_deleted'])} pods deleted, {len(done['pods_created'])} created")


@sim_app.command("fail-node")
def fail_node(
    ctx: typer.Context,
    server: Annotated[str, typer.Argument(
        metavar="SERVER", help="The server (id or name) whose Node fails.")],
    directory: DirOption = Path(".scoctl-sim"),
    json_out: JsonOption = False,
) -> None:
    """Fail a server's Kubernetes Node for good while the server stays ACTIVE: its kubelet
    stops reporting, the node lifecycle controller turns the Node NotReady (Ready=Unknown,
    tainted node.kubernetes.io/unreachable) after its grace period, and it never turns Ready
    again, so that a repair of the unhealthy unit runs end to end.

    \b
    Example:
      scoctl sim fail-node sco-orders-daily-l-0123456789ab-1
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.sim import region

    g = globals_of(ctx, json=json_out)
    done = region.fail_node(_dir(directory), server)
    if g.json:
        render.print_json({"failed": done})
        return
    render.line(f"node {done['node']} of {done['name']} ({done['id']}) fails: its kubelet "
                f"stopped; the server stays {done['status']}")


def register(app: typer.Typer) -> None:
    app.add_typer(sim_app, name="sim")
