"""A gang on the simulated region under the controller (design: Gangs), end to end.

Real processes started by the real CLI: the Kubernetes and Nova emulators and the node agent.
Six pods of one pod group (``scheduling.x-k8s.io/pod-group``, ``sco/gang-size: 6``), one per
node (a ``DoNotSchedule`` hostname spread), wait for capacity;
the best pool's availability zone has a host too small for the whole multi-create
(`nova.az_capacity`), so Nova fails all of it (NoValidHost). The controller (`run --follow`)
records ``GANG_FAILED`` there, never holds more live servers than the gang needs, and at once
(a NoValidHost excludes the zone: no back-off) provisions the gang whole in the other group,
with every pod running.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.sim import agent
from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_drift import DEMO, SCENARIO, Controller, Region, until

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

MEMBERS = 6
BEST = "c6.xlarge.row-a.spot"  # az1: its host takes one c6.xlarge, not six
OTHER = "c4.2xlarge.row-b.spot"  # az2


class GangRegion(Region):
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.config = cwd / "config.yaml"
        config = yaml.safe_load(DEMO.read_text())
        config.pop("disruption_budget", None)
        config["pools"] = [p for p in config["pools"] if p["name"] in (BEST, OTHER)]
        config["ranking"]["scores"] = {BEST: 0.94, OTHER: 0.85}
        config["contracts"]["T1"].update(floor=0.0)
        config["workloads"] = [{"name": "train", "contract": "T1", "source": "k8s",
                                "kind": "deployment", "namespace": "shop"}]
        config["timeouts"].update(reconcile_interval="1s", idle="10m")
        config["gang"] = {"backoff": "2s", "deadline": "2m"}
        self.data = config
        self.write()


def scenario(cwd: Path) -> Path:
    data = yaml.safe_load(SCENARIO.read_text())
    data["nova"]["az_capacity"] = {"az1": {"vcpus": 32, "ram": "128Gi"}}
    [dep] = data["kubernetes"]["deployments"]
    dep.update(name="train", replicas=MEMBERS, workload="train",
               labels={"scheduling.x-k8s.io/pod-group": "train"},
               annotations={"sco/gang-size": str(MEMBERS)},
               # one member per node, as the pods ask (a gang of pods otherwise packs by
               # requests: six of these fit one c4.2xlarge), so the multi-create is six
               topology_spread_constraints=[{
                   "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                   "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": "train"}}}])
    dep.pop("pdb", None)
    path = cwd / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GangRegion]:
    cwd = tmp_path_factory.mktemp("gang")
    sim = start_sim(cwd, "--scenario", str(scenario(cwd)))
    story = GangRegion(cwd)
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def managed(api: agent.SimApi) -> list[dict[str, Any]]:
    return [s for s in api.servers() if "sco:managed" in s["tags"]]


@pytest.mark.slow
def test_a_gang_whose_best_zone_is_too_small_fails_there_and_runs_whole_elsewhere(
        region: GangRegion) -> None:
    api = region.api()
    controller = Controller(region)
    peak, created = 0, set()
    try:
        def provisioned() -> bool:
            nonlocal peak
            servers = managed(api)
            created.update(str(s["id"]) for s in servers)
            up = [s for s in servers if s.get("status") not in ("DELETED", "ERROR")]
            peak = max(peak, len(up))
            assert len(up) <= MEMBERS, servers  # never more than the gang needs
            pods = region.json("sim", "status")["pods"]
            return pods["running"] == MEMBERS and any(
                e["token"] == "GANG_PROVISIONED" for e in region.events())

        until("the gang provisioned", provisioned, controller, timeout=60)
        provisioned()  # the retry is so fast that the polls may have seen no server up yet
    finally:
        api.close()
        assert controller.stop() == 0, controller.tail()
    events = region.events()
    tokens = [e["token"] for e in events if e["token"].startswith("GANG_")]
    assert tokens == ["GANG_FAILED", "GANG_PROVISIONED"], tokens
    [failed] = [e["detail"] for e in events if e["token"] == "GANG_FAILED"]
    assert failed["pool"] == BEST and "valid host" in str(failed["reason"]).lower(), failed
    [up] = [e["detail"] for e in events if e["token"] == "GANG_PROVISIONED"]
    assert (up["members"], up["pools"]) == (MEMBERS, [OTHER])
    live = [i for i in region.json("status")["instances"]
            if i["status"] not in ("deleted", "deleting", "error")]
    assert len(live) == MEMBERS and {i["pool"] for i in live} == {OTHER}
    # one failed try, one whole gang: the retry follows the failure at once (a NoValidHost
    # zone), too fast for the server listing to show the failed try, so its launch tells
    launched = [e["detail"] for e in events if e["token"] == "INSTANCES_LAUNCHED"]
    assert [d["created"] for d in launched] == [MEMBERS, MEMBERS], launched
    assert peak == MEMBERS and MEMBERS <= len(created) <= 2 * MEMBERS
