"""Benchmark (issue 29): a scale run of the simulated region under `scoctl run --follow`,
printed side by side with the seed-scale run.

It runs the same measurement twice, each in a fresh temporary directory with a fresh state:

* **seed**: the bundled demo as shipped (`scoctl sim up`, the demo config: 42 pods of
  orders-daily, 4 vCPU / 16 GiB each);
* **scale**: a scenario written for the run — `--deployments` Deployments (one workload
  each, contract T1) asking for `--pods` pods in total (750m vCPU / 3 GiB each, so that the
  demo's flavors hold about 20 a node: 40,000 pods are about 2,000 nodes), over a config
  that is the demo's (its flavors, pools, groups, scores) with every pool's depth raised so
  that the region can hold the fleet, Nova's quota unlimited, its conductor and the node
  agent fast.

For each it starts the region, `scoctl init` and the controller (``scoctl run --follow`` in
the background), times pending → every pod running (the controller's start included), then
makes `--changes` demand changes (a Deployment scaled up, or now and then down, each once the
previous one has settled and the controller has recorded its samples) and times change →
committed plan and change → settled, and reads:

* decision p99: of the bench's change → committed plan (all, then the scale-ups — new demand,
  design: Controller's latency — and the scale-downs, whose deleted running pods are no new demand
  and
  wait for the next intake poll), and of the controller's own
  ``placement_decision_seconds`` samples (first sight of the demand → committed plan, per
  workload, design: Controller: `services/latency.py`);
* pending → Ready p99: the controller's ``pending_to_ready_seconds`` samples (per workload:
  first sight → every unit of its plan Ready), and the bench's change → settled;
* controller peak RSS: ``VmHWM`` of /proc/<pid>/status just before it is stopped;
* state size: the state file and its WAL, then.

Every process it starts is stopped by PID: the controller by SIGTERM to its PID, the region by
``scoctl sim down`` (which stops its processes by the PIDs it recorded). The scoctl processes
run this checkout's code (PYTHONPATH is set to it).

Usage: ``python bench/scale_run.py [--pods 40000] [--deployments 8] [--changes 5]
[--only seed|scale] [--keep DIR]``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scoctl.core.latency import quantile
from scoctl.core.model.latency import DECISION, READY
from scoctl.sim import region as sim
from scoctl.state import open_store

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "scoctl" / "data" / "demo.yaml"
STATE = "scoctl-demo.db"  # the demo config's state, relative to the working directory
SIM = ".scoctl-sim"
SEED_TARGET = ("shop", "orders-daily", "orders-daily")  # namespace, Deployment, workload
POD_CPU, POD_MEMORY = "750m", "3Gi"  # the scale run's pods: about 20 on a demo flavor
SIZES = (1, 4, 9, 2, 16, 3, 6, 12, 5, 8)


@dataclass
class Run:
    """What one run measured."""

    name: str
    pods: int = 0
    nodes: int = 0
    to_running: float = 0.0  # controller start → every pod running
    first_plan: float = 0.0  # controller start → every workload's first plan committed
    plans: list[float] = field(default_factory=list)  # change → committed plan
    # of them, the scale-downs: demand that leaves (running pods deleted) is no new demand
    # (design: Controller's latency is new demand's); the next intake poll takes it in
    downs: list[float] = field(default_factory=list)
    ups: list[float] = field(default_factory=list)  # and the scale-ups
    settles: list[float] = field(default_factory=list)  # change → every pod running
    # the controller's own samples, of the first fill and of the changes
    decision: list[float] = field(default_factory=list)
    ready: list[float] = field(default_factory=list)
    decision_changes: list[float] = field(default_factory=list)
    ready_changes: list[float] = field(default_factory=list)
    hwm_mib: float = 0.0
    rss_mib: float = 0.0
    state_mib: float = 0.0
    passes: int = 0
    log: Path | None = None


def env_for() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "OS_"))}
    env["PYTHONPATH"] = str(REPO)  # the scoctl processes run this checkout's code
    return env


def scoctl(cwd: Path, env: dict[str, str], *args: str, timeout: float = 600.0) -> str:
    proc = subprocess.run([sys.executable, "-m", "scoctl", "-q", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"scoctl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc.stdout


def scale_files(home: Path, pods: int, deployments: int) -> tuple[Path, Path, list[str]]:
    """Write the scale run's config and scenario into `home`; returns their paths and the
    workloads (``namespace/name`` of their Deployments)."""
    config = yaml.safe_load(DEMO.read_text(encoding="utf-8"))
    # ~20 pods a unit on average over the demo's flavors; depth for three times that fleet,
    # so that the pool and group caps, not the depth, shape the plan
    units = pods / 20
    depth = sum(int(p["depth"]) for p in config["pools"])
    factor = max(1, math.ceil(3 * units / depth))
    for pool in config["pools"]:
        pool["depth"] = int(pool["depth"]) * factor
    per = [pods // deployments + (1 if i < pods % deployments else 0)
           for i in range(deployments)]
    names = [f"batch-{i:02d}" for i in range(deployments)]
    config["workloads"] = [{"name": n, "contract": "T1", "source": "k8s",
                            "kind": "deployment", "namespace": "scale"} for n in names]
    config_path = home / "scale.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    scenario = {
        "config": "scale.yaml",
        "nova": {"project": "admin",
                 "quota": {"instances": -1, "cores": -1, "ram": "1Pi"},
                 "capacity": "unlimited",
                 "timing": {"schedule": 0.05, "recheck": 0.01, "active": 0.3, "delete": 0.1}},
        "kubernetes": {
            "nodes": [{"name": f"worker-{i}", "cpu": 2, "memory": "8Gi"} for i in (1, 2, 3)],
            "deployments": [
                {"name": n, "namespace": "scale", "replicas": count,
                 "requests": {"cpu": POD_CPU, "memory": POD_MEMORY}, "workload": n,
                 "managed": True, "tolerate_reclaimable": True}
                for n, count in zip(names, per, strict=True)]},
        "agent": {"poll_interval": "0.5s", "ready_after": "0.5s",
                  "reclaim": {"rate_per_hour": 0, "mode": "delete"}, "seed": 8812},
    }
    scenario_path = home / "scale-scenario.yaml"
    scenario_path.write_text(yaml.safe_dump(scenario, sort_keys=False), encoding="utf-8")
    return config_path, scenario_path, [f"scale/{n}" for n in names]


def plan_state(state: Path, workload: str) -> tuple[int, int]:
    """(claim version, claim version of the committed plan) of `workload`."""
    with open_store(state) as store:
        claim = store.claim(workload)
        plan = store.plans(only={workload}, units=False).get(workload)
    return (claim.version if claim else 0, plan.claim_version if plan else 0)


def all_planned(state: Path, workloads: list[str]) -> bool:
    with open_store(state) as store:
        claims = {c.workload: c.version for c in store.claims()}
        plans = store.plans(only=set(workloads), units=False)
    return all(w in claims and w in plans and plans[w].claim_version >= claims[w]
               for w in workloads)


def observed(state: Path) -> bool:
    """The controller holds no open sighting: every demand it saw grow is planned and Ready
    by its own reckoning, its latency samples recorded (`services/latency.py`)."""
    with open_store(state) as store:
        return not store.sightings()


def region_now(directory: Path) -> dict[str, Any]:
    body = sim.status(directory)
    if "error" in body:
        raise RuntimeError(body["error"])
    return body


def settled(body: dict[str, Any]) -> bool:
    """Every pod running, every live server's node Ready."""
    servers = sum(n for s, n in body["servers"]["by_status"].items() if s in ("BUILD", "ACTIVE"))
    nodes, pods = body["nodes"], body["pods"]
    return (servers > 0 and nodes["instances_ready"] >= servers
            and nodes["instances"] == nodes["instances_ready"] and pods["pending"] == 0
            and pods["running"] == pods["total"])


def wait(what: str, probe: Callable[[], bool], timeout: float, interval: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if probe():
                return
        except Exception as exc:  # noqa: BLE001 - a busy emulator or state: try again
            last = f"{type(exc).__name__}: {exc}"
        else:
            last = "not yet"
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s ({last})")
        time.sleep(interval)


def memory_of(pid: int) -> tuple[float, float]:
    """(VmHWM, VmRSS) of `pid` in MiB."""
    values: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            values[key] = int(rest.split()[0]) / 1024
    return values.get("VmHWM", 0.0), values.get("VmRSS", 0.0)


def one_run(name: str, args: argparse.Namespace, keep: Path | None) -> Run:
    """Start the region and the controller, measure, stop both by PID."""
    home = (keep / name) if keep else Path(tempfile.mkdtemp(prefix=f"scoctl-scale-{name}-"))
    home.mkdir(parents=True, exist_ok=True)
    env = env_for()
    if name == "seed":
        env["SCOCTL_CONFIG"] = str(DEMO)
        up = ["sim", "up", "--dir", SIM]
        targets = [f"{SEED_TARGET[0]}/{SEED_TARGET[1]}"]
    else:
        config, scenario, targets = scale_files(home, args.pods, args.deployments)
        env["SCOCTL_CONFIG"] = str(config)
        up = ["sim", "up", "--dir", SIM, "--scenario", str(scenario)]
    workloads = [t.split("/", 1)[1] for t in targets]
    directory, state = home / SIM, home / STATE
    run = Run(name, log=home / "controller.log")
    # timings scale with the fleet: the region's status lists every pod
    poll = 0.25 if name == "seed" else max(0.5, args.pods / 20000)
    started_up = time.monotonic()
    scoctl(home, env, *up)
    print(f"[{name}] region up in {time.monotonic() - started_up:.1f} s ({home})", flush=True)
    controller: subprocess.Popen[bytes] | None = None
    changes_at = math.inf  # when the demand changes began (Unix seconds)
    try:
        scoctl(home, env, "init")
        with run.log.open("wb") as log:
            controller = subprocess.Popen(
                [sys.executable, "-m", "scoctl", "run", "--follow", "--json"], cwd=home,
                env=env, stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        wait(f"[{name}] first plans", lambda: all_planned(state, workloads), args.timeout,
             0.05)
        run.first_plan = time.monotonic() - started
        print(f"[{name}] every workload planned {run.first_plan:.1f} s after the "
              f"controller started", flush=True)
        wait(f"[{name}] every pod running", lambda: settled(region_now(directory)),
             args.timeout, poll)
        run.to_running = time.monotonic() - started
        body = region_now(directory)
        run.pods, run.nodes = body["pods"]["total"], body["nodes"]["instances"]
        print(f"[{name}] {run.pods} pods running on {run.nodes} nodes "
              f"{run.to_running:.1f} s after the controller started", flush=True)
        # the next change must not extend a sighting the controller still holds open
        wait(f"[{name}] the controller's samples", lambda: observed(state), args.timeout, 0.2)
        step = 1 if name == "seed" else max(1, args.pods // (len(targets) * 400))
        changes_at = time.time()
        for i in range(args.changes):
            size = SIZES[i % len(SIZES)] * step
            change = size if i % 4 != 3 else -max(1, size // 2)
            target = targets[i % len(targets)]
            planned, ready = change_demand(directory, state, target, change, args.timeout,
                                           poll)
            run.plans.append(planned)
            (run.downs if change < 0 else run.ups).append(planned)
            run.settles.append(ready)
            print(f"[{name}] change {i + 1}: {target} {change:+d} pods → plan "
                  f"{planned:.2f} s, settled {ready:.1f} s", flush=True)
        if controller.poll() is not None:
            raise SystemExit(f"[{name}] the controller exited early with "
                             f"{controller.returncode}: see {run.log}")
        run.hwm_mib, run.rss_mib = memory_of(controller.pid)
        run.state_mib = sum(p.stat().st_size for p in (state, Path(f"{state}-wal"))
                            if p.exists()) / 2**20
    finally:
        if controller is not None and controller.poll() is None:
            os.kill(controller.pid, signal.SIGTERM)
            try:
                controller.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.kill(controller.pid, signal.SIGKILL)
                controller.wait()
        subprocess.run([sys.executable, "-m", "scoctl", "-q", "sim", "down", "--dir",
                        str(directory)], cwd=home, env=env, check=False,
                       stdout=subprocess.DEVNULL, timeout=120)
    with open_store(state) as store:
        for metric, fill, changes in ((DECISION, run.decision, run.decision_changes),
                                      (READY, run.ready, run.ready_changes)):
            for sample in store.latency_samples(metric):
                (changes if sample.at >= changes_at else fill).append(sample.seconds)
    run.passes = sum(1 for line in run.log.read_text(encoding="utf-8",
                                                     errors="replace").splitlines()
                     if line.startswith("{"))
    return run


def change_demand(directory: Path, state: Path, target: str, change: int, timeout: float,
                  poll: float) -> tuple[float, float]:
    """Scale `target` by `change` pods: seconds to its committed plan and to settled."""
    workload = target.split("/", 1)[1]
    before = plan_state(state, workload)[0]
    replicas = next(int(d["replicas"]) for d in region_now(directory)["deployments"]
                    if f"{d['namespace']}/{d['name']}" == target)
    started = time.monotonic()
    sim.scale(directory, target, max(0, replicas + change))
    wait(f"plan of {target}", lambda: (lambda v: v[0] > before and v[1] >= v[0])(
        plan_state(state, workload)), timeout, 0.01)
    planned = time.monotonic() - started
    wait(f"{target} settled", lambda: settled(region_now(directory)), timeout, poll)
    ready = time.monotonic() - started
    wait(f"the controller's samples of {target}", lambda: observed(state), timeout, 0.2)
    return planned, ready


def p99(values: list[float]) -> str:
    value = quantile(values, 0.99)
    return "-" if value is None else f"{value:.2f}"


def table(runs: list[Run]) -> None:
    rows: list[tuple[str, Callable[[Run], str]]] = [
        ("pods / nodes", lambda r: f"{r.pods} / {r.nodes}"),
        ("controller start → planned (s)", lambda r: f"{r.first_plan:.1f}"),
        ("controller start → all running (s)", lambda r: f"{r.to_running:.1f}"),
        ("change → committed plan p99 (s)", lambda r: f"{p99(r.plans)} ({len(r.plans)})"),
        ("  of scale-ups: p99 (s)", lambda r: f"{p99(r.ups)} ({len(r.ups)})"),
        ("  of scale-downs: p99 (s)", lambda r: f"{p99(r.downs)} ({len(r.downs)})"),
        ("change → all running p99 (s)", lambda r: f"{p99(r.settles)} ({len(r.settles)})"),
        ("decision p99, controller: fill (s)",
         lambda r: f"{p99(r.decision)} ({len(r.decision)})"),
        ("decision p99, controller: changes (s)",
         lambda r: f"{p99(r.decision_changes)} ({len(r.decision_changes)})"),
        ("pending → Ready p99, ctl: fill (s)", lambda r: f"{p99(r.ready)} ({len(r.ready)})"),
        ("pending → Ready p99, ctl: changes (s)",
         lambda r: f"{p99(r.ready_changes)} ({len(r.ready_changes)})"),
        ("controller peak RSS, VmHWM (MiB)", lambda r: f"{r.hwm_mib:.0f}"),
        ("controller RSS at the end (MiB)", lambda r: f"{r.rss_mib:.0f}"),
        ("state + WAL (MiB)", lambda r: f"{r.state_mib:.1f}"),
        ("controller passes", lambda r: str(r.passes)),
    ]
    print(f"\n{'':38}" + "".join(f"{r.name:>18}" for r in runs))
    for label, cell in rows:
        print(f"{label:38}" + "".join(f"{cell(r):>18}" for r in runs))
    print("(n): samples. The controller's metrics (placement_decision_seconds, "
          "pending_to_ready_seconds) are per workload,\nfrom the first sight of its demand "
          "(fill: the pods' creation at `sim up`, so the region's start is in them);\neach "
          "change waits until the controller has closed every sighting, so none spans two.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40000, help="pods of the scale run")
    parser.add_argument("--deployments", type=int, default=8,
                        help="Deployments (workloads) the scale run's pods are split over")
    parser.add_argument("--changes", type=int, default=5, help="demand changes per run")
    parser.add_argument("--only", choices=("seed", "scale"), help="one run only")
    parser.add_argument("--timeout", type=float, default=1200.0,
                        help="seconds for any one wait")
    parser.add_argument("--keep", type=Path, help="work in DIR/seed and DIR/scale, kept")
    args = parser.parse_args(argv)
    names = [args.only] if args.only else ["seed", "scale"]
    started = time.monotonic()
    runs = [one_run(name, args, args.keep) for name in names]
    table(runs)
    print(json.dumps({"wall_s": round(time.monotonic() - started, 1),
                      "runs": [{"name": r.name, "pods": r.pods, "nodes": r.nodes,
                                "to_running_s": round(r.to_running, 2),
                                "plan_p99_s": quantile(r.plans, 0.99),
                                "plan_up_p99_s": quantile(r.ups, 0.99),
                                "plan_down_p99_s": quantile(r.downs, 0.99),
                                "settle_p99_s": quantile(r.settles, 0.99),
                                "decision_p99_s": quantile(r.decision, 0.99),
                                "decision_changes_p99_s": quantile(r.decision_changes, 0.99),
                                "ready_p99_s": quantile(r.ready, 0.99),
                                "ready_changes_p99_s": quantile(r.ready_changes, 0.99),
                                "hwm_mib": round(r.hwm_mib, 1),
                                "state_mib": round(r.state_mib, 2)} for r in runs]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
