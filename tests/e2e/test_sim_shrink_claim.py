"""A shrink's drains do not flap the claim (issue 49 item 8), end to end on the simulated region
under the controller (`run --follow`).

After 42 → 10 pods the claim flapped between 3 and 4 units, 14 claim versions in 40 s, while
the drains ran: each eviction took one pod off the claim (the evicted pod Terminating) and gave
it back (the ReplicaSet's replacement). Here the bundled scenario's 42 pods (a
PodDisruptionBudget of 1: drains move one pod at a time) run, the Deployment is scaled to 10,
and every plan the controller commits for orders-daily from then on is read from its
``PLAN_UPDATED`` events: the units only go down, and the claim takes a handful of versions,
not two per eviction.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_disruption import Story, converge, live

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

WORKLOAD = "orders-daily"


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Story]:
    cwd = tmp_path_factory.mktemp("shrink")
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


def plans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["detail"] for e in events
            if e["token"] == "PLAN_UPDATED" and e["workload"] == WORKLOAD]


def test_the_claim_only_shrinks_while_a_shrink_drains_its_units(story: Story) -> None:
    story.start()
    try:
        before = len(live(converge(story, 42)))
        seen = len(story.events())
        story.scale(10)
        began = time.monotonic()
        status = converge(story, 10, below=before)
        drains = [e for e in story.events()[seen:] if e["token"] == "DISRUPTION_STARTED"]
        seconds = time.monotonic() - began
    finally:
        story.stop()
    after = plans(story.events()[seen:])
    units = [p["units"] for p in after]
    versions = sorted({p["claim_version"] for p in after})
    print(f"\n42 -> 10 pods: {before} -> {len(live(status))} units in {seconds:.1f} s, "
          f"{len(drains)} disruptions; plans {units}, {len(versions)} claim versions")
    assert drains, "no unit was drained: nothing was checked"
    assert units == sorted(units, reverse=True), units  # never back up during the drains
    assert len(versions) <= 3, (versions, after)
