"""Rebalance on the simulated region under the controller (design: Rebalance), end to end.

Real processes started by the real CLI: the Kubernetes and Nova emulators and the node agent,
on a config of five reclaimable pools of one flavor, one per correlation group, best score
first (p0 … p4), and contract T1 {pool_cap 0.3, group_cap 0.3, min_pools 4}: 12 pods of
4 vCPU / 16 GiB are four units, one in each of p0-p3. With the controller (`run --follow`)
running alone, two units get a 20 s reclaim notice (`scoctl sim reclaim`): their pools are
excluded until 10 s after the deadline, the plan is degraded (three pools left for four
units) and the noticed units are replaced in what is left. Once the exclusions lapse the
stable planner keeps the worse pool's unit (design: Planner invariant 5); the fresh plan's mean key
is better by more than `min_gain`, the trigger holds for `stabilize` (10 s),
`REBALANCE_PLANNED` names the move, and the unit is replaced before it is removed, within the
`rebalanced` budget (1 in flight), Ready units never below the plan, until the fleet sits in
p0-p3 again, the plan is not degraded and no rebalance is pending.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import sim_running
from tests.e2e.test_sim_drift import Controller, Region, live, planned, servers, until

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "scoctl" / "data" / "scenario.yaml"
POOLS = [f"p{i}" for i in range(5)]
SCORES = {"p0": 0.9, "p1": 0.8, "p2": 0.7, "p3": 0.6, "p4": 0.3}
REPLICAS = 12  # 3 a unit: four units
LIMIT = 1  # the `rebalanced` budget, in flight
WORKLOAD = "orders-daily"


def configure(region: Region) -> None:
    data = region.data
    data["flavors"] = [f for f in data["flavors"] if f["name"] == "c4.xlarge"]
    data["pools"] = [{"name": p, "region": "sim-region", "az": f"az{1 + i % 3}",
                      "flavor": "c4.xlarge", "group": f"row-{p}", "tier": "reclaimable",
                      "depth": 6} for i, p in enumerate(POOLS)]
    data["contracts"] = {"T1": {"floor": 0.0, "pool_cap": 0.3, "group_cap": 0.3,
                                "min_pools": 4, "strict": False}}
    data["ranking"] = {"id": "r-rebalance", "scores": SCORES}
    data["timeouts"].update(notice_poll="1s", negative_cache="10s")
    data["disruption"] = {"budgets": [{"reasons": ["rebalanced"], "units": LIMIT},
                                      {"units": "100%"}],
                          "rebalance": {"stabilize": "10s", "min_age": "5s",
                                        "min_gain": 0.05}}
    region.write()


def scenario(cwd: Path, config: Path) -> Path:
    data = yaml.safe_load(SCENARIO.read_text())
    data["config"] = str(config)
    data["kubernetes"]["deployments"][0]["replicas"] = REPLICAS
    path = cwd / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("rebalance")
    story = Region(cwd)
    configure(story)
    with sim_running(cwd, "--scenario", str(scenario(cwd, story.config))):
        story.scoctl("init")
        yield story


def pools_of(status: dict[str, Any]) -> dict[str, int]:
    """Ready units per pool."""
    out: dict[str, int] = {}
    for inst in status["instances"]:
        if inst["status"] == "ready" and inst["workload"] == WORKLOAD:
            out[inst["pool"]] = out.get(inst["pool"], 0) + 1
    return out


def plan_of(status: dict[str, Any]) -> dict[str, Any]:
    [plan] = [w for w in status["plan"]["workloads"] if w["workload"] == WORKLOAD]
    return plan


def pending(region: Region) -> Any:
    shown = region.json("plan", "--explain", WORKLOAD, "--dry-run")
    [body] = [w for w in shown["workloads"] if w["workload"] == WORKLOAD]
    return body["rebalance"]


@pytest.mark.slow
def test_a_fleet_degraded_by_two_notices_moves_back_once_the_exclusions_lapse(
        region: Region) -> None:
    for _ in range(40):
        region.scoctl("run", "--once")
        sim, status = region.json("sim", "status"), region.json("status")
        if sim["pods"]["running"] == REPLICAS and sim["pods"]["pending"] == 0 \
                and sum(pools_of(status).values()) == 4:
            break
        time.sleep(1.0)
    else:
        raise AssertionError(f"the pods never ran: {sim}")
    assert pools_of(status) == {"p0": 1, "p1": 1, "p2": 1, "p3": 1}, status["instances"]
    assert pending(region) is None  # the fleet holds its fresh plan
    controller = Controller(region)
    api = region.api()
    try:
        until("the controller's first reconcile", controller.reconciled, controller, 60)
        noticed = json.loads(region.scoctl("sim", "reclaim", "--count", "2", "--notice", "20s",
                                           "--seed", "7", "--json"))["noticed"]
        assert len(noticed) == 2

        def degraded() -> bool:
            return any(e["token"] == "PLAN_DEGRADED" for e in region.events())

        until("the degraded plan", degraded, controller, timeout=60)
        excluded = {e["detail"]["pool"] for e in region.events()
                    if e["token"] == "POOL_EXCLUDED"}
        assert len(excluded) == 2 and excluded < {"p0", "p1", "p2", "p3"}

        lapse = max(datetime.fromisoformat(e["detail"]["until"].replace("Z", "+00:00"))
                    for e in region.events() if e["token"] == "POOL_EXCLUDED")
        until("the exclusions to lapse", lambda: datetime.now(UTC) > lapse, controller,
              timeout=120)
        lowest, peak, samples = None, 0, 0

        def moved_back() -> bool:
            nonlocal lowest, peak, samples
            status = region.json("status")
            samples += 1
            units = live(status)
            ready = sum(1 for i in units if i["status"] == "ready")
            flying = sum(1 for i in units if i["disruption"] == "rebalanced")
            plan = planned(status)
            lowest = ready - plan if lowest is None else min(lowest, ready - plan)
            peak = max(peak, flying)
            assert flying <= LIMIT, status["instances"]
            assert ready >= plan, status["instances"]  # never fewer Ready than the plan
            planned_events = [e for e in region.events() if e["token"] == "REBALANCE_PLANNED"]
            return (bool(planned_events) and not plan_of(status)["degraded"]
                    and pools_of(status) == {"p0": 1, "p1": 1, "p2": 1, "p3": 1}
                    and len(servers(api)) == 4
                    and all(i["disruption"] is None for i in units))

        started = time.monotonic()
        until("the fleet to move back", moved_back, controller, timeout=240)
        seconds = time.monotonic() - started
        events = region.events()
        [planned_event] = [e["detail"] for e in events if e["token"] == "REBALANCE_PLANNED"]
        assert planned_event["trigger"] in ("gain", "degraded", "min_pools", "pool_cap",
                                            "group_cap")
        moved = {m["server"] for m in planned_event["moves"]}
        assert moved and {m["pool"] for m in planned_event["moves"]} == {"p4"}
        starts = [e["detail"] for e in events if e["token"] == "DISRUPTION_STARTED"
                  and e["detail"].get("reason") == "rebalanced"]
        assert {s["server"] for s in starts} == moved
        ready = {e["detail"]["old"] for e in events if e["token"] == "REPLACEMENT_READY"
                 and e["detail"].get("reason") == "rebalanced"}
        assert ready == moved  # each replaced before it was removed
        assert pending(region) is None  # nothing more to move: no churn
        assert region.json("status")["rebalance"] == []
        print(f"rebalance: {len(moved)} units moved back in {seconds:.1f} s after the "
              f"exclusions lapsed ({planned_event['trigger']}), peak rebalanced in flight "
              f"{peak} (budget {LIMIT}), Ready minus plan at least {lowest} over {samples} "
              f"samples")
    finally:
        api.close()
        assert controller.stop() == 0, controller.tail()
