"""An operator's pause (`scoctl pause`): kept in the state, so every runner obeys it. Under a
pause of disruptions no voluntary disruption starts (the candidates are reported, held), and
once it ends, by `resume` or by its own time, they start as the budgets say. Under a pause of
launches acquire creates nothing. The real openstacksdk against the Nova emulator, the real
`kubernetes` client against the Kubernetes emulator, on both state backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from scoctl.core.model import ServerInfo
from scoctl.core.model.vocabulary import PauseScope
from scoctl.services import controls
from scoctl.stages.acquire import run_acquire
from tests.stages.test_reconcile import World, emulator_cloud, world  # noqa: F401

pytestmark = pytest.mark.k8s


def idle_surplus(at: World, units: int = 2) -> list[ServerInfo]:
    """`units` Ready, idle units of web; the plan keeps one; all idle past the timeout."""
    servers = at.launch(units)
    at.settle()
    for server in servers:
        at.register(server)
    at.plan({"tiny.spot": units})
    at.reconcile()
    at.plan({"tiny.spot": 1})
    at.clock.advance(700)
    return servers


def test_no_disruption_starts_while_paused_and_the_held_ones_start_after_resume(
    world: World,  # noqa: F811 - the fixture
) -> None:
    idle_surplus(world)
    controls.pause(world.store, [PauseScope.DISRUPTIONS], now=world.clock.now(), until=None,
                   reason="INC-1: storage", author="op@host")
    held = world.reconcile().regions[0]
    assert held.scaled_down == ()
    assert [(d.workload, d.reason) for d in held.decision.paused] == [("web", "empty")]
    assert "DISRUPTION_STARTED" not in world.tokens()
    assert [e.detail["scope"] for e in world.store.events() if e.token == "PAUSED"] == [
        "disruptions"]
    controls.resume(world.store, [PauseScope.DISRUPTIONS], author="op@host")
    freed = world.reconcile().regions[0]
    assert len(freed.scaled_down) == 1 and freed.decision.paused == ()
    assert world.tokens().count("DISRUPTION_STARTED") == 1
    assert [e.detail["scope"] for e in world.store.events() if e.token == "RESUMED"] == [
        "disruptions"]


def test_a_pause_for_a_while_ends_by_itself_with_an_event(
    world: World,  # noqa: F811 - the fixture
) -> None:
    idle_surplus(world)
    controls.pause(world.store, [PauseScope.DISRUPTIONS], now=world.clock.now(),
                   until=world.clock.now() + timedelta(minutes=2), reason="change window",
                   author="op@host")
    world.clock.advance(119)
    assert world.reconcile().regions[0].scaled_down == ()
    world.clock.advance(2)
    assert len(world.reconcile().regions[0].scaled_down) == 1
    [ended] = [e for e in world.store.events() if e.token == "RESUMED"]
    assert ended.detail["lapsed"] is True
    assert world.store.pauses() == []


def test_a_dry_run_reports_the_held_disruptions_and_writes_nothing(
    world: World,  # noqa: F811 - the fixture
) -> None:
    idle_surplus(world)
    controls.pause(world.store, [PauseScope.DISRUPTIONS], now=world.clock.now(),
                   until=world.clock.now() + timedelta(seconds=1), reason="soon over",
                   author="op@host")
    world.clock.advance(5)  # lapsed: a dry-run neither holds on to it nor drops it
    dry = world.reconcile(dry_run=True).regions[0]
    assert dry.decision.paused == () and len(dry.decision.scale_downs) == 1
    assert [p.scope for p in world.store.pauses()] == [PauseScope.DISRUPTIONS]


def test_a_pause_of_launches_creates_nothing_and_says_why(
    world: World,  # noqa: F811 - the fixture
) -> None:
    world.plan({"tiny.spot": 2})
    controls.pause(world.store, [PauseScope.LAUNCHES], now=world.clock.now(), until=None,
                   reason="Nova upgrade", author="op@host")
    before = len(world.cloud.servers())
    result = run_acquire(world.config, world.store, world.clock,
                         connect=lambda *_: world.cloud, watch=0)
    assert result.paused.startswith("launches paused until `scoctl resume` (Nova upgrade")
    assert result.launched == 0 and len(result.planned) == 1
    assert len(world.cloud.servers()) == before
    assert world.store.launches() == []
    controls.resume(world.store, [PauseScope.LAUNCHES], author="op@host")
    after = run_acquire(world.config, world.store, world.clock,
                        connect=lambda *_: world.cloud, watch=0)
    assert after.paused == "" and after.launched == 2


def test_explain_names_the_budget_that_allows_or_blocks_each_disruption(
    world: World,  # noqa: F811 - the fixture
) -> None:
    from scoctl.cli.reconcile import disruptions_json

    servers = idle_surplus(world, 3)
    decision = world.reconcile(dry_run=True).regions[0].decision
    rows = [(x["verdict"], x["reason"], x["budget"], x["limit"], x["allowed"])
            for x in disruptions_json(decision)]
    default = {"units": "10%", "reasons": []}  # 10% of 3 units, rounded up: one at a time
    assert rows == [("start", "empty", 0, default, 1), ("blocked", "empty", 0, default, 0)]
    assert {x["name"] for x in disruptions_json(decision)} < {s.name for s in servers}
