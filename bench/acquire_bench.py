"""Benchmark: `acquire` of 1,000 instances over 50 pools against the Nova emulator.

One workload's plan holds `--instances` units spread evenly over `--pools` pools; the emulator
(in this process, fast conductor timings, no quota or capacity limit) is reached through the
real Nova adapter (openstacksdk over HTTP) and the host-wide token budget at `--rate` mutating
calls per second. Reports the mutating calls made (one multi-create per pool), the wall time,
the time until the last create reached Nova, the budget's floor (calls / rate), and a second,
no-op acquire, and the wall time as a ratio to the floor (the aim of issue 16: at most 1.1x).

Usage: ``python bench/acquire_bench.py [--instances 1000] [--pools 50] [--rate 10]``.
Not part of the test command.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from scoctl.clock import SystemClock
from scoctl.config.schema import load_config
from scoctl.core.model import PlanUnitRecord, PlanWorkloadRecord
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.stages.acquire import run_acquire
from scoctl.state import open_store

FAST = {"schedule": 0.05, "recheck": 0.01, "active": 0.2, "delete": 0.05}


def write_world(tmp: Path, url: str, pools: int, rate: int) -> Path:
    """clouds.yaml and a config with `pools` m1.tiny pools in one region."""
    (tmp / "clouds.yaml").write_text(
        "clouds:\n  bench:\n    auth_type: admin_token\n"
        f"    auth: {{endpoint: {url}, token: 'admin:bench'}}\n    region_name: RegionOne\n")
    pool_lines = "".join(
        f"  - {{name: tiny.p{i:02d}, region: region-a, az: nova, flavor: m1.tiny, "
        f"group: g{i % 9}, tier: reclaimable, depth: 1000}}\n" for i in range(pools))
    config = tmp / "config.yaml"
    config.write_text(f"""
state: {tmp / "state.db"}
budget_dir: {tmp / "budget"}
regions:
  - name: region-a
    cloud: bench
    clouds_yaml: {tmp / "clouds.yaml"}
    mutating_calls_per_second: {rate}
    launch: {{image: {IMAGE_ID}, networks: [none]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
{pool_lines}ranking: {{id: r-bench, scores: {{tiny.p00: 0.5}}}}
workloads:
  - {{name: bench, contract: T1, source: k8s}}
bootstrap: {{api_endpoint: '127.0.0.1:6443', ca_cert_hash: 'sha256:{"ab" * 32}'}}
""")
    return config


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--pools", type=int, default=50)
    parser.add_argument("--rate", type=int, default=10)
    parser.add_argument("--watch", type=float, default=20.0)
    args = parser.parse_args(argv)

    emulator = NovaEmulator({"quota": {"instances": -1, "cores": -1, "ram": -1},
                             "capacity": None, "timing": FAST}).start()
    try:
        with tempfile.TemporaryDirectory(prefix="scoctl-acquire-bench-") as tmp_name:
            tmp = Path(tmp_name)
            config = load_config(write_world(tmp, emulator.url, args.pools, args.rate))
            per, extra = divmod(args.instances, args.pools)
            with open_store(config.state, create=True) as store:
                store.commit_plan(ranking="r-bench", full=False, plans=[PlanWorkloadRecord(
                    workload="bench", generation=0, claim_version=1, contract="T1",
                    ranking="r-bench", feasible=True, degraded=False, reasons=(),
                    pools=tuple(PlanUnitRecord(pool=p.name, tier="reclaimable", group=p.group,
                                               units=per + (1 if i < extra else 0),
                                               share=0.0, score=0.5)
                                for i, p in enumerate(config.pools)))])
                started_wall = time.time()
                started = time.perf_counter()
                result = run_acquire(config, store, SystemClock(), watch=args.watch, poll=0.5)
                wall = time.perf_counter() - started
                creates = [t for t, method, path, _ in emulator.timed_calls()
                           if method == "POST" and path == "/v2.1/servers"]
                again = run_acquire(config, store, SystemClock(), watch=args.watch)
                live = sum(1 for i in store.instances() if i.status in ("building", "active"))
                active = sum(1 for i in store.instances() if i.status == "active")
    finally:
        emulator.stop()

    created = sum(o.created for o in result.launches)
    floor = result.calls / args.rate
    span = max(creates) - min(creates) if creates else 0.0
    print(f"instances: {created} created over {len(result.launches)} launches "
          f"({args.pools} pools), {live} live, {active} active after the watch")
    print(f"mutating calls: {result.calls} (one multi-create per pool)")
    print(f"budget floor: {floor:.2f} s ({result.calls} calls / {args.rate} per s)")
    print(f"first to last create at Nova: {span:.2f} s; last create "
          f"{(max(creates) - started_wall) if creates else 0.0:.2f} s after the start, then "
          f"{wall - ((max(creates) - started_wall) if creates else 0.0):.2f} s recording and "
          f"watching")
    print(f"wall time: {wall:.2f} s in all ({wall - floor:+.2f} s vs. the floor), "
          f"{result.seconds:.2f} s in the stage")
    print(f"ratio: {wall / floor:.3f}x the budget floor (aim <= 1.1x)")
    print(f"second acquire: {len(again.launches)} launches, {again.calls} calls, "
          f"{again.seconds * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
