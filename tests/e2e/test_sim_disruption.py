"""Day 2 on the simulated region under the controller (design: Disruption), end to end.

Real processes: ``scoctl sim up`` (the Kubernetes and Nova emulators, the node agent, the
scenario's 42 pending pods of orders-daily) and the controller ``scoctl run --follow --json``,
started per test on a config of its own and stopped by PID (SIGTERM, exit 0). Every test
samples ``status --json`` while the controller runs:

* demand 42 → 6 converges on the plan under one budget of 2 units (every reason counted), and
  the disruptions in flight reach that budget but never pass it;
* a ``units: 0`` window in Europe/Berlin, active now, holds every surplus unit (no
  ``DISRUPTION_STARTED``, the units stay) until it closes; then they go;
* ``expire_after: 45s`` replaces every unit (expired ones first replaced: Ready units never
  below the plan) and the old ones are gone;
* ``scoctl sim fail-node`` turns a Node NotReady for good: the unit is repaired
  (``UNIT_UNHEALTHY``, then ``REPLACEMENT_READY`` once its replacement is Ready) and deleted.

The tests run in order on one region (each leaves the fleet converged for the next).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import yaml

from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_notice import DEMO

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LIMIT = 2  # the budget, in flight, of every reason at once
GONE = ("deleted", "error")


class Story:
    """One simulated region, its config (rewritten per test) and the controller."""

    def __init__(self, cwd: Path, pids: list[int]) -> None:
        self.cwd, self.pids = cwd, pids
        self.config = cwd / "config.yaml"
        self.controller: subprocess.Popen[bytes] | None = None
        self.log = cwd / "controller.log"
        self.configure()

    def configure(self, **disruption: Any) -> None:
        config = yaml.safe_load(DEMO.read_text())
        config["timeouts"].update(idle="1s", reconcile_interval="2s", drain="30s")
        config.pop("disruption_budget", None)
        config["disruption"] = {"budgets": [{"units": LIMIT}], **disruption}
        self.config.write_text(yaml.safe_dump(config))

    def scoctl(self, *args: str) -> str:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl("status", "--json"))
        return body

    def pods(self) -> dict[str, int]:
        body: dict[str, int] = json.loads(self.scoctl("sim", "status", "--json"))["pods"]
        return body

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.scoctl("events", "--json").splitlines()
                if line.strip()]

    def scale(self, replicas: int) -> None:
        self.scoctl("sim", "scale", "shop/orders-daily", "--replicas", str(replicas), "--json")

    def start(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
        env["PYTHONPATH"] = str(REPO)
        with self.log.open("a") as log:
            self.controller = subprocess.Popen(
                [sys.executable, "-m", "scoctl", "--config", str(self.config), "--json", "run",
                 "--follow"], cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        self.pids.append(self.controller.pid)

    def alive(self) -> None:
        assert self.controller is not None and self.controller.poll() is None, \
            self.log.read_text()[-3000:]

    def stop(self) -> None:
        if self.controller is None:
            return
        controller, self.controller = self.controller, None
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(60)
        assert code == 0, self.log.read_text()[-3000:]


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    cwd = tmp_path_factory.mktemp("disruption")
    sim = start_sim(cwd)
    region = Story(cwd, sim.pids)
    try:
        region.scoctl("init")
        yield region
    finally:
        try:
            region.stop()
        finally:
            result = run_scoctl(cwd, "sim", "down")
            kill_leftovers(region.pids)
        assert result.returncode == 0, result.stderr


def planned(status: dict[str, Any]) -> int:
    return sum(p["units"] for w in status["plan"]["workloads"] for p in w["pools"])


def live(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [i for i in status["instances"] if i["status"] not in GONE]


def converged(story: Story, status: dict[str, Any], replicas: int) -> bool:
    units = live(status)
    if len(units) != planned(status) or any(i["disruption"] or i["status"] != "ready"
                                            for i in units):
        return False
    pods = story.pods()
    return pods["running"] == replicas and pods["pending"] == 0


def converge(story: Story, replicas: int, timeout: float = 150.0,
             below: int | None = None) -> dict[str, Any]:
    """Wait for the fleet to converge on `replicas` pods (with a plan of fewer than `below`
    units: the controller has planned the shrink)."""
    deadline = time.monotonic() + timeout
    while True:
        story.alive()
        status = story.status()
        if (below is None or planned(status) < below) and converged(story, status, replicas):
            return status
        assert time.monotonic() < deadline, f"not converged on {replicas} pods: {status}"
        time.sleep(1.0)


def started_since(story: Story, count: int) -> list[dict[str, Any]]:
    return [e for e in story.events()[count:] if e["token"] == "DISRUPTION_STARTED"]


def test_1_demand_42_to_6_converges_under_the_controller_within_the_budget(story: Story) -> None:
    story.start()
    try:
        before = len(live(converge(story, 42)))
        seen = len(story.events())
        story.scale(6)
        began = time.monotonic()
        peak = 0
        while True:
            story.alive()
            status = story.status()
            flying: dict[str, int] = {}
            for unit in live(status):
                if unit["disruption"]:
                    flying[unit["disruption"]] = flying.get(unit["disruption"], 0) + 1
            # one budget naming no reason: it counts every disruption at once
            assert sum(flying.values()) <= LIMIT, status["instances"]
            peak = max(peak, sum(flying.values()))
            for entry in status["disruption"]:
                assert entry["in_flight"] <= LIMIT and (entry["allowed"] or 0) <= LIMIT
            if planned(status) < before and converged(story, status, 6):
                break
            assert time.monotonic() - began < 150, f"not converged: {status}"
            time.sleep(0.2)
        seconds = time.monotonic() - began
        reasons = [e["detail"]["reason"] for e in started_since(story, seen)]
    finally:
        story.stop()
    assert peak == LIMIT, f"the budget never bound: peak in flight {peak}"
    assert len(live(status)) < before and reasons
    print(f"controller: 42 -> 6 pods, {before} -> {len(live(status))} units in {seconds:.1f} s, "
          f"{len(reasons)} disruptions ({ {r: reasons.count(r) for r in set(reasons)} }), "
          f"peak in flight {peak}")


def test_2_a_zero_window_in_berlin_holds_every_surplus_unit_until_it_closes(story: Story) -> None:
    story.scale(18)
    story.start()
    try:
        converge(story, 18)
    finally:
        story.stop()
    # a window allowing 0, from this minute's firing in Europe/Berlin, closing in ~50 s
    berlin = datetime.now(ZoneInfo("Europe/Berlin"))
    duration = berlin.second + 50
    closes = berlin.replace(second=0, microsecond=0) + timedelta(seconds=duration)
    story.configure(budgets=[
        {"units": 0, "schedule": f"{berlin.minute} {berlin.hour} * * *",
         "duration": f"{duration}s", "time_zone": "Europe/Berlin"},
        {"units": LIMIT}])
    held = {i["id"] for i in live(story.status())}
    seen = len(story.events())
    story.scale(6)
    story.start()
    try:
        windows, shrunk = [], len(held)
        while datetime.now(UTC) < closes.astimezone(UTC) - timedelta(seconds=3):
            story.alive()
            status = story.status()
            assert {i["id"] for i in live(status)} == held
            assert not any(i["disruption"] for i in live(status))
            shrunk = min(shrunk, planned(status))
            windows += [e for e in status["disruption"] if e["allowed"] == 0]
            time.sleep(1.0)
        # none while the window is open (on a loaded host the events are read past its end)
        assert not [e for e in started_since(story, seen)
                    if datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) < closes]
        assert shrunk < len(held)  # the plan shrank: there was surplus to hold
        assert windows and all(
            datetime.fromisoformat(e["window_end"].replace("Z", "+00:00")) == closes
            for e in windows), windows
        # while the window is open it holds them (once it closes, the second budget may:
        # DISRUPTION_BLOCKED is told again when what holds a reason changes)
        blocked = [e for e in story.events()[seen:] if e["token"] == "DISRUPTION_BLOCKED"
                   and datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) < closes]
        assert blocked and all(e["detail"]["budget"] == 0 for e in blocked), [
            (e["ts"], e["detail"]) for e in blocked]
        status = converge(story, 6, timeout=120, below=len(held))
        started = started_since(story, seen)
    finally:
        story.stop()
    first = min(datetime.fromisoformat(e["ts"].replace("Z", "+00:00")) for e in started)
    assert first >= closes
    assert len(live(status)) < len(held)
    print(f"window: {len(held)} units held until {closes.isoformat()}, first disruption "
          f"{(first - closes).total_seconds():.1f} s after it closed")


def ready_units(status: dict[str, Any]) -> int:
    return sum(1 for i in status["instances"] if i["status"] == "ready")


def test_3_expiry_replaces_every_unit_with_ready_units_never_below_the_plan(story: Story
                                                                             ) -> None:
    story.configure(expire_after="45s")
    status = story.status()
    old = {i["id"] for i in live(status)}
    want = planned(status)
    seen = len(story.events())
    story.start()
    began = time.monotonic()
    lowest = want
    try:
        while True:
            story.alive()
            status = story.status()
            lowest = min(lowest, ready_units(status))
            assert ready_units(status) >= planned(status) == want, status["instances"]
            if not old & {i["id"] for i in live(status)} and converged(story, status, 6):
                break
            assert time.monotonic() - began < 150, f"old units left: {status['instances']}"
            time.sleep(0.2)
        seconds = time.monotonic() - began
        events = story.events()[seen:]
    finally:
        story.stop()
    expired = {e["detail"]["server"] for e in events if e["token"] == "UNIT_EXPIRED"}
    replaced = {e["detail"]["old"] for e in events if e["token"] == "REPLACEMENT_READY"}
    assert old <= expired and old <= replaced
    assert not old & {i["id"] for i in live(status)}
    print(f"expiry: {len(old)} units replaced in {seconds:.1f} s, ready units at least "
          f"{lowest} (plan {want})")


def test_4_a_failed_node_is_replaced_then_removed(story: Story) -> None:
    story.configure(repair_after="5s")
    status = story.status()
    victim = sorted(live(status), key=lambda i: i["name"])[0]
    seen = len(story.events())
    story.start()
    try:
        story.scoctl("sim", "fail-node", victim["id"], "--json")
        failed = time.monotonic()
        while True:
            story.alive()
            status = story.status()
            if victim["id"] not in {i["id"] for i in live(status)} \
                    and converged(story, status, 6):
                break
            assert time.monotonic() - failed < 120, f"not repaired: {status['instances']}"
            time.sleep(1.0)
        seconds = time.monotonic() - failed
        events = story.events()[seen:]
    finally:
        story.stop()
    tokens = [(e["token"], e["detail"]) for e in events]
    sick = [i for i, (t, d) in enumerate(tokens) if t == "UNIT_UNHEALTHY"
            and d["server"] == victim["id"]]
    ready = [i for i, (t, d) in enumerate(tokens) if t == "REPLACEMENT_READY"
             and d["old"] == victim["id"]]
    assert sick and ready and sick[0] < ready[0], tokens
    new = tokens[ready[0]][1]["new"]
    assert new and new != victim["id"] and new in {i["id"] for i in live(status)}
    print(f"repair: {victim['name']} replaced by {new} and removed {seconds:.1f} s after "
          f"its node failed")


def test_5_a_pause_holds_every_disruption_while_a_reclaim_notice_is_still_handled(
        story: Story) -> None:
    """`scoctl pause --disruptions --for` during a consolidation: no disruption starts while
    it holds, a reclaim notice given meanwhile is acted on (noticed, drained, deleted before
    its deadline), and once the pause runs out the fleet converges on the plan."""
    story.configure()
    story.scale(14)
    story.start()
    try:
        converge(story, 14)
        story.scoctl("pause", "--disruptions", "--for", "35s", "--reason", "e2e: incident")
        until = story.status()["paused"]["disruptions"]["until"]
        ends = datetime.fromisoformat(until.replace("Z", "+00:00"))
        events = story.events()
        seen = max(i for i, e in enumerate(events) if e["token"] == "PAUSED") + 1
        held = {i["id"] for i in live(story.status()) if not i["disruption"]}  # in flight: go on
        story.scale(6)
        taken = json.loads(story.scoctl("sim", "reclaim", "--notice", "20s", "--json"))
        noticed = {t["id"] for t in taken["noticed"]}
        shrunk = len(held)
        while datetime.now(UTC) < ends - timedelta(seconds=2):
            story.alive()
            status = story.status()
            # none starts while the pause holds (a slow loop may read past its end)
            early = [e for e in started_since(story, seen) if e["ts"] < until]
            assert not early, early
            # nothing goes but the noticed server
            assert held - noticed <= {i["id"] for i in live(status)} | noticed
            shrunk = min(shrunk, planned(status))
            time.sleep(1.0)
        events = story.events()[seen:]
        assert shrunk < len(held)  # the plan shrank: there was surplus to hold
        assert any(e["token"] == "RECLAIM_NOTICED" for e in events), events
        status = converge(story, 6, timeout=150, below=len(held))
        after = story.events()[seen:]
    finally:
        story.stop()
    resumed = [e for e in after if e["token"] == "RESUMED"]
    assert resumed and resumed[0]["detail"]["lapsed"] is True
    first = [e for e in after if e["token"] == "DISRUPTION_STARTED"]
    assert first and after.index(first[0]) > after.index(resumed[0])
    assert any(e["token"] == "INSTANCE_RECLAIMED" for e in after)
    assert status["paused"] == {}
    print(f"pause: {len(held)} units held 35 s, a reclaim notice handled meanwhile, then "
          f"{len(live(status))} units")
