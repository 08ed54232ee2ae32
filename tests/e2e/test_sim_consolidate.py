"""Consolidation on the simulated region (DESIGN §16): demand 42 → 6 pods converges on the plan.

The bundled demo config and scenario, `timeouts.idle: 1s` and two budgets — at most 2
`underutilized` and 2 `empty` disruptions in flight at once — driven by `scoctl run --once`
passes. After the scale-down the ReplicaSet's survivors sit one per node (its victims ranked
as upstream's ActivePodsWithRanks), so the plan's shrink leaves busy units the plan no longer
holds: they are cordoned and drained through the Eviction API onto the kept units, then
deleted. Every pass's `status --json` is sampled: never more in flight per reason than its
budget; at the end live units = planned units and every pod runs.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_scale import DEMO

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

LIMIT = 2  # each reason's budget, in flight


class Region:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        config = yaml.safe_load(DEMO.read_text())
        config["timeouts"]["idle"] = "1s"
        config.pop("disruption_budget", None)
        config["disruption"] = {"budgets": [{"reasons": ["underutilized"], "units": LIMIT},
                                            {"reasons": ["empty"], "units": LIMIT}]}
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(config))

    def scoctl(self, *args: str) -> Any:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def json(self, *args: str) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl(*args, "--json").stdout)
        return body


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("consolidate")
    sim = start_sim(cwd)
    story = Region(cwd)
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def planned(status: dict[str, Any]) -> int:
    return sum(p["units"] for w in status["plan"]["workloads"] for p in w["pools"])


def live(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in status["instances"] if i["status"] not in ("deleted", "error")]


def test_demand_42_to_6_converges_on_the_plan_within_each_reasons_budget(region):
    for _ in range(40):
        region.scoctl("run", "--once")
        sim = region.json("sim", "status")
        if sim["pods"]["running"] == 42 and sim["pods"]["pending"] == 0:
            break
        time.sleep(1.0)
    else:
        raise AssertionError(f"42 pods never ran: {sim}")
    before = len(live(region.json("status")))
    region.json("sim", "scale", "shop/orders-daily", "--replicas", "6")
    started = time.monotonic()
    peak: dict[str, int] = {}
    for _ in range(60):
        region.scoctl("run", "--once")
        status = region.json("status")
        for reason in ("underutilized", "empty"):
            flying = sum(1 for i in live(status) if i["disruption"] == reason)
            peak[reason] = max(peak.get(reason, 0), flying)
            assert flying <= LIMIT, (reason, status["instances"])
        for entry in status["disruption"]:
            if entry["reason"] in ("underutilized", "empty"):
                assert entry["in_flight"] <= LIMIT and (entry["allowed"] or 0) <= LIMIT
        sim = region.json("sim", "status")
        units = live(status)
        if len(units) == planned(status) and all(i["disruption"] is None for i in units) \
                and sim["pods"]["running"] == 6 and sim["pods"]["pending"] == 0:
            break
        time.sleep(0.5)
    else:
        raise AssertionError(f"not converged: {status}")
    seconds = time.monotonic() - started
    events = [json.loads(line) for line in
              region.scoctl("events", "--json").stdout.splitlines() if line.strip()]
    reasons = [e["detail"]["reason"] for e in events if e["token"] == "DISRUPTION_STARTED"]
    assert "underutilized" in reasons  # survivors one per node: busy units were consolidated
    print(f"consolidation 42 -> 6 pods: {before} -> {len(units)} units in {seconds:.1f} s, "
          f"started {len(reasons)} ({reasons.count('underutilized')} underutilized), "
          f"peak in flight {peak}")
