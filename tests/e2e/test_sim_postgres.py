"""The simulated region's whole loop on a PostgreSQL state, with no SQLite file anywhere.

`scoctl sim up`, the bundled demo config with `state:` a database of the session cluster (the
password in `state_password_file`), then `scoctl init` and `scoctl run --once` until the 42
pending pods run on Ready instance nodes — through the real CLI, the real kubernetes client and
openstacksdk. The runs lead the region through the lease and give it up as they exit.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
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
    events = [json.loads(line) for line in
              scoctl(cwd, config, "events", "--json").stdout.splitlines() if line.strip()]
    assert "LEADER_ELECTED" in {e["token"] for e in events}
    sqlite_files = [p for p in cwd.rglob("*")
                    if p.is_file() and p.read_bytes()[:16] == b"SQLite format 3\x00"]
    assert sqlite_files == []
