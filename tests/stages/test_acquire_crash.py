"""`scoctl acquire` as a real process: kill -9 at its crash points, then rerun.

The stage's test hook ``SCOCTL_CRASH_AT`` makes the process SIGKILL itself right after the
launch intent is committed (``after-intent``) or right after Nova answered the create call
(``after-call``). Whatever the crash, a rerun launches nothing twice: the intent still counts as
in-flight units, and servers carrying its ``sco:launch`` tag are adopted; an intent no server
carries the tag of is failed and relaunched once ``timeouts.launch_settle`` has passed (the
tests set it to 0s rather than wait). Each test runs its own Nova emulator (so its call log
holds only this test's calls); the CLI runs in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoctl.core.model import PlanUnitRecord, PlanWorkloadRecord
from scoctl.sim.nova_emulator import NovaEmulator
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml

pytestmark = pytest.mark.nova

SECRET = "crash-test-join-secret"
FAST = {"schedule": 0.05, "recheck": 0.01, "active": 0.1, "delete": 0.05}


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, object]:
        return dict(json.loads(self.stdout))


@dataclass
class World:
    emulator: NovaEmulator
    home: Path
    config: Path
    state: Path

    def scoctl(self, *args: str, crash_at: str | None = None) -> Run:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "OS_"))}
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
        if crash_at:
            env["SCOCTL_CRASH_AT"] = crash_at
        proc = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(self.config),
                               *args], cwd=self.home, env=env, capture_output=True, text=True,
                              timeout=120)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def creates(self) -> int:
        return sum(1 for method, path, _ in self.emulator.calls()
                   if method == "POST" and path == "/v2.1/servers")

    def servers(self) -> list[dict[str, object]]:
        return [s for s in self.emulator.servers_summary() if s["status"] != "DELETED"]

    def settle_at_once(self) -> None:
        """``timeouts.launch_settle: 0s``: a lapsed intent is failed by the very next pass."""
        with self.config.open("a", encoding="utf-8") as out:
            out.write("timeouts: {launch_settle: 0s}\n")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    emulator = NovaEmulator({"timing": FAST}).start()
    write_clouds_yaml(tmp_path, "crash-test", emulator.url, "crash-project")
    (tmp_path / "join-token").write_text(SECRET)
    config = nova_config(tmp_path, "crash-test",
                         bootstrap=f"join_secret_file: {tmp_path / 'join-token'}")
    with open_store(tmp_path / "state.db", create=True) as store:
        store.commit_plan(ranking="r-1", full=False, plans=[PlanWorkloadRecord(
            workload="web", generation=0, claim_version=1, contract="T1", ranking="r-1",
            feasible=True, degraded=False, reasons=(),
            pools=(PlanUnitRecord(pool="tiny.a", tier="reclaimable", group="g1", units=3,
                                  share=1.0, score=0.5),))])
    try:
        yield World(emulator, tmp_path, config, tmp_path / "state.db")
    finally:
        emulator.stop()


def launches(world: World) -> list[tuple[str, str]]:
    with open_store(world.state) as store:
        return [(launch.launch_id, launch.status) for launch in store.launches()]


def instances(world: World) -> list[str]:
    with open_store(world.state) as store:
        return sorted(i.id for i in store.instances())


def test_killed_after_the_intent_a_rerun_launches_nothing(world: World) -> None:
    crashed = world.scoctl("acquire", "--json", crash_at="after-intent")

    assert crashed.code == -signal.SIGKILL
    [(launch_id, status)] = launches(world)
    assert status == "intent"
    assert world.creates() == 0 and world.servers() == []

    rerun = world.scoctl("acquire", "--json")

    assert rerun.code == 0, rerun.stderr
    body = rerun.json()
    assert body["launches"] == [] and body["calls"] == 0
    assert world.creates() == 0  # the intent's units count as in flight: no second launch
    assert launches(world) == [(launch_id, "intent")]  # until the settle window (30 s) passes


def test_killed_after_the_intent_the_units_are_relaunched_once_the_settle_window_passed(
    world: World,
) -> None:
    world.settle_at_once()
    crashed = world.scoctl("acquire", "--json", crash_at="after-intent")
    assert crashed.code == -signal.SIGKILL
    [(lost, _)] = launches(world)

    rerun = world.scoctl("acquire", "--json")

    assert rerun.code == 0, rerun.stderr
    [launch] = rerun.json()["launches"]  # type: ignore[misc]
    assert (launch["status"], launch["created"]) == ("recorded", 3)
    assert launches(world) == [(lost, "failed"), (launch["launch_id"], "recorded")]
    assert world.creates() == 1 and len(world.servers()) == 3
    assert world.scoctl("acquire", "--json").json()["launches"] == [] and world.creates() == 1


def test_killed_after_the_call_a_zero_settle_window_still_adopts_never_launches_twice(
    world: World,
) -> None:
    world.settle_at_once()
    crashed = world.scoctl("acquire", "--json", crash_at="after-call")
    assert crashed.code == -signal.SIGKILL
    [(launch_id, _)] = launches(world)

    rerun = world.scoctl("acquire", "--json")

    assert rerun.code == 0, rerun.stderr
    assert [(x["launch_id"], x["status"])  # type: ignore[index]
            for x in rerun.json()["launches"]] == [(launch_id, "adopted")]  # type: ignore[attr-defined]
    assert world.creates() == 1 and len(world.servers()) == 3
    assert launches(world) == [(launch_id, "recorded")]


def test_a_launch_rate_limited_to_the_last_attempt_is_relaunched_by_the_next_acquire(
    world: World,
) -> None:
    world.emulator.inject(429, count=4, retry_after=0, methods=["POST"])

    refused = world.scoctl("acquire", "--json")

    assert refused.code == 1  # a call failed
    assert world.servers() == [] and world.creates() == 4  # every attempt answered 429
    [(launch_id, status)] = launches(world)
    assert status == "failed"  # at once: nothing in flight to wait for

    rerun = world.scoctl("acquire", "--json")

    assert rerun.code == 0, rerun.stderr
    [launch] = rerun.json()["launches"]  # type: ignore[misc]
    assert (launch["status"], launch["created"]) == ("recorded", 3)
    assert launch["launch_id"] != launch_id
    assert world.creates() == 5 and len(world.servers()) == 3


def test_killed_after_the_call_a_rerun_adopts_the_servers_instead_of_launching(
    world: World,
) -> None:
    crashed = world.scoctl("acquire", "--json", crash_at="after-call")

    assert crashed.code == -signal.SIGKILL
    [(launch_id, status)] = launches(world)
    assert status == "intent" and instances(world) == []
    servers = world.servers()
    assert len(servers) == 3 and world.creates() == 1
    assert all(f"sco:launch={launch_id}" in s["tags"] for s in servers)  # type: ignore[operator]

    rerun = world.scoctl("acquire", "--json")

    assert rerun.code == 0, rerun.stderr
    body = rerun.json()
    assert [(x["launch_id"], x["status"], x["created"])  # type: ignore[index]
            for x in body["launches"]] == [(launch_id, "adopted", 3)]  # type: ignore[attr-defined]
    assert body["calls"] == 0
    assert world.creates() == 1 and len(world.servers()) == 3
    assert launches(world) == [(launch_id, "recorded")]
    assert instances(world) == sorted(str(s["id"]) for s in servers)

    third = world.scoctl("acquire", "--json")
    assert third.json()["launches"] == [] and world.creates() == 1


def test_an_uninterrupted_run_then_a_rerun_is_a_no_op(world: World) -> None:
    first = world.scoctl("acquire", "--json")
    second = world.scoctl("acquire", "--json")

    assert first.code == 0 and second.code == 0, first.stderr + second.stderr
    [launch] = first.json()["launches"]  # type: ignore[misc]
    assert (launch["requested"], launch["created"], launch["status"]) == (3, 3, "recorded")
    assert len(launch["server_ids"]) == 3 and launch["reservation_id"].startswith("r-")
    assert first.json()["calls"] == 1
    assert second.json()["launches"] == [] and second.json()["calls"] == 0
    assert world.creates() == 1


def test_dry_run_prints_the_calls_with_user_data_redacted_and_makes_none(world: World) -> None:
    run = world.scoctl("acquire", "--dry-run")
    as_json = world.scoctl("acquire", "--dry-run", "--json")

    assert run.code == 0 and as_json.code == 0, run.stderr + as_json.stderr
    assert "1 create call(s) would be made" in run.stdout
    assert "tiny.a" in run.stdout and "sco:managed" in run.stdout
    assert SECRET not in run.stdout + as_json.stdout
    [call] = as_json.json()["calls_planned"]  # type: ignore[misc]
    assert (call["pool"], call["min_count"], call["max_count"]) == ("tiny.a", 1, 3)
    assert "***" in call["user_data"]
    assert world.creates() == 0 and launches(world) == []


def test_the_summary_table_and_an_unknown_region(world: World) -> None:
    run = world.scoctl("acquire")
    unknown = world.scoctl("acquire", "--region", "nowhere")

    assert run.code == 0, run.stderr
    assert "acquire: 1 launch(es), 3 instance(s), 1 mutating call(s)" in run.stdout
    assert "Launches" in run.stdout and "recorded" in run.stdout
    assert unknown.code == 2 and "nowhere" in unknown.stderr


def test_the_join_secret_never_reaches_the_output_the_logs_or_the_state_file(
    world: World,
) -> None:
    import base64

    run = world.scoctl("-vv", "acquire", "--json")

    assert run.code == 0, run.stderr
    assert "launching" in run.stderr  # debug logging really was on
    encoded = base64.b64encode(SECRET.encode()).decode()[:16]
    for text in (run.stdout, run.stderr):
        assert SECRET not in text and encoded not in text
    with open_store(world.state) as store:
        store.conn.execute("PRAGMA wal_checkpoint(FULL)")
    files = sorted(world.home.glob("state.db*"))
    assert world.state in files  # the state file really is where we look
    for path in files:
        assert SECRET.encode() not in path.read_bytes()
    assert world.creates() == 1
