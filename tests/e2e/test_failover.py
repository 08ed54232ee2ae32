"""Several runners on one PostgreSQL state (design: Runners): failover after kill -9, a frozen
leader deposed and fenced, a standby controller that plans but makes no Nova call, and the
token budget shared across processes.

Runners are real processes (tests/e2e/runners.py) that share nothing but the database and the
Nova emulator, as two hosts would: the failover tests run twice, with `scoctl run --interval`
loops and with `scoctl run --follow` controllers (`MODES`), which compete for the lease the
same way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoctl.state.postgresql import connect, leases
from tests.e2e.runners import MODES, REGION, REPO, Fleet, Runner, fast_emulator, wait_until
from tests.fixtures.postgres import PgState

pytestmark = [pytest.mark.nova, pytest.mark.slow]

TRIALS = 20
SCHEDULING_SLACK_S = 1.5  # a loaded 2-core CI machine delays threads; the bound is ttl + ttl/3


def make_fleet(pg_state: PgState, tmp_path: Path, ttl: float,
               mode: str = "interval") -> Iterator[Fleet]:
    emulator = fast_emulator()
    fleet = Fleet(tmp_path, pg_state.url, pg_state.password_file, emulator,
                  project="failover", ttl=ttl, mode=mode)
    try:
        yield fleet
    finally:
        fleet.stop()
        emulator.stop()


@pytest.fixture(params=MODES)
def fleet(pg_state: PgState, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    yield from make_fleet(pg_state, tmp_path, ttl=1.0, mode=request.param)


@pytest.fixture(params=MODES)
def slow_fleet(pg_state: PgState, tmp_path: Path,
               request: pytest.FixtureRequest) -> Iterator[Fleet]:
    yield from make_fleet(pg_state, tmp_path, ttl=3.0, mode=request.param)


@pytest.fixture
def controllers(pg_state: PgState, tmp_path: Path) -> Iterator[Fleet]:
    yield from make_fleet(pg_state, tmp_path, ttl=1.0, mode="follow")


def running(runner: Runner) -> Runner:
    """Wait until `runner` has finished a pass (so it competes for the lease)."""
    wait_until(lambda: "pass in" in runner.output(), bool, timeout=60)
    return runner


def test_the_standby_leads_within_ttl_and_one_renewal_after_kill_9_without_a_double_launch(
        fleet: Fleet) -> None:
    units = 1
    fleet.set_units(units)
    running(fleet.start())
    standby = running(fleet.start())
    leader = fleet.leader(timeout=30)
    bound = fleet.ttl + fleet.ttl / 3
    takeovers: list[float] = []
    for trial in range(TRIALS):
        units += 1
        fleet.set_units(units)  # the leader has a launch to make when it dies
        time.sleep((trial % 5) * 0.05)  # at different points of its pass
        killed_at = fleet.kill(leader)
        new = fleet.leader(timeout=bound + 10, not_=leader)
        takeovers.append(time.monotonic() - killed_at)
        assert new is not leader and new.alive()
        assert fleet.servers() <= units, f"trial {trial}: more servers than the plan"
        standby = running(fleet.start())
        leader = new
    # every unit once: launched, or its intent still in flight (a leader killed between the
    # intent and the call): never launched twice, nothing lost
    wait_until(lambda: fleet.servers() + fleet.in_flight(), lambda n: n == units, timeout=30)
    assert fleet.planned() == units
    assert fleet.servers() <= units
    assert standby.alive()
    assert max(takeovers) <= bound + SCHEDULING_SLACK_S, sorted(takeovers)
    elected = [e for e in fleet.store.events() if e.token == "LEADER_ELECTED"]
    assert len(elected) == TRIALS + 1
    assert [e.detail["generation"] for e in elected] == list(range(1, TRIALS + 2))


def frozen(fleet: Fleet, runner: Runner) -> None:
    """SIGSTOP `runner` outside any transaction of its own (retrying until it is)."""
    for _ in range(50):
        os.kill(runner.proc.pid, signal.SIGSTOP)
        busy = fleet.store.pg.raw.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE %s "
            "AND state LIKE 'idle in transaction%%'", [f"% %:{runner.proc.pid}"]).fetchone()
        if busy is not None and busy[0] == 0:
            return
        os.kill(runner.proc.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError(f"{runner.name} never left its transaction")


def test_a_frozen_leader_is_deposed_and_after_resuming_makes_no_nova_call(
        slow_fleet: Fleet) -> None:
    fleet = slow_fleet
    fleet.set_units(2)
    old = running(fleet.start())
    assert fleet.leader(timeout=30) is old
    wait_until(fleet.servers, lambda n: n == 2, timeout=30)
    standby = running(fleet.start())

    frozen(fleet, old)  # past its lease: the standby takes the region over
    assert fleet.leader(timeout=fleet.ttl * 2 + 10, not_=old) is standby
    frozen(fleet, standby)  # hold the new leader still while its term is live
    lease = fleet.lease()
    assert lease is not None and lease.holder == standby.holder
    fleet.set_units(4)  # demand the old leader would launch for, if it still thought it led
    intents = len(fleet.store.launches())

    resumed = time.time()
    os.kill(old.proc.pid, signal.SIGCONT)
    watch_until = resumed + max(0.5, (lease.expires_at - fleet.db_now()).total_seconds() - 0.3)
    time.sleep(max(0.0, watch_until - time.time()))
    assert fleet.mutating_calls_since(resumed) == []  # the old leader made no Nova call
    assert fleet.servers() == 2
    assert len(fleet.store.launches()) == intents  # nor recorded a launch intent
    still = fleet.lease()
    assert still is not None and still.holder == standby.holder  # the window was its term
    wait_until(old.output, lambda text: "lost the lead of region-a" in text
               or "not the leader" in text, timeout=10)

    os.kill(standby.proc.pid, signal.SIGCONT)
    wait_until(fleet.servers, lambda n: n == 4, timeout=30)  # the real leader launches
    assert fleet.servers() == 4


SPENDER = """
import sys
from pathlib import Path
from scoctl.state.postgresql.coordination import SharedBudget
budget = SharedBudget(sys.argv[1], Path(sys.argv[2]), "region-a", int(sys.argv[3]))
print("\\n".join(repr(budget.acquire()) for _ in range(int(sys.argv[4]))), flush=True)
budget.close()
"""


def test_two_processes_that_share_only_the_database_never_exceed_the_rate(
        pg_state: PgState, tmp_path: Path) -> None:
    from scoctl.state.postgresql import PostgresStore

    PostgresStore.open_url(pg_state.url, create=True,
                           password_file=pg_state.password_file).close()
    rate, each = 5, 12
    env = {"PYTHONPATH": str(REPO), "PATH": os.environ.get("PATH", "")}
    procs = [subprocess.Popen(
        [sys.executable, "-c", SPENDER, pg_state.url, str(pg_state.password_file), str(rate),
         str(each)], stdout=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        for _ in range(2)]
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    starts = sorted(float(line) for out in outputs for line in out.split())
    assert len(starts) == 2 * each
    windows = [later - first for first, later in zip(starts, starts[rate:], strict=False)]
    assert min(windows) >= 1.0  # any `rate + 1` calls span more than one second
    # both processes really spent tokens side by side
    assert all(len(out.split()) == each for out in outputs)


def test_a_standby_controller_plans_but_makes_no_nova_call_until_it_takes_over(
        controllers: Fleet) -> None:
    fleet = controllers
    other = "other-host:4242"
    with connect(fleet.url, password_file=fleet.password_file) as db:
        leases.take(db, REGION, other, None, 600)  # another host leads, for a long time
        started = time.time()
        fleet.set_units(2)
        standby = running(fleet.start())
        wait_until(fleet.planned, lambda n: n == 2, timeout=30)  # the standby plans
        wait_until(standby.leader_metric, lambda v: v == 0, timeout=10)
        time.sleep(3 * fleet.ttl)  # several renew intervals and reconciles of its own
        assert fleet.mutating_calls_since(started) == []
        assert fleet.store.launches() == [] and fleet.servers() == 0
        assert "not the leader" not in standby.output()  # it never tried: no write refused
        lease = fleet.lease()
        assert lease is not None and lease.holder == other

        assert leases.give_up(db, REGION, other, lease.generation)  # its clean stop
        assert fleet.leader(timeout=fleet.ttl + 10) is standby
        wait_until(fleet.servers, lambda n: n == 2, timeout=30)  # the new leader launches
    wait_until(standby.leader_metric, lambda v: v == 1, timeout=10)

    standby.proc.terminate()  # a clean stop gives the term up: no standby waits for the ttl
    assert standby.proc.wait(timeout=20) == 0
    given_up = fleet.lease()
    assert given_up is not None and given_up.holder == standby.holder
    assert not given_up.live(fleet.db_now())
    [elected] = [e.detail for e in fleet.store.events() if e.token == "LEADER_ELECTED"
                 and e.detail["holder"] == standby.holder]
    assert (elected["previous"], elected["generation"]) == (other, lease.generation + 1)
