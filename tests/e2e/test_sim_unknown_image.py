"""An image the region does not have, on the simulated region under the controller (issue 49
item 1), end to end.

Real processes started by the real CLI: the Kubernetes and Nova emulators and the node agent.
`scoctl run --once` runs until the pods run; then the controller (`run --follow`) runs alone and
the test edits its config and sends SIGHUP: the launch image becomes ``ubuntu-26.04``, which the
region's Nova does not have. Before the fix the whole region was recorded as a Nova outage
(``API_UNAVAILABLE api=nova``, back-off), drift said ``canary`` and a reclaim's replacement
waited with nothing saying why. Now: no Nova outage is recorded; the rollout halts naming the
image (``DRIFT_ROLLOUT_HALTED``); a reclaim notice is carried out within its notice (drained,
its server gone by the deadline) and its replacement's launch fails with ``LAUNCH_FAILED``
naming the image; once the config is reverted (SIGHUP) the replacement launches at once and
the fleet is back on its plan, every pod running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import sim_running
from tests.e2e.test_sim_drift import SCENARIO, Controller, Region, live, planned, until

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

REPLICAS = 8
MISSING = "ubuntu-26.04"
NOTICE_S = 25


def scenario(cwd: Path) -> Path:
    data = yaml.safe_load(SCENARIO.read_text())
    data["kubernetes"]["deployments"][0]["replicas"] = REPLICAS
    path = cwd / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("unknown-image")
    with sim_running(cwd, "--scenario", str(scenario(cwd))):
        story = Region(cwd)
        story.scoctl("init")
        yield story


def tokens(region: Region, token: str) -> list[dict[str, Any]]:
    return [e for e in region.events() if e["token"] == token]


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_an_unknown_image_is_named_halts_drift_and_no_nova_outage(region: Region) -> None:
    for _ in range(40):
        region.scoctl("run", "--once")
        sim = region.json("sim", "status")
        if sim["pods"]["running"] == REPLICAS and sim["pods"]["pending"] == 0:
            break
        time.sleep(1.0)
    else:
        raise AssertionError(f"the pods never ran: {sim}")
    plan = planned(region.json("status"))
    image = region.data["regions"][0]["launch"]["image"]
    controller = Controller(region)
    try:
        until("the controller's first reconcile", controller.reconciled, controller, 60)
        region.data["regions"][0]["launch"]["image"] = MISSING
        region.write()
        controller.reload()
        until("the rollout halted, naming the image",
              lambda: any(e["detail"].get("image") == MISSING
                          for e in tokens(region, "DRIFT_ROLLOUT_HALTED")), controller, 30)
        rollouts = region.json("status").get("drift") or []
        assert rollouts and {r["phase"] for r in rollouts} == {"halted"}, rollouts

        noticed = json.loads(region.scoctl("sim", "reclaim", "--count", "1", "--notice",
                                           f"{NOTICE_S}s", "--json"))["noticed"]
        [name] = [n["name"] for n in noticed]
        deadline = stamp(noticed[0]["reclaim_at"])
        until("the replacement's launch failed, naming the image",
              lambda: any(MISSING in str(e["detail"].get("missing"))
                          for e in tokens(region, "LAUNCH_FAILED")), controller, 30)
        api = region.api()

        def gone() -> bool:
            return all(s["name"] != name or s.get("status") == "DELETED"
                       for s in api.servers())

        until("the noticed server gone", gone, controller, NOTICE_S + 10)
        [reclaimed] = [e for e in tokens(region, "INSTANCE_RECLAIMED")
                       if e["detail"].get("name") == name] or [None]
        assert reclaimed is not None and stamp(reclaimed["ts"]) <= deadline, reclaimed
        assert tokens(region, "API_UNAVAILABLE") == [], tokens(region, "API_UNAVAILABLE")

        region.data["regions"][0]["launch"]["image"] = image  # reverted
        region.write()
        controller.reload()

        def on_plan() -> bool:
            status = region.json("status")
            ready = [i for i in live(status) if i["status"] == "ready"]
            sim = region.json("sim", "status")
            return (len(ready) >= planned(status) >= plan
                    and sim["pods"]["running"] == REPLICAS and sim["pods"]["pending"] == 0)

        until("the fleet back on its plan", on_plan, controller, 90)
        assert tokens(region, "API_UNAVAILABLE") == []
        api.close()
    finally:
        code = controller.stop()
    assert code == 0, controller.tail()
