"""Benchmark: failover after kill -9 of the leader, with the default lease (design: Runners).

Two runners share one PostgreSQL state (a private cluster started here, as the tests do) and
the Nova emulator; nothing else: `scoctl run --interval` loops (``--mode interval``) or
`scoctl run --follow` controllers (``--mode follow``, what the service on each host runs).
Each trial grows the demand by one unit, kills the leader with SIGKILL, measures the time until
the standby holds a live lease, checks that no unit was launched twice, and starts a fresh
standby. Reports p50, p99 and the maximum over the trials against the target (ttl + one renew
interval: 20 s with the default ttl of 15 s) as a ratio.

Usage: ``python bench/failover_bench.py [--mode interval|follow] [--trials 20] [--ttl 15]``.
Not part of the test command (20 trials take about 7 minutes with the default ttl).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.runners import MODES, Fleet, Runner, fast_emulator, wait_until  # noqa: E402
from tests.fixtures.postgres import start_cluster, stop_cluster  # noqa: E402


def running(runner: Runner) -> Runner:
    wait_until(lambda: "pass in" in runner.output(), bool, timeout=60)
    return runner


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--ttl", type=float, default=15.0)
    parser.add_argument("--mode", choices=MODES, default="interval",
                        help="interval: run --interval loops; follow: run --follow controllers")
    args = parser.parse_args(argv)
    target = args.ttl + args.ttl / 3

    base = Path(tempfile.mkdtemp(prefix="scoctl-failover-bench-"))
    pg_dir = Path(tempfile.mkdtemp(prefix="scoctl-failover-pg-"))
    cluster, server = start_cluster(pg_dir)
    emulator = fast_emulator()
    work = base / "runners"
    work.mkdir()
    fleet = Fleet(work, cluster.url(cluster.create_database()), cluster.password_file(base),
                  emulator, project="bench", ttl=args.ttl, mode=args.mode)
    takeovers: list[float] = []
    units = 1
    try:
        fleet.set_units(units)
        running(fleet.start())
        running(fleet.start())
        leader = fleet.leader(timeout=60)
        for trial in range(args.trials):
            units += 1
            fleet.set_units(units)
            time.sleep((trial % 5) * 0.05)
            killed_at = fleet.kill(leader)
            new = fleet.leader(timeout=target + 30, not_=leader)
            takeovers.append(time.monotonic() - killed_at)
            if fleet.servers() > units:
                raise AssertionError(f"trial {trial}: {fleet.servers()} servers for {units}")
            print(f"trial {trial + 1:2d}: {takeovers[-1]:6.2f} s", flush=True)
            running(fleet.start())
            leader = new
        wait_until(lambda: fleet.servers() + fleet.in_flight(), lambda n: n == units, 60)
    finally:
        fleet.stop()
        emulator.stop()
        stop_cluster(server)
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(pg_dir, ignore_errors=True)

    p50, p99 = statistics.median(takeovers), percentile(takeovers, 0.99)
    print(f"failover after kill -9 of a run --{args.mode} leader over {len(takeovers)} trials "
          f"(ttl {args.ttl:g} s): "
          f"p50 {p50:.2f} s, p99 {p99:.2f} s, max {max(takeovers):.2f} s")
    print(f"target ttl + ttl/3 = {target:.2f} s: p99 is {p99 / target:.2f}x the target; "
          f"no unit launched twice ({units} units)")
    return 0 if p99 <= target else 1


if __name__ == "__main__":
    sys.exit(main())
