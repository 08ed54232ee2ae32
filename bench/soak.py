"""Soak: `scoctl run --interval` on the simulated region for a while, with reclaims and demand
changes, to see that the loop stays flat (issue 17: connections leaked, RSS grew every sample).

In a fresh working directory (the bundled demo config: its state, spool and sim folder are
relative to it) it starts `scoctl sim up`, `scoctl init`, then one `scoctl run --interval`
process, and meanwhile reclaims a random spot instance every `--reclaim-every` seconds and
scales the demo's Deployment through `--replicas` (one value after the other, cycling) every
`--scale-every` seconds. It samples the run process (RSS, open file descriptors, TCP sockets),
the state file (with its WAL) and the event rate (events recorded per minute) after the first
minute and at the end, and prints both with the ratio end / start; then it stops everything by
PID (SIGTERM; `scoctl sim down`).

Usage: ``python bench/soak.py [--minutes 10] [--interval 5s] [--reclaim-every 45]
[--scale-every 120] [--replicas 20,60,0,42] [--keep DIR]``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
STATE = "scoctl-demo.db"
SIM = ".scoctl-sim"
DEPLOYMENT = "shop/orders-daily"


@dataclass
class Sample:
    """What the loop holds at one moment."""

    at: float
    passes: int
    rss_mib: float
    fds: int
    sockets: int
    state_kib: float
    events_per_min: float
    instances: int


@dataclass
class Passes:
    """The run process's `--json` lines, counted by a reader thread."""

    total: int = 0
    failed: int = 0
    seconds: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # of the failed passes, stage: error
    lock: threading.Lock = field(default_factory=threading.Lock)

    def read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            try:
                result = json.loads(line)
            except ValueError:
                continue
            with self.lock:
                self.total += 1
                self.failed += 0 if result.get("ok") else 1
                self.seconds.append(float(result.get("seconds", 0.0)))
                self.errors += [f"pass {self.total}: {s['stage']}: {e}"
                                for s in result.get("steps", []) for e in s.get("errors", [])]


def scoctl(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "scoctl", "-q", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise SystemExit(f"scoctl {' '.join(args)} exited {proc.returncode}: {proc.stderr}")
    return proc


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "OS_"))}
    env["PYTHONPATH"] = str(REPO)
    return env


def events_per_minute(state: Path, window: float = 60.0) -> tuple[float, int]:
    """Events recorded in the last `window` seconds (per minute), and live instances."""
    since = (datetime.now(UTC) - timedelta(seconds=window)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    conn = sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=30)
    try:
        events = conn.execute("SELECT COUNT(*) FROM events WHERE ts >= ?", [since]).fetchone()[0]
        live = conn.execute("SELECT COUNT(*) FROM instances WHERE status NOT IN "
                            "('deleted', 'error')").fetchone()[0]
    finally:
        conn.close()
    return events * 60.0 / window, int(live)


def sample(run: psutil.Process, cwd: Path, passes: Passes, started: float) -> Sample:
    state = cwd / STATE
    size = sum(p.stat().st_size for p in (state, Path(f"{state}-wal")) if p.exists())
    rate, live = events_per_minute(state)
    with passes.lock:
        done = passes.total
    return Sample(at=time.monotonic() - started, passes=done,
                  rss_mib=run.memory_info().rss / 2**20, fds=run.num_fds(),
                  sockets=len(run.net_connections(kind="tcp")), state_kib=size / 1024,
                  events_per_min=rate, instances=live)


def drive(cwd: Path, args: argparse.Namespace, end: float, rng: random.Random) -> list[str]:
    """Reclaims and demand changes until `end`; returns what was done, for the report."""
    replicas = [int(x) for x in args.replicas.split(",")]
    done: list[str] = []
    next_reclaim = time.monotonic() + args.reclaim_every
    next_scale = time.monotonic() + args.scale_every
    step = 0
    while time.monotonic() < end:
        now = time.monotonic()
        if now >= next_reclaim:
            out = scoctl(cwd, "sim", "reclaim", "--count", "1", "--seed",
                         str(rng.randrange(10**6)), "--json", check=False)
            taken = json.loads(out.stdout).get("reclaimed", []) if out.returncode == 0 else []
            done.append(f"reclaim x{len(taken)}")
            next_reclaim = now + args.reclaim_every
        if now >= next_scale:
            count = replicas[step % len(replicas)]
            step += 1
            scoctl(cwd, "sim", "scale", DEPLOYMENT, "--replicas", str(count), check=False)
            done.append(f"scale to {count}")
            next_scale = now + args.scale_every
        time.sleep(min(1.0, max(0.0, end - time.monotonic())))
    return done


def report(first: Sample, last: Sample, passes: Passes, actions: list[str]) -> None:
    rows = [("passes", first.passes, last.passes),
            ("RSS (MiB)", first.rss_mib, last.rss_mib),
            ("open file descriptors", first.fds, last.fds),
            ("TCP sockets", first.sockets, last.sockets),
            ("state + WAL (KiB)", first.state_kib, last.state_kib),
            ("events per minute (last minute)", first.events_per_min, last.events_per_min),
            ("live instances", first.instances, last.instances)]
    print(f"\nsoak: {last.at / 60:.1f} min, {passes.total} passes ({passes.failed} failed), "
          f"pass p50 {sorted(passes.seconds)[len(passes.seconds) // 2]:.2f} s, "
          f"max {max(passes.seconds):.2f} s")
    reclaims = sum(int(a.split("x")[1]) for a in actions if a.startswith("reclaim"))
    print(f"driver: {reclaims} instances reclaimed, "
          f"{sum(a.startswith('scale') for a in actions)} demand changes")
    for error in passes.errors[:10]:
        print(f"  failed {error}")
    print(f"{'':34} {'start':>10} {'end':>10} {'end/start':>10}")
    for name, start, end in rows:
        ratio = f"{end / start:.2f}" if start else "-"
        print(f"{name:34} {start:10.1f} {end:10.1f} {ratio:>10}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--interval", default="5s", help="scoctl run --interval")
    parser.add_argument("--reclaim-every", type=float, default=45.0, help="seconds")
    parser.add_argument("--scale-every", type=float, default=120.0, help="seconds")
    parser.add_argument("--replicas", default="20,60,0,42", help="demand steps, cycling")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--keep", type=Path, help="work in this directory and leave it")
    args = parser.parse_args(argv)

    holder = None if args.keep else tempfile.TemporaryDirectory(prefix="scoctl-soak-")
    cwd = args.keep or Path(holder.name)  # type: ignore[union-attr]
    cwd.mkdir(parents=True, exist_ok=True)
    scoctl(cwd, "sim", "up", "--dir", SIM)
    run: subprocess.Popen[str] | None = None
    try:
        scoctl(cwd, "init")
        run = subprocess.Popen([sys.executable, "-m", "scoctl", "-q", "run", "--interval",
                                args.interval, "--json"], cwd=cwd, env=_env(), text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        passes = Passes()
        threading.Thread(target=passes.read, args=(run.stdout,), daemon=True).start()
        started = time.monotonic()
        end = started + args.minutes * 60
        process = psutil.Process(run.pid)
        rng = random.Random(args.seed)
        actions = drive(cwd, args, min(end, started + 60), rng)  # the first minute
        first = sample(process, cwd, passes, started)
        print(f"after the first minute: {first}", flush=True)
        actions += drive(cwd, args, end, rng)
        last = sample(process, cwd, passes, started)
        report(first, last, passes, actions)
        if run.poll() is not None:
            print(f"scoctl run exited early with {run.returncode}")
            return 1
        return 0
    finally:
        if run is not None and run.poll() is None:
            os.kill(run.pid, signal.SIGTERM)
            run.wait(60)
        scoctl(cwd, "sim", "down", "--dir", SIM, check=False)
        if holder is not None:
            holder.cleanup()


if __name__ == "__main__":
    sys.exit(main())
