"""A leader paused at its launch call is deposed and never launches (issue 28 item 1, Runners).

Two `scoctl run --follow` controllers on one PostgreSQL state and one Nova emulator, as two
hosts (their own holder names, directories and budget dirs). The leader commits a launch
intent and is stopped right there, before its create call (``SCOCTL_PAUSE_AT=after-intent``:
a real SIGSTOP, every thread of it, as a VM pause or a long GC would). The standby takes the
lease; it must not fail the paused leader's intent before that leader's lease has expired plus
the longest a call may take (``api`` × attempts + ``retry_budget``), then it launches the
units. When the old leader resumes (a real SIGCONT) past its lease, it sends nothing: the
fleet never holds more servers than the plan, and the old leader's records are fenced.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from scoctl.core.model.vocabulary import LaunchStatus
from tests.e2e.runners import Fleet, Runner, fast_emulator, wait_until
from tests.fixtures.postgres import PgState

pytestmark = [pytest.mark.nova, pytest.mark.slow]

TTL = 3.0
API, ATTEMPTS, RETRY_BUDGET = 2.0, 4, 2.0  # attempts: RetryPolicy's default
LONGEST_CALL = API * ATTEMPTS + RETRY_BUDGET
TIMEOUTS = f"api: {API:g}s, retry_budget: {RETRY_BUDGET:g}s, launch_settle: 5s"


@pytest.fixture
def fleet(pg_state: PgState, tmp_path: Path) -> Iterator[Fleet]:
    emulator = fast_emulator()
    fleet = Fleet(tmp_path, pg_state.url, pg_state.password_file, emulator, project="pause",
                  ttl=TTL, mode="follow", timeouts=TIMEOUTS)
    try:
        yield fleet
    finally:
        fleet.stop()
        emulator.stop()


def stopped(runner: Runner) -> bool:
    """The process is stopped by a signal (state T in /proc)."""
    stat = Path(f"/proc/{runner.proc.pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


def ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_a_leader_paused_at_its_launch_call_is_deposed_and_never_launches_after_resuming(
        fleet: Fleet) -> None:
    old = fleet.start({"SCOCTL_PAUSE_AT": "after-intent"})
    wait_until(lambda: "pass in" in old.output(), bool, timeout=60)
    assert fleet.leader(timeout=30) is old
    standby = fleet.start()
    wait_until(lambda: "pass in" in standby.output(), bool, timeout=60)

    fleet.set_units(2)  # the old leader commits the intent and stops before its call
    wait_until(lambda: stopped(old), bool, timeout=30)
    [intent] = fleet.store.launches()
    assert intent.status == LaunchStatus.INTENT
    assert fleet.leader(timeout=TTL * 2 + 10, not_=old) is standby

    seen: list[int] = []
    wait_until(lambda: seen.append(fleet.servers()) or seen[-1], lambda n: n >= 2,
               timeout=LONGEST_CALL + 60)  # the new leader launches the units itself
    events = fleet.store.events()
    [elected] = [e for e in events if e.token == "LEADER_ELECTED"
                 and e.detail["holder"] == standby.holder]
    [lapsed] = [e for e in events if e.token == "LAUNCH_TIMEOUT"
                and e.detail["launch"] == intent.launch_id]
    # not before the old holder's lease expired plus the longest its call may take
    assert (ts(lapsed.ts) - ts(elected.ts)).total_seconds() >= LONGEST_CALL - 0.5

    resumed = time.time()
    os.kill(old.proc.pid, signal.SIGCONT)  # long past its lease
    for _ in range(40):  # 8 s: its pass goes on, its lease keeper finds the term lost
        seen.append(fleet.servers())
        time.sleep(0.2)
    assert max(seen) == 2, f"servers seen: {seen}"
    assert fleet.servers() == fleet.planned() == 2
    posts = [c for c in fleet.mutating_calls_since(resumed) if c[1] == "POST"]
    assert posts == []  # the old leader sent no create
    [failed] = [x for x in fleet.store.launches() if x.launch_id == intent.launch_id]
    assert failed.status == LaunchStatus.FAILED  # its record was fenced: not overwritten
    assert old.alive() and standby.alive()


def late_create(fleet: Fleet, launch_id: str, count: int) -> None:
    """Servers carrying `launch_id`'s tags appear at Nova now: a create call of the deposed
    leader that Nova carried out long after it was sent (held in a proxy, a retransmission)."""
    import httpx

    from scoctl.sim.nova_emulator import IMAGE_ID

    tags = ["sco:managed", "sco:workload=web", "sco:pool=tiny.p0", "sco:gen=1",
            f"sco:launch={launch_id}"]
    answer = httpx.post(f"{fleet.emulator.url}/servers", timeout=10, headers={
        "X-Auth-Token": f"admin:{fleet.project}", "OpenStack-API-Version": "compute 2.52"},
        json={"server": {"name": f"sco-web-{launch_id}", "flavorRef": "1", "imageRef": IMAGE_ID,
                         "networks": "none", "min_count": count, "max_count": count,
                         "availability_zone": "nova", "tags": tags,
                         "return_reservation_id": True}})
    assert answer.status_code == 202, answer.text


def test_servers_of_a_failed_intent_that_appear_later_are_removed_as_surplus(
        fleet: Fleet) -> None:
    from scoctl.clock import SystemClock
    from scoctl.core.model import LaunchRecord
    from scoctl.core.timefmt import rfc3339

    fleet.set_units(2)
    controller = fleet.start()
    wait_until(fleet.servers, lambda n: n == 2, timeout=60)
    now = rfc3339(SystemClock().now())
    lost = LaunchRecord(launch_id="l-0000deadbeef", region="region-a", workload="web",
                        pool="tiny.p0", generation=1, count=2, status=LaunchStatus.INTENT,
                        created=now, updated=now)
    fleet.store.add_launch(lost)  # a deposed leader's intent, failed by its successor
    fleet.store.update_launch(lost.launch_id, status=LaunchStatus.FAILED, error="lapsed")

    late_create(fleet, lost.launch_id, 2)
    assert fleet.servers() == 4
    wait_until(fleet.servers, lambda n: n == 2, timeout=60)  # back to the plan
    events = fleet.store.events()
    late = [e for e in events if e.token == "LATE_LAUNCH_ADOPTED"]
    assert [e.detail["launch"] for e in late] == [lost.launch_id]
    assert fleet.planned() == 2
    time.sleep(3)
    assert fleet.servers() == 2
    removed = {i.id for i in fleet.store.instances(include_deleted=True)
               if i.launch_id == lost.launch_id}
    assert len(removed) == 2  # adopted, then deleted: the units launched again were kept
    scaled = [e for e in events if e.token == "INSTANCE_SCALE_DOWN"]
    assert {e.detail["server"] for e in fleet.store.events()
            if e.token == "INSTANCE_SCALE_DOWN"} == removed
    assert all(e.detail["reason"] == "late" for e in scaled)
    assert controller.alive()
