"""Benchmark: `scoctl run --follow` on the simulated region, demand change → committed plan and
→ every node Ready.

Starts `scoctl sim up` (Kubernetes + Nova emulators and the node agent, as processes) in a
temporary directory with the bundled demo config, a fresh state, and the controller
(``scoctl run --follow`` in the background, stopped by its PID). After the seed's 42 pods are
placed, it makes `--trials` demand changes of different sizes (orders-daily scaled up by 1 to
16 pods, then back down by some), each once the previous one has settled, and times:

* change → committed plan: from just before the pods are created (or deleted) until the state
  holds a plan of the workload's new claim version;
* change → nodes Ready: until every live instance's node is Ready and no pod is pending.

Prints p50 / p99 of both, and the p99 against the target of design: Controller (batch idle + 0.5 s)
as a
ratio. Usage: ``python bench/controller_bench.py [--trials 20]``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from scoctl.config.schema import load_config
from scoctl.core.latency import quantile
from scoctl.sim import region as sim
from scoctl.state import open_store

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.runners import wait_until  # noqa: E402  (the suite's own polling helper)

DEMO = REPO / "scoctl" / "data" / "demo.yaml"
TARGET = "shop/orders-daily"
WORKLOAD = "orders-daily"
SIZES = (1, 4, 9, 2, 16, 3, 6, 12, 5, 8)


def plan_state(state: Path) -> tuple[int, int, int]:
    """(claim version, claim pods, claim version of the committed plan) of the workload."""
    with open_store(state) as store:
        claim = store.claim(WORKLOAD)
        plan = store.plans(only={WORKLOAD}, units=False).get(WORKLOAD)
    return (claim.version if claim else 0, claim.pods if claim else 0,
            plan.claim_version if plan else 0)


def settled(directory: Path) -> bool:
    body = sim.status(directory)
    servers = sum(n for s, n in body["servers"]["by_status"].items() if s in ("BUILD", "ACTIVE"))
    nodes = body["nodes"]
    return (servers > 0 and nodes["instances_ready"] >= servers
            and nodes["instances"] == nodes["instances_ready"] and body["pods"]["pending"] == 0)


def replicas(directory: Path) -> int:
    return int(next(d["replicas"] for d in sim.status(directory)["deployments"]
                    if f"{d['namespace']}/{d['name']}" == TARGET))


def trial(directory: Path, state: Path, change: int) -> tuple[float, float]:
    """One demand change of `change` pods: seconds to the committed plan and to Ready."""
    before = plan_state(state)[0]
    target = replicas(directory) + change
    started = time.monotonic()
    sim.scale(directory, TARGET, target)
    wait_until(lambda: plan_state(state), lambda v: v[0] > before and v[2] >= v[0], 60,
               interval=0.01)
    planned = time.monotonic() - started
    wait_until(lambda: settled(directory), bool, 300)
    return planned, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit 1 when the p99 misses the target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args(argv)
    config = load_config(DEMO)
    target = config.intake.batch_idle + 0.5
    home = Path(tempfile.mkdtemp(prefix="scoctl-controller-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env.update(SCOCTL_CONFIG=str(DEMO), PYTHONPATH=str(REPO))
    scoctl = [sys.executable, "-m", "scoctl"]
    directory, state = home / ".scoctl-sim", home / "scoctl-demo.db"
    subprocess.run([*scoctl, "sim", "up"], cwd=home, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    controller: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run([*scoctl, "init"], cwd=home, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        log = (home / "controller.log").open("wb")
        controller = subprocess.Popen([*scoctl, "run", "--follow", "--json"], cwd=home,
                                      env=env, stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        wait_until(lambda: plan_state(state), lambda v: v[0] > 0 and v[2] >= v[0], 60,
                   interval=0.01)
        seed_plan = time.monotonic() - started
        wait_until(lambda: settled(directory), bool, 300)
        seed_ready = time.monotonic() - started
        print(f"seed (42 pods, controller start included): plan {seed_plan:.2f} s, "
              f"Ready {seed_ready:.2f} s")
        plans: list[float] = []
        readies: list[float] = []
        for i in range(args.trials):
            size = SIZES[i % len(SIZES)]
            change = size if i % 4 != 3 else -max(1, size // 2)
            planned, ready = trial(directory, state, change)
            plans.append(planned)
            readies.append(ready)
            print(f"trial {i + 1:2d}: {change:+3d} pods → plan {planned:.3f} s, "
                  f"Ready {ready:.2f} s")
    finally:
        if controller is not None:
            controller.send_signal(signal.SIGTERM)
            controller.wait(timeout=30)
        subprocess.run([*scoctl, "sim", "down", "--dir", str(directory)], cwd=home, env=env,
                       check=False, stdout=subprocess.DEVNULL)
    summary: dict[str, Any] = {
        "trials": args.trials, "target_s": target,
        "plan_p50_s": quantile(plans, 0.5), "plan_p99_s": quantile(plans, 0.99),
        "ready_p50_s": quantile(readies, 0.5), "ready_p99_s": quantile(readies, 0.99)}
    p99 = summary["plan_p99_s"] or 0.0
    print(f"change → committed plan: p50 {summary['plan_p50_s']:.3f} s, p99 {p99:.3f} s "
          f"(target {target:.1f} s: {p99 / target:.2f}× the target)")
    print(f"change → nodes Ready:    p50 {summary['ready_p50_s']:.2f} s, "
          f"p99 {summary['ready_p99_s']:.2f} s")
    print(json.dumps(summary))
    return 0 if p99 <= target else 1


if __name__ == "__main__":
    sys.exit(main())
