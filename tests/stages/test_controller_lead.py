"""The controller's leadership on a PostgreSQL state (design: Runners), in process and exact: a
controller deposed behind its back (another runner took the region while its lease keeper had
not yet looked) has its launch refused by the fence, makes no call and stops acting; one that
comes to lead a region plans and acquires at once, without waiting for demand to change.

The region's `Cloud` is the in-package fake (it records every call); the state, the leases and
the token budget are a real PostgreSQL database (`pg_state`). The lease keeper renews every
``ttl / 3`` from its own thread; the ttl here is long, so that thread never looks during a test
and the test decides when the controller learns what happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import SystemClock
from scoctl.config.schema import load_config
from scoctl.core import controller as decide
from scoctl.runner.controller import Controller
from scoctl.services.claims import record_claim
from scoctl.services.leadership import LeaseKeeper, leadership_for
from scoctl.state.postgresql import PostgresStore, connect, leases
from tests.e2e.runners import REGION, write_config
from tests.fixtures.postgres import PgState

OTHER = "other-host:4242"
POD = {"cpu": 1000, "memory": 512 * 2**20}  # one m1.tiny unit


@dataclass
class Lead:
    controller: Controller
    store: PostgresStore
    cloud: FakeCloud
    pg: PgState
    metrics: Path
    reports: list[str] = field(default_factory=list)

    def demand(self, units: int) -> None:
        record_claim(self.store, "web", contract="T1", source="file", pods=units,
                             requests={k: v * units for k, v in POD.items()}, largest_pod=POD)

    def one_pass(self) -> None:
        """Look at the lease (as the controller's loop does on every tick), then one pass
        with intake, plan + acquire and reconcile all due."""
        self.controller.follow_lead()
        self.controller.schedule = decide.start(self.controller.clock.monotonic())
        self.controller._pass()

    def take_over(self, holder: str) -> None:
        """Another runner takes the region: a new term of `holder`, live for a minute."""
        with connect(self.pg.url, password_file=self.pg.password_file) as db:
            db.execute("UPDATE leases SET holder = %s, generation = generation + 1, "
                       "expires_at = clock_timestamp() + interval '60 seconds' "
                       "WHERE region = %s", [holder, REGION])

    def leader_metric(self) -> str:
        return next(line for line in self.metrics.read_text().splitlines()
                    if line.startswith("scoctl_leader{"))


@pytest.fixture
def lead(pg_state: PgState, tmp_path: Path) -> Iterator[Lead]:
    config = load_config(write_config(
        tmp_path, url=pg_state.url, password_file=pg_state.password_file,
        nova_url="http://127.0.0.1:9/unused", project="lead", ttl=60, interval_dir=tmp_path,
        follow=True))
    store = PostgresStore.open_url(pg_state.url, create=True,
                                   password_file=pg_state.password_file)
    keeper = leadership_for(config)
    assert isinstance(keeper, LeaseKeeper)
    cloud = FakeCloud()
    found = Lead(Controller(config, store, SystemClock(), sources=(), cluster=None,
                            scheduler=None, lock=nullcontext, clouds={REGION: cloud},
                            lead=keeper), store, cloud, pg_state, tmp_path / "scoctl.prom")
    found.controller.report = found.reports.append
    try:
        yield found
    finally:
        keeper.close()
        store.close()


def test_a_controller_deposed_behind_its_back_has_its_launch_refused_and_stops_acting(
        lead: Lead) -> None:
    lead.demand(2)
    lead.one_pass()
    assert lead.controller.led == {REGION}
    calls, intents = lead.cloud.mutating_calls(), len(lead.store.launches())
    assert len(lead.cloud.launch_calls()) >= 1 and intents >= 1
    assert lead.leader_metric() == 'scoctl_leader{region="region-a"} 1'

    lead.take_over(OTHER)  # its keeper has not looked yet: it still believes it leads
    assert lead.controller.lead.leads(REGION)
    lead.demand(4)
    lead.one_pass()
    assert lead.cloud.mutating_calls() == calls  # the fence refused the intent: no call
    assert len(lead.store.launches()) == intents
    assert any("not the leader" in r and OTHER in r for r in lead.reports), lead.reports
    assert not lead.controller.lead.leads(REGION)  # it asked its keeper at once
    assert lead.controller.led == frozenset()

    lead.reports.clear()
    lead.one_pass()  # a standby now: it plans, and no longer even tries to launch
    assert lead.cloud.mutating_calls() == calls
    assert not any("not the leader" in r for r in lead.reports), lead.reports
    assert sum(u.units for u in lead.store.plans()["web"].pools) == 4
    assert lead.leader_metric() == 'scoctl_leader{region="region-a"} 0'


def test_a_controller_that_comes_to_lead_acquires_at_once(lead: Lead) -> None:
    with connect(lead.pg.url, password_file=lead.pg.password_file) as db:
        leases.take(db, REGION, OTHER, None, 60)  # another host leads
        lead.demand(2)
        lead.one_pass()
        assert lead.controller.led == frozenset()
        assert lead.cloud.mutating_calls() == 0  # planned, not launched
        assert sum(u.units for u in lead.store.plans()["web"].pools) == 2
        assert not lead.controller.schedule.act  # nothing owed: the demand is planned
        assert leases.give_up(db, REGION, OTHER, 1)  # it stops cleanly

    lead.controller.follow_lead(now=True)  # the keeper's next look takes the free region
    assert lead.controller.led == {REGION}
    lead.controller._pass()  # only what is due: the take-over's plan and acquire
    assert len(lead.cloud.launch_calls()) >= 1
    assert sum(launch.count for launch in lead.store.launches()) == 2


def test_a_plan_another_runner_committed_is_acquired_by_the_leader(lead: Lead) -> None:
    """A standby (or a leader deposed since) plans too (design: Runners: any host may plan), so the
    plan of new demand may be committed by another runner: no claim then looks behind to the
    leader, and its next intake must still acquire what that plan adds."""
    from dataclasses import replace

    from scoctl.stages.plan import run_plan

    lead.demand(2)
    lead.one_pass()
    assert len(lead.cloud.launch_calls()) == 1
    lead.demand(4)
    other = run_plan(lead.controller.config, lead.store, SystemClock())  # another runner
    assert sum(u.units for u in lead.store.plans()["web"].pools) == 4 and other.changed
    lead.controller.follow_lead()
    now = lead.controller.clock.monotonic()
    lead.controller.schedule = replace(lead.controller.schedule, next_poll=now)  # an intake
    assert decide.next_step(lead.controller.schedule, lead.controller.timers, now).step == \
        "intake"
    lead.controller._pass()
    assert sum(r.max_count for r in lead.cloud.launch_calls()) == 4  # 2, then the other 2
