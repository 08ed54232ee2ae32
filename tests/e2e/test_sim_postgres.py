"""The simulated region's whole loop on a PostgreSQL state, with no SQLite file anywhere.

`scoctl sim up`, the bundled demo config with `state:` a database of the session cluster (the
password in `state_password_file`), then `scoctl init` and `scoctl run --once` until the 42
pending pods run on Ready instance nodes — through the real CLI, the real kubernetes client and
openstacksdk; then the controller (`scoctl run --follow`) places the demand of a scale-up as it
appears. The runs and the controller lead the region through the lease and give it up as they
exit.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import REPO, kill_leftovers, run_scoctl, start_sim, wait_for
from tests.fixtures.postgres import PgState

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

DEMO = Path(__file__).resolve().parents[2] / "scoctl" / "data" / "demo.yaml"


@pytest.fixture
def region(tmp_path: Path, pg_state: PgState) -> Iterator[tuple[Path, Path]]:
    sim = start_sim(tmp_path)
    config = yaml.safe_load(DEMO.read_text())
    config["state"] = pg_state.url
    config["state_password_file"] = str(pg_state.password_file)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    try:
        yield tmp_path, path
    finally:
        result = run_scoctl(tmp_path, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def scoctl(cwd: Path, config: Path, *args: str) -> Any:
    result = run_scoctl(cwd, "--config", str(config), *args)
    assert result.returncode == 0, (args, result.stdout, result.stderr)
    return result


def test_the_whole_loop_runs_on_a_postgresql_state_with_no_sqlite_file(
        region: tuple[Path, Path]) -> None:
    cwd, config = region
    init = json.loads(scoctl(cwd, config, "init", "--json").stdout)
    assert init["created"] and init["state"].startswith("postgresql://")
    body: dict[str, Any] = {}
    for _ in range(30):
        scoctl(cwd, config, "run", "--once")
        body = json.loads(scoctl(cwd, config, "sim", "status", "--json").stdout)
        if body["pods"]["running"] == 42 and body["pods"]["pending"] == 0:
            break
    assert (body["pods"]["running"], body["pods"]["pending"]) == (42, 0), body
    assert body["nodes"]["instances_ready"] > 0

    def settled(status: dict[str, Any]) -> bool:
        running = {w["slug"]: w["status"] for w in status["workloads"]}["orders-daily"]
        ready = [i["status"] == "ready" for i in status["instances"]]
        return running == "running" and bool(ready) and all(ready)

    for _ in range(5):  # the next watch and reconcile see what the region did
        status = json.loads(scoctl(cwd, config, "status", "--json").stdout)
        if settled(status):
            break
        scoctl(cwd, config, "run", "--once")
    assert settled(status), status
    [leader] = status["leaders"]
    assert leader["region"] == "sim-region" and leader["generation"] >= 1
    follow_the_scale_up(cwd, config)
    events = [json.loads(line) for line in
              scoctl(cwd, config, "events", "--json").stdout.splitlines() if line.strip()]
    assert "LEADER_ELECTED" in {e["token"] for e in events}
    sqlite_files = [p for p in cwd.rglob("*")
                    if p.is_file() and p.read_bytes()[:16] == b"SQLite format 3\x00"]
    assert sqlite_files == []


def pods(cwd: Path, config: Path) -> tuple[int, int]:
    body = json.loads(scoctl(cwd, config, "sim", "status", "--json").stdout)
    return body["pods"]["running"], body["pods"]["pending"]


def follow_the_scale_up(cwd: Path, config: Path) -> None:
    """`run --follow` on the same database: it takes the lease, places the pods of a scale-up
    as they turn pending, and gives its term up on SIGTERM (exit 0)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    # its output goes to files, not pipes: nobody reads a pipe while the test waits, and a
    # full one (about 64 KB) would block the controller mid-pass
    out_log, err_log = cwd / "controller.stdout.log", cwd / "controller.stderr.log"
    with out_log.open("wb") as out_file, err_log.open("wb") as err_file:
        controller = subprocess.Popen(
            [sys.executable, "-m", "scoctl", "--config", str(config), "run", "--follow"],
            cwd=cwd, env=env, stdout=out_file, stderr=err_file)
        try:
            scoctl(cwd, config, "sim", "scale", "shop/orders-daily", "--replicas", "50")
            wait_for(lambda: pods(cwd, config), lambda n: n == (50, 0), timeout=120)
        finally:
            if controller.poll() is None:
                controller.terminate()
            controller.wait(timeout=30)
    out = out_log.read_text(encoding="utf-8", errors="replace")
    err = err_log.read_text(encoding="utf-8", errors="replace")
    assert controller.returncode == 0, err[-3000:]
    assert "pass in" in out and "SIGTERM: stopped" in err
    [leader] = json.loads(scoctl(cwd, config, "status", "--json").stdout)["leaders"]
    assert leader["holder"] == f"{socket.gethostname()}:{controller.pid}"  # it led
    given_up = datetime.fromisoformat(leader["expires_at"].replace("Z", "+00:00"))
    assert given_up <= datetime.now(UTC)  # and gave its term up as it stopped
