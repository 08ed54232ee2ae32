"""After a Nova outage the controller acts as soon as Nova answers (issue 49 item 13).

One `scoctl run --follow` controller, one region whose Nova emulator is a process of its own
(`tests.e2e.test_stall.PausableNova`). The test pauses it (SIGSTOP: the kernel still accepts
connections, nothing answers, as a frozen API node), raises the demand while it is paused, and
resumes it (SIGCONT) at a moment that fell between two of the old guard's probes (which backed
off 1, 2, 4, 8, 16 s up to 30 s, each unanswered one waiting `timeouts.api` too). Measured from
the SIGCONT: ``API_RECOVERED`` and the first create of the new demand. Before the fix they came
9-15 s after Nova answered again (the next probe, then the launches' own back-off), and the
outage was recorded that much longer than the stall; now a probe is in flight or at most
`PROBE_BACKOFF_S[1]` away, and the act step's back-off ends with the stall.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from scoctl.services.claims import record_claim
from scoctl.sim.nova_emulator import IMAGE_ID
from scoctl.state import open_store
from tests.builders import BOOTSTRAP
from tests.e2e.runners import wait_until
from tests.e2e.test_stall import PausableNova, clouds, scoctl

pytestmark = [pytest.mark.nova, pytest.mark.slow]

API = 2.0  # timeouts.api
PAUSED_S = 24.0  # the old probes ran at +1, +5, +11, +21, +39 s: this fell between two
RECOVERY_S = 3.0  # the most from Nova answering again to API_RECOVERED and to the first create


def write_config(directory: Path, url: str) -> Path:
    config = directory / "config.yaml"
    config.write_text(f"""\
slurm: {{poll: 0.2s}}
timeouts: {{reconcile_interval: 1s, api: {API}s, retry_budget: 3s}}
state: {directory / "state.db"}
budget_dir: {directory / "budget"}
spool: {directory / "spool"}
regions:
  - {{name: region-a, cloud: region-a, clouds_yaml: {clouds(directory, "region-a", url)},
      mutating_calls_per_second: 10, launch: {{image: {IMAGE_ID}, networks: [none]}}}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
  - {{name: tiny.a0, region: region-a, az: nova, flavor: m1.tiny, group: g0, tier: committed,
      depth: 100}}
ranking: {{id: r-recovery, scores: {{tiny.a0: 0.9}}}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1, strict: false}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
{BOOTSTRAP}""")
    return config


@pytest.fixture
def nova(tmp_path: Path) -> Iterator[PausableNova]:
    region = PausableNova(tmp_path)
    try:
        yield region
    finally:
        region.stop()


def stamp(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def test_launches_and_recovery_follow_nova_answering_again(tmp_path: Path,
                                                           nova: PausableNova) -> None:
    config = write_config(tmp_path, nova.url)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCOCTL_", "SLURM_", "KUBECONFIG", "OS_"))}
    env.update(PYTHONPATH=str(Path(__file__).resolve().parents[2]), HOME=str(tmp_path))
    assert scoctl(config, "init", env=env).returncode == 0
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(config), "run",
                                 "--follow"], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    store = open_store(tmp_path / "state.db")
    pod = {"cpu": 1000, "memory": 512 * 2**20}

    def demand(units: int) -> None:
        with store.transaction():
            record_claim(store, "web", contract="T1", source="file", pods=units,
                         requests={k: v * units for k, v in pod.items()}, largest_pod=pod)

    def launched() -> list[float]:
        return sorted(stamp(e.ts) for e in store.events() if e.token == "INSTANCES_LAUNCHED")

    try:
        demand(1)
        wait_until(launched, lambda times: len(times) == 1, 60)
        nova.pause()
        demand(3)  # demand rises while Nova is frozen
        wait_until(lambda: [e for e in store.events() if e.token == "API_UNAVAILABLE"],
                   bool, API * 4 + 10)
        time.sleep(PAUSED_S)
        nova.resume()
        answered = time.time()
        [recovered] = wait_until(
            lambda: [e for e in store.events() if e.token == "API_RECOVERED"], bool, 60)
        first = wait_until(launched, lambda times: len(times) >= 2, 60)[1]
        to_recovered, to_create = stamp(recovered.ts) - answered, first - answered
        print(f"from Nova answering again: API_RECOVERED {to_recovered:.1f} s, "
              f"first create {to_create:.1f} s; outage recorded "
              f"{recovered.detail['seconds']} s")
        assert to_recovered <= RECOVERY_S, (to_recovered, log.read_text()[-3000:])
        assert to_create <= RECOVERY_S, (to_create, log.read_text()[-3000:])
    finally:
        store.close()
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
