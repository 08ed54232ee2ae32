"""Several scoctl runners on one PostgreSQL state, against the Nova emulator (design: Runners).

Shared by the failover tests and bench/failover_bench.py. Each runner is a real
``python -m scoctl run --interval`` loop or ``run --follow`` controller (`Fleet.mode`) of its
own, with its own directory (budget_dir, spool, HOME, metrics textfile): the runners share
nothing but the database and the emulator, as two hosts would.
The demand is one workload whose plan the test changes through the state (`set_units`); the
runners launch its units into three m1.tiny pools of one region.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from scoctl.clock import SystemClock
from scoctl.config.schema import Config, load_config
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES
from scoctl.core.model import LeaseRecord
from scoctl.services.claims import record_claim
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.state.postgresql import PostgresStore
from tests.builders import BOOTSTRAP

REPO = Path(__file__).resolve().parents[2]
REGION = "region-a"
POOLS = ("tiny.p0", "tiny.p1", "tiny.p2")
FAST = {"schedule": 0.02, "recheck": 0.01, "active": 0.05, "delete": 0.02}
T = TypeVar("T")
MODES = ("interval", "follow")  # `run --interval` loops, `run --follow` controllers


def fast_emulator() -> NovaEmulator:
    """A Nova emulator without quota or capacity limits, quick to turn servers ACTIVE."""
    return NovaEmulator({"quota": {"instances": -1, "cores": -1, "ram": -1},
                         "capacity": None, "timing": FAST}).start()


def wait_until(read: Callable[[], T], done: Callable[[T], bool], timeout: float,
               interval: float = 0.05) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s; last value: {value!r}")
        time.sleep(interval)


def write_config(directory: Path, *, url: str, password_file: Path, nova_url: str,
                 project: str, ttl: float, interval_dir: Path, follow: bool = False,
                 timeouts: str = "") -> Path:
    """One runner's config: the shared database, its own budget_dir and spool; a controller's
    (`follow`) also polls every 0.2 s (its periodic intake sees the claims the test writes
    into the state), reconciles every second and writes its own metrics textfile. `timeouts`:
    more `timeouts` fields, as YAML flow mapping items (``"api: 2s, launch_settle: 5s"``)."""
    clouds = directory / "clouds.yaml"
    clouds.write_text(
        "clouds:\n  failover:\n    auth_type: admin_token\n"
        f"    auth: {{endpoint: {nova_url}, token: 'admin:{project}'}}\n"
        "    region_name: RegionOne\n")
    pools = "".join(
        f"  - {{name: {name}, region: {REGION}, az: nova, flavor: m1.tiny, group: g{i}, "
        f"tier: reclaimable, depth: 1000}}\n" for i, name in enumerate(POOLS))
    more = f", {timeouts}" if timeouts else ""
    controller = (f"slurm: {{poll: 0.2s}}\ntimeouts: {{reconcile_interval: 1s{more}}}\n"
                  f"metrics: {{textfile: {interval_dir / 'scoctl.prom'}}}\n") if follow else (
        f"timeouts: {{{timeouts}}}\n" if timeouts else "")
    config = directory / "config.yaml"
    config.write_text(f"""{controller}
state: {url}
state_password_file: {password_file}
lease: {{ttl: {ttl}s}}
budget_dir: {interval_dir / "budget"}
spool: {interval_dir / "spool"}
regions:
  - name: {REGION}
    cloud: failover
    clouds_yaml: {clouds}
    mutating_calls_per_second: 10
    launch: {{image: {IMAGE_ID}, networks: [none]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
{pools}ranking: {{id: r-failover, scores: {{tiny.p0: 0.9, tiny.p1: 0.8, tiny.p2: 0.7}}}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1, strict: false}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
{BOOTSTRAP}""")
    return config


@dataclass
class Runner:
    """One `scoctl run --interval` or `run --follow` process."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def holder(self) -> str:
        return f"{os.uname().nodename}:{self.proc.pid}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def leader_metric(self) -> int | None:
        """``scoctl_leader{region="region-a"}`` in its metrics textfile (None before any)."""
        path = self.log.parent / "scoctl.prom"
        text = path.read_text() if path.exists() else ""
        line = next((x for x in text.splitlines()
                     if x.startswith(f'scoctl_leader{{region="{REGION}"}}')), None)
        return int(float(line.split()[-1])) if line else None


@dataclass
class Fleet:
    """Runners on one database and one emulator project; the test drives and inspects them."""

    root: Path
    url: str
    password_file: Path
    emulator: NovaEmulator
    project: str
    ttl: float
    interval: float = 0.2
    mode: str = "interval"  # one of MODES
    timeouts: str = ""  # more `timeouts` fields for every runner (`write_config`)
    runners: list[Runner] = field(default_factory=list)
    _count: int = 0

    def __post_init__(self) -> None:
        self.admin = self.config_for(self.root / "admin")
        self.store = PostgresStore.open_url(self.url, create=True,
                                            password_file=self.password_file)

    def config_for(self, directory: Path) -> Config:
        directory.mkdir(parents=True, exist_ok=True)
        return load_config(write_config(directory, url=self.url,
                                        password_file=self.password_file,
                                        nova_url=self.emulator.url, project=self.project,
                                        ttl=self.ttl, interval_dir=directory,
                                        follow=self.mode == "follow",
                                        timeouts=self.timeouts))

    def start(self, hooks: dict[str, str] | None = None) -> Runner:
        """A new runner process (a new host, as far as the others can tell); `hooks`: more
        environment (a test hook such as ``SCOCTL_PAUSE_AT``)."""
        self._count += 1
        name = f"r{self._count}"
        directory = self.root / name
        config = self.config_for(directory)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCOCTL_", "SLURM_", "KUBECONFIG", "PG"))}
        env.update(PYTHONPATH=str(REPO), HOME=str(directory), **(hooks or {}))
        log = directory / "run.log"
        how = ["--follow"] if self.mode == "follow" else ["--interval", f"{self.interval}s"]
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "scoctl", "--config", str(config.path), "run", *how],
                cwd=directory, env=env, stdout=out, stderr=subprocess.STDOUT)
        runner = Runner(name, proc, log)
        self.runners.append(runner)
        return runner

    def lease(self) -> LeaseRecord | None:
        return next((lease for lease in self.store.leases() if lease.region == REGION), None)

    def leader(self, timeout: float, *, not_: Runner | None = None) -> Runner:
        """The runner whose live term leads the region, other than `not_` (waiting up to
        `timeout`)."""
        def current() -> Runner | None:
            lease = self.lease()
            if lease is None or not lease.live(self.db_now()):
                return None
            return next((r for r in self.runners if r.alive() and r.holder == lease.holder
                         and r is not not_), None)

        found = wait_until(current, lambda r: r is not None, timeout)
        assert found is not None
        return found

    def db_now(self):  # type: ignore[no-untyped-def]
        return self.store.pg.raw.execute("SELECT clock_timestamp()").fetchone()[0]

    def set_units(self, units: int) -> None:
        """Record a claim of `web` that `units` m1.tiny instances cover exactly (the runners
        plan it: one pod of 1 vCPU and 512 MiB per instance)."""
        pod = {"cpu": 1000, "memory": 512 * 2**20}
        record_claim(self.store, "web", contract="T1", source="file", pods=units,
                             requests={k: v * units for k, v in pod.items()}, largest_pod=pod)

    def in_flight(self) -> int:
        """Units of launch intents still in flight: a leader killed between an intent and its
        call leaves one, which counts as units (never launched again) until reconcile fails it
        after the launch timeout (design: Acquirer)."""
        return sum(launch.count for launch in self.store.launches(status=IN_FLIGHT_LAUNCHES))

    def planned(self) -> int:
        plan = self.store.plans().get("web")
        return sum(u.units for u in plan.pools) if plan else 0

    def servers(self) -> int:
        """Servers of `web` that exist at Nova (every one a launch made)."""
        return sum(1 for s in self.emulator.servers_summary(self.project)
                   if s["status"] != "DELETED" and "sco:workload=web" in s.get("tags", ()))

    def mutating_calls_since(self, since: float) -> list[tuple[float, str, str, int]]:
        return [c for c in self.emulator.timed_calls()
                if c[0] >= since and c[1] in ("POST", "DELETE", "PUT")
                and "/servers" in c[2]]

    def kill(self, runner: Runner) -> float:
        """kill -9 by PID; the time it was sent."""
        at = time.monotonic()
        os.kill(runner.proc.pid, signal.SIGKILL)
        runner.proc.wait(timeout=10)
        return at

    def stop(self) -> None:
        """Stop every runner by PID (SIGTERM, then SIGKILL), close the state."""
        for runner in self.runners:
            if runner.alive():
                os.kill(runner.proc.pid, signal.SIGCONT)
                runner.proc.terminate()
        for runner in self.runners:
            try:
                runner.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                runner.proc.kill()
                runner.proc.wait(timeout=10)
        self.store.close()


def clock() -> SystemClock:
    return SystemClock()
