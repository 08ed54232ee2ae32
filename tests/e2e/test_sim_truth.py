"""Placement truth (a workload's pods run on its units) on the simulated region, end to end.

Real processes: ``scoctl sim up`` with the demo config's pools and the controller ``scoctl run
--follow``; the region's kube-scheduler (`scoctl.sim.k8s_scheduler`, TaintToleration and
NodeAffinity filters as upstream's ``pkg/scheduler/framework/plugins``) places pods on the Nodes
the node agent registers from the boot contract (labels and taints through kubelet's
``--register-with-taints``).

* exclusive (the default): orders-daily, a zonal workload (az2), a plain one and a gang of
  4 pods of 8 vCPU, all managed (the simulated platform gives their pods the
  ``sco/workload`` toleration and node selector), plus another tenant's Deployment that
  tolerates ``reclaimable``: every managed pod runs on a Node of its own workload, no tenant
  pod lands on a scoctl unit, and the gang's units hold at most twice the vCPU its pods ask;
* shared: the tenant's pods (queued first) fill the units planned for the owner; the truth
  loop finds the owner's pods unplaced (``PODS_UNPLACED`` naming the tenant's pods as
  occupants), its claim grows by them, and the fleet grows until every owner pod runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.sim import agent
from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_notice import DEMO

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
ZONE = "topology.kubernetes.io/zone"
GROUP = "scheduling.x-k8s.io/pod-group"
FAST = {"timing": {"schedule": 0.2, "recheck": 0.05, "active": 0.5, "delete": 0.2}}
AGENT = {"poll_interval": "0.2s", "ready_after": "1s"}
WORKERS = [{"name": "worker-1", "cpu": 2, "memory": "8Gi"}]


def managed(name: str, replicas: int, cpu: int = 4, **pod: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "shop", "replicas": replicas,
            "requests": {"cpu": cpu, "memory": "8Gi"}, "workload": name, "managed": True,
            "tolerate_reclaimable": True, **pod}


def tenant(replicas: int, cpu: int) -> dict[str, Any]:
    """Another tenant's Deployment (no ``workload:``): queued before the shop's pods (its
    namespace sorts first), tolerating ``reclaimable`` and nothing of scoctl's."""
    return {"name": "tenant", "namespace": "apps", "replicas": replicas,
            "requests": {"cpu": cpu, "memory": "4Gi"}, "tolerate_reclaimable": True}


class Region:
    def __init__(self, cwd: Path, deployments: list[dict[str, Any]],
                 workloads: list[dict[str, Any]]) -> None:
        self.cwd = cwd
        config = yaml.safe_load(DEMO.read_text())
        config["workloads"] = [{"contract": "T1", "source": "k8s", "kind": "deployment",
                                "namespace": "shop", **w} for w in workloads]
        config["timeouts"].update(reconcile_interval="2s", unplaced="5s")
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(config))
        scenario = {"config": "config.yaml", "nova": FAST, "agent": AGENT,
                    "kubernetes": {"nodes": WORKERS, "deployments": deployments}}
        (cwd / "scenario.yaml").write_text(yaml.safe_dump(scenario))
        self.sim = start_sim(cwd, "--scenario", str(cwd / "scenario.yaml"))
        self.scoctl("init")

    def scoctl(self, *args: str) -> str:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self.scoctl(*args, "--json"))

    def events(self) -> list[dict[str, Any]]:
        """``events --json``: one JSON object a line."""
        return [json.loads(line) for line in self.scoctl("events", "--json").splitlines()
                if line.strip()]

    def api(self) -> agent.SimApi:
        body = self.json("sim", "status")
        return agent.SimApi(str(body["k8s_url"]), str(body["nova_url"]),
                            k8s_ca=str(body["k8s_ca"]))

    def down(self) -> None:
        result = run_scoctl(self.cwd, "sim", "down")
        kill_leftovers(self.sim.pids)
        assert result.returncode == 0, result.stderr

    def follow(self, done: Callable[[agent.SimApi], bool], timeout: float) -> float:
        """Run the controller until `done` holds (seconds taken), then stop it by its PID."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
        env["PYTHONPATH"] = str(REPO)
        log_path = self.cwd / "controller.log"
        api = self.api()
        started = time.monotonic()
        with log_path.open("w") as log:
            controller = subprocess.Popen(
                [sys.executable, "-m", "scoctl", "--config", str(self.config), "--json", "run",
                 "--follow"], cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
            try:
                while not done(api):
                    assert controller.poll() is None, log_path.read_text()[-3000:]
                    assert time.monotonic() - started < timeout, log_path.read_text()[-3000:]
                    time.sleep(1.0)
                return time.monotonic() - started
            finally:
                api.close()
                controller.send_signal(signal.SIGTERM)
                code = controller.wait(60)
                assert code == 0, log_path.read_text()[-3000:]


def nodes_of(api: agent.SimApi) -> dict[str, dict[str, str]]:
    """Each Node's labels, by name."""
    return {n["metadata"]["name"]: n["metadata"].get("labels") or {} for n in api.objects("Node")}


def pods_of(api: agent.SimApi, namespace: str) -> list[dict[str, Any]]:
    return [p for p in api.objects("Pod") if p["metadata"]["namespace"] == namespace]


@pytest.fixture
def exclusive(tmp_path: Path) -> Iterator[Region]:
    gang = managed("train", 4, cpu=8, labels={GROUP: "train"},
                   annotations={"sco/gang-size": "4"})
    region = Region(tmp_path, [
        tenant(4, 3), managed("orders-daily", 6), managed("zonal", 4, node_selector={ZONE: "az2"}),
        managed("plain", 3), gang,
    ], [{"name": n} for n in ("orders-daily", "zonal", "plain", "train")])
    try:
        yield region
    finally:
        region.down()


def test_every_managed_pod_runs_on_its_own_workloads_units_and_no_tenant_pod_does(
        exclusive: Region) -> None:
    want = {"orders-daily": 6, "zonal": 4, "plain": 3, "train": 4}

    def placed(api: agent.SimApi) -> bool:
        labels = nodes_of(api)
        running: dict[str, int] = {}
        for pod in pods_of(api, "shop"):
            if agent.is_running(pod):
                own = (pod["metadata"].get("labels") or {})["sco/workload"]
                assert labels[pod["spec"]["nodeName"]].get("sco/workload") == own, pod
                running[own] = running.get(own, 0) + 1
        for pod in pods_of(api, "apps"):  # the tenant never lands on a scoctl unit
            node = pod["spec"].get("nodeName")
            assert not node or labels[node].get("sco/managed") != "true", pod
        return running == want

    seconds = exclusive.follow(placed, timeout=240)
    status = exclusive.json("status")
    pools = {p["name"]: p for p in yaml.safe_load(exclusive.config.read_text())["pools"]}
    flavors = {f["name"]: f for f in yaml.safe_load(exclusive.config.read_text())["flavors"]}
    live = [i for i in status["instances"] if i["status"] not in ("deleted", "error")]
    zonal = [i for i in live if i["workload"] == "zonal"]
    assert zonal and {pools[i["pool"]]["az"] for i in zonal} == {"az2"}
    gang_vcpus = sum(flavors[pools[i["pool"]]["flavor"]]["vcpus"] for i in live
                     if i["workload"] == "train")
    assert 0 < gang_vcpus <= 2 * 4 * 8, gang_vcpus  # packed: not one 32 vCPU node per pod
    tokens = {e["token"] for e in exclusive.events() if e.get("workload") in want}
    assert "POD_NOT_ISOLATED" not in tokens  # the platform gave every managed pod both
    print(f"every managed pod on its own units in {seconds:.1f} s; gang on {gang_vcpus} vCPU")


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[Region]:
    region = Region(tmp_path, [tenant(6, 4), managed("owner", 4)],
                    [{"name": "owner", "isolation": "shared"}])
    try:
        yield region
    finally:
        region.down()


def test_a_shared_workloads_claim_grows_by_what_others_take_until_its_pods_run(
        shared: Region) -> None:
    def owner_runs(api: agent.SimApi) -> bool:
        return sum(agent.is_running(p) for p in pods_of(api, "shop")) == 4

    shared.follow(owner_runs, timeout=240)
    events = shared.events()
    unplaced = [e["detail"] for e in events
                if e["token"] == "PODS_UNPLACED" and e.get("workload") == "owner"]
    assert unplaced, [e["token"] for e in events]
    assert any(str(o).startswith("apps/tenant-") for o in unplaced[0]["occupants"]), unplaced
    # the claim grew by the unplaced pods: the plan after them holds more units than the first
    units = [int(e["detail"]["units"]) for e in events
             if e["token"] == "PLAN_UPDATED" and e.get("workload") == "owner"]
    assert units and max(units) > units[0], units
    api = shared.api()
    try:
        labels = nodes_of(api)
        tenants_on_units = [p for p in pods_of(api, "apps") if agent.is_running(p)
                            and labels[p["spec"]["nodeName"]].get("sco/managed") == "true"]
    finally:
        api.close()
    assert tenants_on_units  # the tenant did fill units planned for the owner
    print(f"PODS_UNPLACED {unplaced[0]}; planned units {units}")


SEED = REPO / "scoctl" / "data" / "scenario.yaml"


@pytest.fixture
def seed(tmp_path: Path) -> Iterator[Region]:
    """The seed's 42 pods of orders-daily; idle units go after 5 s, a rebalance may move a
    unit 20 s after its trigger (and a unit 5 s old), so a plan a rebalance disagreed with
    would launch again well within the window watched."""
    [orders] = yaml.safe_load(SEED.read_text())["kubernetes"]["deployments"]
    orders["requests"] = {"cpu": 4, "memory": "16Gi"}
    region = Region(tmp_path, [orders], [{"name": "orders-daily"}])
    config = yaml.safe_load(region.config.read_text())
    config.pop("disruption_budget", None)
    config["timeouts"].update(idle="5s")
    config["disruption"] = {"budgets": [{"units": "100%"}],
                            "rebalance": {"stabilize": "20s", "min_age": "5s"}}
    region.config.write_text(yaml.safe_dump(config))
    try:
        yield region
    finally:
        region.down()


def _units(status: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """orders-daily's live units and its plan, per pool."""
    live: dict[str, int] = {}
    for inst in status["instances"]:
        if inst["workload"] == "orders-daily" and inst["status"] not in ("deleted", "error"):
            live[inst["pool"]] = live.get(inst["pool"], 0) + 1
    plans = [w for w in status["plan"]["workloads"] if w["workload"] == "orders-daily"]
    return live, {p["pool"]: p["units"] for w in plans for p in w["pools"] if p["units"]}


def test_after_42_to_10_the_fleet_settles_on_the_plan_and_nothing_launches_again(
        seed: Region) -> None:
    def running(count: int, most: int) -> Callable[[agent.SimApi], bool]:
        """`count` pods run, the plan holds at most `most` units and the live ones are it."""
        def check(api: agent.SimApi) -> bool:
            live, plan = _units(seed.json("status"))
            pods = pods_of(api, "shop")
            return (len(pods) == count and all(agent.is_running(p) for p in pods)
                    and 0 < sum(plan.values()) <= most and live == plan)
        return check

    seed.follow(running(42, 22), timeout=120)
    seed.scoctl("sim", "scale", "shop/orders-daily", "--replicas", "10")
    settled = seed.follow(running(10, 21), timeout=240)  # the shrunk plan gave units back
    launched = len([e for e in seed.events() if e["token"] == "INSTANCES_LAUNCHED"])
    _, plan = _units(seed.json("status"))
    started = time.monotonic()
    seed.follow(lambda api: time.monotonic() - started >= 90, timeout=120)
    live, plan_after = _units(seed.json("status"))
    assert (live, plan_after) == (plan, plan)  # the fleet stayed on the one target
    again = [e for e in seed.events() if e["token"] == "INSTANCES_LAUNCHED"][launched:]
    assert again == [], again  # no second launch wave
    assert not [e for e in seed.events() if e["token"] == "REBALANCE_PLANNED"]
    print(f"42 -> 10 settled on {sum(plan.values())} units in {len(plan)} pools in "
          f"{settled:.1f} s; nothing launched in the 90 s after")
