"""A capacity buffer on the simulated region under the controller (design: Buffers), end to end.

Real processes, as in ``test_sim_disruption``: ``scoctl sim up`` and the controller ``scoctl
run --follow``, stopped by PID. orders-daily keeps a buffer of 3 chunks (its largest pod): with
its demand scaled to zero the Ready capacity stays well past three idle timeouts, and 3
returning pods run on it at once, before any new unit is Ready; the buffer is then topped up.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_disruption import Story, live, planned
from tests.e2e.test_sim_notice import DEMO

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

IDLE = 1.0  # timeouts.idle, seconds
CHUNKS = 3


class Buffered(Story):
    def configure(self, **disruption: Any) -> None:
        config = yaml.safe_load(DEMO.read_text())
        config["timeouts"].update(idle=f"{IDLE:g}s", reconcile_interval="1s", drain="30s")
        config["buffers"] = [{"workload": "orders-daily", "chunk": None, "replicas": CHUNKS}]
        self.config.write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buffered]:
    cwd = tmp_path_factory.mktemp("buffers")
    sim = start_sim(cwd)
    region = Buffered(cwd, sim.pids)
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


def buffer_of(status: dict[str, Any]) -> dict[str, Any]:
    (entry,) = [b for b in status["buffers"] if b["workload"] == "orders-daily"]
    return entry


def ready(status: dict[str, Any]) -> set[str]:
    return {i["id"] for i in live(status) if i["status"] == "ready" and not i["disruption"]}


def replanned(status: dict[str, Any], pods: int) -> bool:
    """The claim has `pods` pods and the plan is for its latest version."""
    claims = [c for c in status["claims"] if c["workload"] == "orders-daily"]
    plans = [w for w in status["plan"]["workloads"] if w["workload"] == "orders-daily"]
    return (bool(claims) and claims[0]["pods"] == pods and bool(plans)
            and plans[0]["claim_version"] == claims[0]["version"])


def wait_for(story: Buffered, what: str, test: Any, timeout: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        story.alive()
        status = story.status()
        if test(status):
            return status
        assert time.monotonic() < deadline, f"not {what}: {status}"
        time.sleep(0.5)


def test_a_3_chunk_buffer_keeps_ready_capacity_at_zero_demand_and_3_pods_run_on_it_at_once(
        story: Buffered) -> None:
    story.scale(CHUNKS)
    story.start()
    try:
        wait_for(story, "holding the buffer beside 3 running pods",
                 lambda s: replanned(s, CHUNKS)
                 and buffer_of(s) == {"workload": "orders-daily", "desired": CHUNKS,
                                      "held": CHUNKS, "problem": None}
                 and story.pods()["running"] == CHUNKS)
        story.scale(0)
        # the plan shrinks to the buffer alone: units above it go, the buffer's stay
        status = wait_for(story, "converged on the buffer alone", lambda s: replanned(s, 0)
                          and story.pods()["running"] == 0
                          and len(live(s)) == planned(s) == len(ready(s))
                          and buffer_of(s)["held"] == CHUNKS)
        kept = ready(status)
        seen = len(story.events())
        began = time.monotonic()
        while time.monotonic() - began < 4 * IDLE + 4:  # past 3x the idle timeout, and passes
            story.alive()
            status = story.status()
            assert buffer_of(status)["held"] == CHUNKS, status
            assert kept <= ready(status), status["instances"]
            time.sleep(0.5)
        assert not [e for e in story.events()[seen:] if e["token"] == "DISRUPTION_STARTED"]
        story.scale(CHUNKS)
        status = wait_for(story, "running 3 returning pods",
                          lambda s: story.pods()["running"] == CHUNKS, timeout=30.0)
        assert ready(status) <= kept, "the pods waited for a new unit, not run on the buffer"
        # topped up: the buffer is held again beside the pods (more units than before). The
        # units are part of the wait: `held` is what the controller's last pass counted, and a
        # status read before its next pass still shows the buffer's units as free
        status = wait_for(story, "topped up", lambda s: buffer_of(s)["held"] == CHUNKS
                          and story.pods()["running"] == CHUNKS
                          and len(ready(s)) > len(kept))
        assert kept <= ready(status), "a unit the returning pods run on was removed"
    finally:
        story.stop()
