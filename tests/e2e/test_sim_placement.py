"""Where pods may run (design: Constraints) on the simulated region under the controller, end to
end.

Real processes: ``scoctl sim up`` with a scenario of four Deployments in front of the demo
config's 71 pools (three zones, eight flavors), and the controller ``scoctl run --follow``.
The region's own kube-scheduler (`scoctl.sim.k8s_scheduler`) places the pods on the Nodes the
node agent registers from the boot contract, so a pod runs only where its constraints hold:

* ``zonal`` (nodeSelector ``topology.kubernetes.io/zone: az2``): every unit scoctl launches
  for it is a Nova server in az2 and every pod runs;
* ``pinned`` (nodeSelector ``node.kubernetes.io/instance-type: c5.xlarge``): every unit is a
  c5.xlarge server and every pod runs;
* ``limited`` (``workloads[].limits.units: 2``): the plan holds 2 units, the workload is
  degraded with ``LIMIT_REACHED`` naming ``workloads[].limits.units``, and scoctl never has
  more than 2 live units for it;
* ``spread`` (a ``DoNotSchedule`` zone topology spread, maxSkew 1): units in every zone and
  every pod runs;
* ``split`` (two Deployments of one workload, ``split-a`` pinned to az1 and ``split-b`` to
  az3): pods that differ in where they may run are separate claims (its parts), so the
  workload gets units in az1 and az3 — and none in az2 — and every pod of both runs.

The zone and flavor are read from the Nova servers themselves (the emulator's truth), the
Node a pod runs on mapped to its server by the providerID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
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
FLAVOR = "node.kubernetes.io/instance-type"
REPLICAS = {"zonal": 6, "pinned": 6, "limited": 9, "spread": 6, "split-a": 3, "split-b": 3}
WORKLOAD = {"split-a": "split", "split-b": "split"}  # Deployment -> workload (else its name)
POD = {"cpu": 4, "memory": "16Gi"}


def deployment(name: str, selector: dict[str, str] | None = None, **pod: Any) -> dict[str, Any]:
    """A Deployment `name` of its workload whose pods select its own units (``sco/workload``),
    so that the workloads never share a node, plus `selector`."""
    workload = WORKLOAD.get(name, name)
    return {"name": name, "namespace": "shop", "replicas": REPLICAS[name], "requests": POD,
            "workload": workload, "managed": True, "tolerate_reclaimable": True,
            "node_selector": {"sco/workload": workload, **(selector or {})}, **pod}


SCENARIO = {
    "config": "config.yaml",
    "nova": {"timing": {"schedule": 0.2, "recheck": 0.05, "active": 0.5, "delete": 0.2}},
    "kubernetes": {
        "nodes": [{"name": "worker-1", "cpu": 2, "memory": "8Gi"}],
        "deployments": [
            deployment("zonal", {ZONE: "az2"}),
            deployment("pinned", {FLAVOR: "c5.xlarge"}),
            deployment("limited"),
            deployment("spread", topology_spread_constraints=[{
                "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "spread"}}}]),
            deployment("split-a", {ZONE: "az1"}),
            deployment("split-b", {ZONE: "az3"}),
        ],
    },
    "agent": {"poll_interval": "0.2s", "ready_after": "1s"},
}


class Region:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        config = yaml.safe_load(DEMO.read_text())
        config["workloads"] = [
            {"name": name, "contract": "T1", "source": "k8s", "kind": "deployment",
             "namespace": "shop", **({"limits": {"units": 2}} if name == "limited" else {})}
            for name in dict.fromkeys(WORKLOAD.get(n, n) for n in REPLICAS)]
        config["timeouts"]["reconcile_interval"] = "2s"
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(config))
        (cwd / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))

    def scoctl(self, *args: str) -> str:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def json(self, *args: str) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl(*args, "--json"))
        return body

    def api(self) -> agent.SimApi:
        body = self.json("sim", "status")
        return agent.SimApi(str(body["k8s_url"]), str(body["nova_url"]),
                            k8s_ca=str(body["k8s_ca"]))


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("placement")
    story = Region(cwd)
    sim = start_sim(cwd, "--scenario", str(cwd / "scenario.yaml"))
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def live(status: dict[str, Any], workload: str) -> list[dict[str, Any]]:
    return [i for i in status["instances"] if i["workload"] == workload
            and i["status"] not in ("deleted", "error")]


def per_unit(flavor: dict[str, Any]) -> int:
    """Pods of 4 vCPU / 16 GiB a unit of `flavor` holds (allocatable: less the demo's
    node_reserve of 100m and 1 GiB)."""
    ram = int(str(flavor["ram"]).removesuffix("Gi"))
    return min((flavor["vcpus"] * 1000 - 100) // 4000, (ram - 1) // 16)


def where(api: agent.SimApi) -> dict[str, list[dict[str, Any]]]:
    """The Nova server each running pod of each Deployment runs on."""
    servers = {s["id"]: s for s in api.servers()}
    nodes = {n["metadata"]["name"]: agent.server_of(n) for n in api.objects("Node")}
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in REPLICAS}
    for pod in api.objects("Pod"):
        app = (pod["metadata"].get("labels") or {}).get("app")
        if app in out and agent.is_running(pod):
            server = nodes.get(pod["spec"].get("nodeName", ""))
            out[app].append(servers[server] if server in servers else {})
    return out


def test_each_workload_runs_only_where_its_pods_may_and_the_limited_one_within_its_limit(
        region: Region) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    log_path = region.cwd / "controller.log"
    log = log_path.open("w")
    api = region.api()
    started = time.monotonic()
    controller = subprocess.Popen(
        [sys.executable, "-m", "scoctl", "--config", str(region.config), "--json", "run",
         "--follow"], cwd=region.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    most_limited = 0
    config = yaml.safe_load(region.config.read_text())
    pools = {p["name"]: p for p in config["pools"]}
    flavors = {f["name"]: f for f in config["flavors"]}
    try:
        deadline = time.monotonic() + 240
        while True:
            assert controller.poll() is None, log_path.read_text()[-3000:]
            status = region.json("status")
            units = live(status, "limited")
            most_limited = max(most_limited, len(units))
            running = {name: len(on) for name, on in where(api).items()}
            # the limited workload's pods fill the units it may hold, and no more run
            room = sum(per_unit(flavors[pools[i["pool"]]["flavor"]]) for i in units)
            want = {"zonal": 6, "pinned": 6, "spread": 6, "split-a": 3, "split-b": 3,
                    "limited": min(room, REPLICAS["limited"]) if len(units) == 2 else -1}
            if all(running[n] == want[n] for n in want):
                break
            assert time.monotonic() < deadline, (running, want, log_path.read_text()[-3000:])
            time.sleep(1.0)
        seconds = time.monotonic() - started
        placed = where(api)
        assert all(s.get("id") for on in placed.values() for s in on), placed
        assert {s["az"] for s in placed["zonal"]} == {"az2"}
        assert {s["flavor"] for s in placed["pinned"]} == {"c5.xlarge"}
        # where the spread pods run depends on which Nodes were Ready first (kube-scheduler
        # counts only the zones of existing Nodes); the units are in every zone
        zones = Counter(s["az"] for s in placed["spread"])
        # every unit scoctl launched for a workload is where its pods may run
        status = region.json("status")
        assert {pools[i["pool"]]["az"] for i in live(status, "zonal")} == {"az2"}
        assert {pools[i["pool"]]["flavor"] for i in live(status, "pinned")} == {"c5.xlarge"}
        assert {pools[i["pool"]]["az"] for i in live(status, "spread")} == {"az1", "az2", "az3"}
        # one workload, two parts: units only where one of its pods may run, pods in both
        assert {pools[i["pool"]]["az"] for i in live(status, "split")} == {"az1", "az3"}
        assert {s["az"] for s in placed["split-a"]} == {"az1"}
        assert {s["az"] for s in placed["split-b"]} == {"az3"}
        servers = {s["id"]: s for s in api.servers()}
        assert {servers[i["id"]]["az"] for i in live(status, "spread")} == {"az1", "az2", "az3"}

        plans = {w["workload"]: w for w in status["plan"]["workloads"]}
        limited = plans["limited"]
        assert sum(p["units"] for p in limited["pools"]) == 2
        assert limited["degraded"] is True
        assert any(r.startswith("LIMIT_REACHED: workloads[].limits.units 2")
                   for r in limited["reasons"]), limited["reasons"]
        assert most_limited <= 2 and len(live(status, "limited")) == 2
        pending = [p for p in api.objects("Pod")
                   if (p["metadata"].get("labels") or {}).get("app") == "limited"
                   and agent.is_pending(p)]
        assert len(pending) == REPLICAS["limited"] - running["limited"] > 0
        print(f"zonal, pinned, spread and limited placed in {seconds:.1f} s; spread {zones}")
    finally:
        api.close()
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(60)
        log.close()
    assert code == 0, log_path.read_text()[-3000:]
