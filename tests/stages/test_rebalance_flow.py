"""Rebalance through the plan and reconcile stages (design: Rebalance), on both state backends.

Six reclaimable pools of one flavor, best score first. While four are excluded the plan holds
the two worst; once the exclusions lapse the stable re-plan keeps some of those units (design:
Planner invariant 5), and the fresh plan's mean key is better by more than `min_gain`: the trigger
is recorded with its since (`REBALANCE_PENDING`), carried between runs, planned once it held
for `stabilize` (`REBALANCE_PLANNED {trigger, moves, into}`, the oldest units of the worst
pools), and reconcile starts those moves as `rebalanced` disruptions (replaced first) within
the budget. A plan that matches its fresh plan records nothing.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock
from scoctl.config.schema import Config, load_config
from scoctl.core.model import FlavorInfo, InstanceRecord, LaunchRequest
from scoctl.core.timefmt import rfc3339
from scoctl.services.claims import record_claim
from scoctl.services.rebalance import planned_moves
from scoctl.stages.plan import run_plan
from scoctl.stages.reconcile import run_reconcile
from scoctl.state import Store

GI = 2**30
POOLS = [f"p{i}" for i in range(6)]


def write(tmp_path: Path, *, budget: int = 1) -> Config:
    pools = "\n".join(f"  - {{name: {p}, region: r1, az: az1, flavor: m4, group: g{i}, "
                      f"tier: reclaimable, depth: 10}}" for i, p in enumerate(POOLS))
    scores = ", ".join(f"{p}: {0.9 - 0.05 * i:.2f}" for i, p in enumerate(POOLS))
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        state: {tmp_path / "state.db"}
        regions:
          - name: r1
            launch: {{image: img, networks: [net]}}
        flavors:
          - {{name: m4, vcpus: 4, ram: 16Gi}}
        node_reserve: {{cpu: 0, memory: 0}}
        contracts:
          T1: {{floor: 0, pool_cap: 0.3, group_cap: 0.3, min_pools: 4}}
        disruption:
          budgets: [{{reasons: [rebalanced], units: {budget}}}, {{units: 100%}}]
          rebalance: {{stabilize: 10m, min_age: 1h, min_gain: 0.02}}
        """) + "pools:\n" + pools + "\nranking: {id: r-1, scores: {" + scores + "}}\n")
    return load_config(path)


def claim(store: Store) -> None:
    record_claim(store, "w", contract="T1", requests={"cpu": 40_000, "memory": 150 * GI},
                 largest_pod={"cpu": 2000, "memory": 6 * GI}, pods=20, source="k8s")


def hold(store: Store, fake: FakeCloud | None, units: dict[str, int]) -> list[str]:
    """Ready units of `w` per pool (servers in `fake` when given), created now."""
    made = []
    for pool, count in sorted(units.items()):
        for n in range(count):
            name = f"w-{pool}-{n}"
            sid = name
            if fake is not None:
                [server] = fake.launch(LaunchRequest(
                    name=name, flavor="m4", image="img", min_count=1, max_count=1,
                    tags=("sco:managed", "sco:workload=w", f"sco:pool={pool}", "sco:gen=1",
                          "sco:launch=l-00000000000a"))).servers
                sid = server.id
            store.upsert_instance(InstanceRecord(
                id=sid, name=name, region="r1", workload="w", pool=pool, generation=1,
                launch_id="l-00000000000a", status="ready", created=store.now(),
                updated=store.now(), node_name=name, ready_at=store.now()))
            made.append(sid)
    return made


def degrade(store: Store, clock: FixedClock, config: Config) -> dict[str, int]:
    """Plan `w` while p0-p3 are excluded for 10 minutes: the two worst pools."""
    until = rfc3339(clock.now() + timedelta(minutes=10))
    for pool in POOLS[:4]:
        store.exclude(pool, "RECLAIM_NOTICE", until)
    claim(store)
    plan = run_plan(config, store, clock).plans["w"]
    assert plan.degraded and set(plan.units()) == {"p4", "p5"}
    return plan.units()


def tokens(store: Store, prefix: str = "REBALANCE_") -> list[str]:
    return [e.token for e in store.events() if e.token.startswith(prefix)]


@pytest.fixture
def fake() -> Iterator[FakeCloud]:
    cloud = FakeCloud(flavor_list=(FlavorInfo(id="4", name="m4", vcpus=4, ram_mb=16384,
                                              disk_gb=40),))
    yield cloud
    cloud.reset()


def test_a_trigger_waits_out_stabilize_then_plans_the_moves_of_the_worst_pools(
        tmp_path: Path, store: Store, clock: FixedClock) -> None:
    config = write(tmp_path)
    hold(store, None, degrade(store, clock, config))
    clock.advance(2 * 3600)  # the exclusions lapse; the units are two hours old
    first = run_plan(config, store, clock)
    stable = first.plans["w"]
    assert not stable.degraded and {"p4", "p5"} & set(stable.units())  # kept (stable)
    [row] = store.rebalances().values()
    assert (row.workload, row.trigger, row.planned) == ("w", "gain", None)
    assert row.since == rfc3339(clock.now()) and tokens(store) == ["REBALANCE_PENDING"]
    assert planned_moves(store.rebalances()) == ()  # nothing moves yet

    clock.advance(300)  # half the stabilize window: still pending, since carried
    run_plan(config, store, clock)
    [row] = store.rebalances().values()
    assert row.planned is None and row.since == rfc3339(clock.now() - timedelta(seconds=300))
    assert store.latest_generation().generation == 2  # the re-check wrote no generation

    clock.advance(300)  # held for stabilize: planned
    decided = run_plan(config, store, clock).rebalances["w"]
    assert decided.planned
    [row] = store.rebalances().values()
    assert row.planned == rfc3339(clock.now())
    moved_pools = [m.pool for m in decided.moves]
    assert moved_pools[0] == "p5" and set(moved_pools) == {"p4", "p5"}  # worst pool first
    assert set(row.moves) == {m.server_id for m in decided.moves}
    assert planned_moves(store.rebalances()) == row.moves
    [planned] = [e for e in store.events() if e.token == "REBALANCE_PLANNED"]
    assert planned.detail["trigger"] == "gain"
    assert [m["server"] for m in planned.detail["moves"]] == list(row.moves)
    assert sum(planned.detail["into"].values()) == len(row.moves)
    assert set(planned.detail["into"]) <= {"p0", "p1", "p2", "p3"}

    run_plan(config, store, clock)  # the same moves again: no second event
    assert tokens(store).count("REBALANCE_PLANNED") == 1


def test_a_fleet_on_its_fresh_plan_records_no_rebalance(
        tmp_path: Path, store: Store, clock: FixedClock) -> None:
    config = write(tmp_path)
    claim(store)
    plan = run_plan(config, store, clock).plans["w"]
    hold(store, None, plan.units())
    clock.advance(2 * 3600)
    for _ in range(3):
        result = run_plan(config, store, clock, full=True)
        assert result.rebalances["w"].pending is None
        clock.advance(600)
    assert store.rebalances() == {} and tokens(store) == []


def test_a_trigger_that_stops_holding_drops_its_row(
        tmp_path: Path, store: Store, clock: FixedClock) -> None:
    config = write(tmp_path)
    hold(store, None, degrade(store, clock, config))
    clock.advance(2 * 3600)
    run_plan(config, store, clock)
    assert set(store.rebalances()) == {"w"}
    until = rfc3339(clock.now() + timedelta(minutes=30))  # p0-p3 reclaimed again
    for pool in POOLS[:4]:
        store.exclude(pool, "RECLAIM_NOTICE", until)
    clock.advance(60)
    run_plan(config, store, clock)
    assert store.rebalances() == {}  # the fresh plan is no better while they are excluded


def test_reconcile_starts_the_planned_moves_as_rebalanced_within_the_budget(
        tmp_path: Path, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    config = write(tmp_path, budget=1)
    hold(store, fake, degrade(store, clock, config))
    clock.advance(2 * 3600)
    run_plan(config, store, clock)
    clock.advance(600)
    decided = run_plan(config, store, clock).rebalances["w"]
    assert decided.planned and len(decided.moves) >= 2

    run_reconcile(config, store, clock, clouds={"r1": fake}, discover=False)
    started = [i for i in store.instances() if i.disruption == "rebalanced"]
    assert [i.id for i in started] == [decided.moves[0].server_id]  # one: the budget
    assert started[0].status == "ready"  # replaced first: it serves until then
    assert fake.server(started[0].id) is not None
    [event] = [e for e in store.events() if e.token == "DISRUPTION_STARTED"]
    assert event.detail["reason"] == "rebalanced"
    assert [e.detail["reason"] for e in store.events()
            if e.token == "DISRUPTION_BLOCKED"] == ["rebalanced"]
    assert "w" in store.dirty()  # re-planned without it: its replacement is launched
