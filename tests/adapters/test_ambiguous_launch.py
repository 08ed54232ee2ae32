"""Issue 17 item 2: no double launch on an ambiguous failure, through the real `scoctl acquire`.

The Nova emulator does the work of a create and then loses the answer: a 503 from a gateway,
or no answer before the client's timeout. The plan asks for 6 servers in one pool; before the
fix the adapter took the 503 for a refusal, created them again, and 12 stayed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoctl.sim.nova_emulator import NovaEmulator
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml

pytestmark = pytest.mark.nova
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator() -> Iterator[NovaEmulator]:
    with NovaEmulator(seed={"timing": {"schedule": 0.0, "recheck": 0.0, "active": 0.0}}) as emu:
        yield emu


def scoctl(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "OS_"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "scoctl", "--config", "config.yaml", *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=120)


def six_planned(tmp: Path, emulator: NovaEmulator, timeouts: str) -> None:
    write_clouds_yaml(tmp, "emu", emulator.url, "p1")
    nova_config(tmp, "emu", extra=(
        "contracts: {T1: {floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}\n"
        f"timeouts: {timeouts}\n"))
    (tmp / "claims.yaml").write_text(
        "claims:\n  - {workload: web, requests: {cpu: 6, memory: 3Gi}, "
        "largest_pod: {cpu: 1, memory: 512Mi}, pods: 6}\n")
    assert scoctl(tmp, "init").returncode == 0
    planned = scoctl(tmp, "plan", "--claims", "claims.yaml", "--json")
    assert planned.returncode == 0, planned.stderr
    units = [u["units"] for w in json.loads(planned.stdout)["workloads"] for u in w["pools"]]
    assert units == [6]


def servers(emulator: NovaEmulator) -> list[dict[str, object]]:
    return [s for s in emulator.servers_summary() if "sco:workload=web" in s["tags"]]


def creates(emulator: NovaEmulator) -> list[int]:
    return [status for method, path, status in emulator.calls()
            if (method, path) == ("POST", "/v2.1/servers")]


def test_a_503_after_nova_did_the_work_launches_once_and_the_next_runs_add_nothing(
        tmp_path, emulator):
    six_planned(tmp_path, emulator, "{}")
    emulator.inject(503, count=1, retry_after=0.2, methods=["POST"], after=True)

    result = scoctl(tmp_path, "acquire", "--json", "--watch", "0")
    assert result.returncode == 0, result.stderr
    assert [o["status"] for o in json.loads(result.stdout)["launches"]] == ["adopted"]
    assert creates(emulator) == [503] and len(servers(emulator)) == 6

    for _ in range(2):
        assert scoctl(tmp_path, "acquire", "--watch", "0").returncode == 0
    assert len(servers(emulator)) == 6 and creates(emulator) == [503]


def test_a_create_whose_answer_times_out_after_the_work_is_adopted(tmp_path, emulator):
    six_planned(tmp_path, emulator, "{api: 0.5s}")
    emulator.inject(500, count=1, methods=["POST"], after=True, stall=3.0)

    result = scoctl(tmp_path, "acquire", "--json", "--watch", "0")

    assert result.returncode == 0, result.stderr
    assert [o["status"] for o in json.loads(result.stdout)["launches"]] == ["adopted"]
    assert len(servers(emulator)) == 6
    assert len(creates(emulator)) <= 1  # the stalled one is logged when it answers, if at all
