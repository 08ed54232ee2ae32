"""Drift on the simulated region under the controller (design: Drift), end to end.

Real processes started by the real CLI: the Kubernetes and Nova emulators and the node agent,
with a scenario whose Nova offers two more images (`nova.images`) — ``ubuntu-26.04`` and
``broken-image``, whose servers boot but never register a Node (`agent.unregistered_images`).
`scoctl run --once` runs until 12 pods run; then the controller (`run --follow`) runs alone and
the test edits its config and sends SIGHUP:

1. the image becomes ``ubuntu-26.04``: every unit is replaced onto it, the first as a canary,
   with never fewer Ready units than the plan, never more drifted in flight than the
   `drifted` budget, and the plan never above what it was (retiring units count toward
   neither coverage nor caps);
2. the workload gets `node_labels`: the Nodes are patched in place, no server is created;
3. the image becomes ``broken-image``: `drift.halt_after` (2) replacements time out
   registering, `DRIFT_ROLLOUT_HALTED`, and no old unit is touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.errors import ConfigError
from scoctl.sim import agent
from scoctl.sim.scenario import stable_id
from tests.e2e.test_sim import run_scoctl, sim_running

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scoctl" / "data" / "demo.yaml"
SCENARIO = REPO / "scoctl" / "data" / "scenario.yaml"
REPLICAS = 12
LIMIT = 2  # the `drifted` budget, in flight
WORKLOAD = "orders-daily"


class Region:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.config = cwd / "config.yaml"
        config = yaml.safe_load(DEMO.read_text())
        config.pop("disruption_budget", None)
        config["timeouts"].update(registration="6s", reconcile_interval="1s", idle="10m")
        config["disruption"] = {"budgets": [{"reasons": ["drifted"], "units": LIMIT},
                                            {"units": "100%"}],
                                "drift": {"soak": "3s", "halt_after": 2}}
        self.data = config
        self.write()

    def write(self) -> None:
        self.config.write_text(yaml.safe_dump(self.data))

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

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.scoctl("events", "--json").splitlines()
                if line.strip()]


def scenario(cwd: Path) -> Path:
    data = yaml.safe_load(SCENARIO.read_text())
    data["nova"]["images"] = ["ubuntu-26.04", "broken-image"]
    data["agent"]["unregistered_images"] = ["broken-image"]
    data["kubernetes"]["deployments"][0]["replicas"] = REPLICAS
    path = cwd / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("drift")
    with sim_running(cwd, "--scenario", str(scenario(cwd))):
        story = Region(cwd)
        story.scoctl("init")
        yield story


def stamp(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(event["ts"]).replace("Z", "+00:00")).timestamp()


def planned(status: dict[str, Any]) -> int:
    return sum(p["units"] for w in status["plan"]["workloads"] for p in w["pools"])


def live(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in status["instances"] if i["status"] not in ("deleted", "error")]


def servers(api: agent.SimApi) -> dict[str, str]:
    """Live managed servers: id → image id."""
    return {str(s["id"]): str(s.get("image")) for s in api.servers()
            if s.get("status") not in ("DELETED", "ERROR") and "sco:managed" in s["tags"]}


class Controller:
    """`scoctl run --follow` on the region's config, stopped by its PID."""

    def __init__(self, region: Region) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
        env["PYTHONPATH"] = str(REPO)
        self.log_path = region.cwd / "controller.log"
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "scoctl", "--config", str(region.config), "--json", "run",
             "--follow"], cwd=region.cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def reconciled(self) -> bool:
        """A pass (one JSON line) with a reconcile step in it: its signal handlers are set."""
        passes = [json.loads(line) for line in self.log_path.read_text().splitlines()
                  if line.startswith("{")]
        return any(step["step"] == "reconcile" for one in passes for step in one["steps"])

    def reload(self) -> None:
        assert self.process.poll() is None, self.tail()
        self.process.send_signal(signal.SIGHUP)

    def tail(self) -> str:
        return self.log_path.read_text()[-3000:]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(60)
        finally:
            self.log.close()


def until(what: str, check: Callable[[], bool], controller: Controller,
          timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert controller.process.poll() is None, controller.tail()
        assert time.monotonic() < deadline, f"{what}: timed out\n{controller.tail()}"
        time.sleep(0.5)


@pytest.mark.slow
def test_an_image_change_rolls_a_label_change_patches_a_bad_image_halts(region: Region) -> None:
    for _ in range(40):
        region.scoctl("run", "--once")
        sim = region.json("sim", "status")
        if sim["pods"]["running"] == REPLICAS and sim["pods"]["pending"] == 0:
            break
        time.sleep(1.0)
    else:
        raise AssertionError(f"the pods never ran: {sim}")
    api = region.api()
    old = servers(api)
    plan = planned(region.json("status"))
    assert plan > 0 and len(old) == plan
    assert set(old.values()) == {stable_id("image", "ubuntu-24.04")}
    controller = Controller(region)
    try:
        until("the controller's first reconcile", controller.reconciled, controller, 60)
        # 1. a new image rolls through the fleet
        started = time.monotonic()
        region.data["regions"][0]["launch"]["image"] = "ubuntu-26.04"
        region.write()
        controller.reload()
        new_image = stable_id("image", "ubuntu-26.04")
        peak, lowest, samples = 0, plan, 0

        def rolled() -> bool:
            nonlocal peak, lowest, samples
            status = region.json("status")
            samples += 1
            units = live(status)
            ready = sum(1 for i in units if i["status"] == "ready")
            flying = sum(1 for i in units if i["disruption"] == "drifted")
            peak, lowest = max(peak, flying), min(lowest, ready)
            assert flying <= LIMIT, status["instances"]
            assert ready >= plan, status["instances"]  # never fewer Ready than the plan
            assert planned(status) <= plan, status["plan"]  # retiring units plan nothing
            now = servers(api)
            return (set(now.values()) == {new_image} and len(now) == plan
                    and not set(now) & set(old) and all(i["disruption"] is None
                                                        for i in units))

        until("the image rollout", rolled, controller, timeout=300)
        seconds = time.monotonic() - started
        events = region.events()
        drifted = {e["detail"]["server"] for e in events if e["token"] == "UNIT_DRIFTED"}
        assert drifted == set(old)  # once per unit
        assert all(e["detail"]["fields"] == ["image"] for e in events
                   if e["token"] == "UNIT_DRIFTED")
        ready = [e["detail"] for e in events if e["token"] == "REPLACEMENT_READY"]
        assert {r["old"] for r in ready} == set(old)
        # the canary: the second unit starts only once a new unit has been Ready for the soak
        starts = [stamp(e) for e in events if e["token"] == "DISRUPTION_STARTED"
                  and e["detail"]["reason"] == "drifted"]
        # from when the pass saw it Ready (the event itself is written at the pass's end)
        first_ready = min(stamp({"ts": e["detail"]["ready_at"]}) for e in events
                          if e["token"] == "INSTANCE_READY"
                          and e["detail"]["server"] not in old and stamp(e) > starts[0])
        assert len(starts) == plan and sorted(starts)[1] >= first_ready + 3.0
        print(f"image rollout: {plan} units replaced in {seconds:.1f} s, peak drifted in "
              f"flight {peak} (budget {LIMIT}), fewest Ready units {lowest} (plan {plan}) "
              f"over {samples} samples")

        # 2. a label-only change patches the Nodes in place
        rolled_to = servers(api)
        region.data["workloads"][0]["node_labels"] = {"team": "checkout"}
        region.write()
        controller.reload()

        def labelled() -> bool:
            nodes = [n for n in api.objects("Node")
                     if n["metadata"].get("labels", {}).get("sco/workload") == WORKLOAD]
            return len(nodes) == plan and all(
                n["metadata"]["labels"].get("team") == "checkout" for n in nodes)

        until("the label patch", labelled, controller, timeout=60)
        assert servers(api) == rolled_to  # no server created or removed
        patched = [e for e in region.events() if e["token"] == "DRIFT_PATCHED"]
        assert {e["detail"]["server"] for e in patched} == set(rolled_to)

        # 3. an image whose servers never register halts after halt_after failures
        region.data["regions"][0]["launch"]["image"] = "broken-image"
        region.write()
        controller.reload()

        def halted() -> bool:
            assert set(rolled_to) <= set(servers(api)), "an old unit was removed"
            return any(e["token"] == "DRIFT_ROLLOUT_HALTED" for e in region.events())

        until("the halt", halted, controller, timeout=180)
        events = region.events()
        [halt] = [e["detail"] for e in events if e["token"] == "DRIFT_ROLLOUT_HALTED"]
        assert halt["failures"] == 2
        timeouts = [e for e in events if e["token"] == "REGISTRATION_TIMEOUT"]
        assert len(timeouts) == 2
        time.sleep(5)  # a few more passes: still halted, the old units stay in service
        status = region.json("status")
        assert {i["id"] for i in live(status) if i["status"] == "ready"} >= set(rolled_to)
        assert all(i["disruption"] is None for i in live(status))
        [rollout] = status["drift"]
        assert rollout["halted"] and rollout["drifted"] == plan
    finally:
        code = controller.stop()
        api.close()
    assert code == 0, controller.tail()


# --- the pure parts --------------------------------------------------------------------------


def test_a_scenario_adds_images_to_those_the_config_names(tmp_path: Path) -> None:
    from scoctl.config.schema import load_config
    from scoctl.config.yamlsrc import load_located
    from scoctl.sim.scenario import nova_seed, parse_scenario

    path = scenario(tmp_path)
    loaded = parse_scenario(load_located(path.read_text(), "scenario.yaml"), base=tmp_path)
    assert loaded.images == ("ubuntu-26.04", "broken-image")
    assert loaded.unregistered_images == ("broken-image",)
    seed = nova_seed(loaded, load_config(None))
    assert [(i["id"], i["name"]) for i in seed["images"]] == [
        (stable_id("image", n), n) for n in ("broken-image", "ubuntu-24.04", "ubuntu-26.04")]
    bad = "nova: {images: [ubuntu, 7]}\n"
    with pytest.raises(ConfigError, match=r"scenario.yaml:1: nova.images.1"):
        parse_scenario(load_located(bad, "scenario.yaml"), base=None)


def test_a_server_of_an_unregistered_image_boots_but_never_registers_a_node() -> None:
    bad, good = stable_id("image", "broken-image"), stable_id("image", "ubuntu-26.04")
    servers = [{"id": sid, "name": f"sco-web-{sid}", "status": "ACTIVE",
                "tags": ["sco:managed"], "flavor": "m1.small", "user_data": "", "image": image}
               for sid, image in (("s-1", bad), ("s-2", good))]
    actions = agent.plan_nodes(servers, [], {}, 0.0, 2.0, {}, "2026-01-01T00:00:00Z",
                               unregistered=frozenset({bad}))
    assert [agent.server_of(n) for n in actions.create] == ["s-2"]
    assert actions.skipped == ("sco-web-s-1",)
