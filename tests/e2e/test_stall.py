"""A stalled region stops only itself (issue 28 item 6, design: Controller).

One `scoctl run --follow` controller serves two regions: region-a's Nova is a real emulator
process that the test pauses (SIGSTOP: it accepts connections and never answers, as a frozen
API node does), region-b's answers. Before the fix every call to region-a waited `timeouts.api`
and was retried (×4), each pass stalled behind it, and the spool, the notices and region-b
waited with it. Now the first unanswered call trips region-a's guard (`adapters.guard`):
`API_UNAVAILABLE` names it as soon as that step ends, its other calls fail at once, passes keep
running, a reclaim notice for a region-b server is carried out and its replacement launched in
region-b while region-a stays paused; once region-a answers the guard's probe, the controller
reconciles it at once and the outage ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoctl.adapters.guard import PROBE_BACKOFF_S
from scoctl.services.claims import record_claim
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.state import open_store
from tests.builders import BOOTSTRAP
from tests.e2e.runners import FAST, fast_emulator, wait_until

pytestmark = [pytest.mark.nova, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
API = 8.0  # timeouts.api: a call unanswered this long is Unanswered


class PausableNova:
    """The Nova emulator as a process of its own (stopped and resumed by its PID)."""

    def __init__(self, tmp: Path) -> None:
        seed = tmp / "seed.json"
        seed.write_text(json.dumps({"quota": {"instances": -1, "cores": -1, "ram": -1},
                                    "capacity": None, "timing": FAST}))
        ready = tmp / "nova-a.port"
        self.log = tmp / "nova-a.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "scoctl.sim.nova_emulator", "--port", "0",
                 "--ready-file", str(ready), "--seed-file", str(seed)],
                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=out,
                stderr=subprocess.STDOUT)
        port = wait_until(lambda: ready.read_text() if ready.exists() else "", bool, 30)
        self.url = f"http://127.0.0.1:{port}/v2.1"  # as NovaEmulator.url

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.resume()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def clouds(directory: Path, name: str, url: str) -> Path:
    path = directory / f"clouds-{name}.yaml"
    path.write_text(f"clouds:\n  {name}:\n    auth_type: admin_token\n"
                    f"    auth: {{endpoint: {url}, token: 'admin:stall'}}\n"
                    "    region_name: RegionOne\n")
    return path


def write_config(directory: Path, a_url: str, b_url: str) -> Path:
    pools = "".join(
        f"  - {{name: {name}, region: {region}, az: nova, flavor: m1.tiny, group: g{i}, "
        f"tier: reclaimable, depth: 100}}\n"
        for i, (name, region) in enumerate((("tiny.a0", "region-a"), ("tiny.b0", "region-b"),
                                            ("tiny.b1", "region-b"))))
    regions = "".join(
        f"  - {{name: {name}, cloud: {name}, clouds_yaml: {clouds(directory, name, url)}, "
        f"mutating_calls_per_second: 10, launch: {{image: {IMAGE_ID}, networks: [none]}}}}\n"
        for name, url in (("region-a", a_url), ("region-b", b_url)))
    config = directory / "config.yaml"
    config.write_text(f"""\
slurm: {{poll: 0.2s}}
metrics: {{textfile: {directory / "scoctl.prom"}}}
timeouts: {{reconcile_interval: 1s, api: {API}s, retry_budget: 3s, notice_poll: 1s}}
state: {directory / "state.db"}
budget_dir: {directory / "budget"}
spool: {directory / "spool"}
regions:
{regions}flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
{pools}ranking: {{id: r-stall, scores: {{tiny.a0: 0.9, tiny.b0: 0.8, tiny.b1: 0.7}}}}
contracts:
  T1: {{floor: 0, pool_cap: 0.5, group_cap: 1.0, min_pools: 2, strict: false}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
{BOOTSTRAP}""")
    return config


@pytest.fixture
def region_a(tmp_path: Path) -> Iterator[PausableNova]:
    nova = PausableNova(tmp_path)
    try:
        yield nova
    finally:
        nova.stop()


@pytest.fixture
def region_b() -> Iterator[NovaEmulator]:
    nova = fast_emulator()
    try:
        yield nova
    finally:
        nova.stop()


def scoctl(config: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scoctl", "--config", str(config), *args],
                          cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=60)


def b_servers(nova: NovaEmulator, pool: str) -> list[dict]:  # type: ignore[type-arg]
    return [s for s in nova.servers_summary("stall") if s["status"] == "ACTIVE"
            and f"sco:pool={pool}" in s.get("tags", ())]


def region_a_calls(directory: Path) -> int:
    """Calls to region-a's Nova, from the controller's metrics textfile."""
    path = directory / "scoctl.prom"
    text = path.read_text() if path.exists() else ""
    return sum(int(float(line.split()[-1])) for line in text.splitlines()
               if line.startswith("scoctl_cloud_calls_total{") and 'region="region-a"' in line)


def test_a_paused_region_stops_neither_the_notices_nor_the_other_region(
        tmp_path: Path, region_a: PausableNova, region_b: NovaEmulator) -> None:
    config = write_config(tmp_path, region_a.url, region_b.url)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCOCTL_", "SLURM_", "KUBECONFIG", "OS_"))}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path))
    assert scoctl(config, "init", env=env).returncode == 0
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(config), "run",
                                 "--follow"], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        store = open_store(tmp_path / "state.db")
        pod = {"cpu": 1000, "memory": 512 * 2**20}
        with store.transaction():
            record_claim(store, "web", contract="T1", source="file", pods=2,
                         requests={k: v * 2 for k, v in pod.items()}, largest_pod=pod)

        def live() -> dict[str, int]:
            out: dict[str, int] = {}
            for i in store.instances():
                if i.status in ("active", "ready"):
                    out[i.region] = out.get(i.region, 0) + 1
            return out

        wait_until(live, lambda n: n.get("region-a") == 1 and n.get("region-b") == 1, 60)
        [noticed] = b_servers(region_b, "tiny.b0")

        region_a.pause()
        paused = time.monotonic()
        passes_before = log.read_text(errors="replace").count("pass in")
        calls_before = region_a_calls(tmp_path)
        # the first call to region-a goes unanswered for timeouts.api; then it is named
        unavailable = wait_until(
            lambda: [e for e in store.events() if e.token == "API_UNAVAILABLE"],
            bool, API * 4 + 10)
        assert unavailable[0].detail["api"] == "nova"
        assert "region-a" in unavailable[0].detail["error"], unavailable[0].detail

        # a reclaim notice for region-b's server, through the spool, while region-a is paused:
        # carried out and replaced in region-b long before one more call to region-a could
        # have timed out (the old controller sent one each pass, each waiting timeouts.api)
        given = scoctl(config, "notice", "--server", noticed["id"], "--at", "+120s",
                       "--reason", "stall test", env=env)
        assert given.returncode == 0, given.stderr
        wait_until(lambda: b_servers(region_b, "tiny.b1"), bool, API / 2)  # the replacement
        assert any(e.token == "RECLAIM_NOTICED" for e in store.events()), \
            sorted({e.token for e in store.events()})
        assert region_a.proc.poll() is None  # still paused: all of this happened meanwhile
        # passes go on at the reconcile interval (1 s), not one per stalled call:
        time.sleep(max(0.0, paused + API * 3 - time.monotonic()))
        text = log.read_text(errors="replace")
        passes = text.count("pass in") - passes_before
        assert passes >= 6, (passes, text[-3000:])
        # region-a was asked once, then only by the guard's probes (at most one every
        # PROBE_BACKOFF_S[1] s, each waiting up to timeouts.api): not by every call of every
        # pass (the old controller: >= 2 calls a reconcile, each waiting timeouts.api, one
        # reconcile a second)
        asked = region_a_calls(tmp_path) - calls_before
        window = time.monotonic() - paused
        assert 1 <= asked <= 1 + window / PROBE_BACKOFF_S[1], (asked, window, text[-3000:])
        assert "Nova of region region-a stalls" in text
        assert "answers again" not in text  # the probes went unanswered while it was paused
        tokens = [e.token for e in store.events() if e.detail.get("api") == "nova"]
        assert tokens == ["API_UNAVAILABLE"], tokens  # one outage, no false recovery

        region_a.resume()
        wait_until(lambda: [e for e in store.events() if e.token == "API_RECOVERED"
                            and e.detail.get("api") == "nova"], bool, 60)
        wait_until(lambda: log.read_text(errors="replace"),
                   lambda text: "Nova of region region-a answers again" in text, 30)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    assert proc.returncode == 0, log.read_text(errors="replace")[-3000:]
