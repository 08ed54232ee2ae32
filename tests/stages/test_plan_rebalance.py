"""`plan --explain` shows a pending rebalance (design: Rebalance): the stored plan against its fresh
plan, with the workload's ready units, over a real temporary state."""

from __future__ import annotations

from datetime import timedelta

from scoctl.clock import FixedClock
from scoctl.config.schema import load_config
from scoctl.core.model import InstanceRecord
from scoctl.core.model.vocabulary import InstanceStatus, RebalanceTrigger
from scoctl.core.timefmt import rfc3339
from scoctl.stages.plan import plan_view, run_plan
from tests.stages.test_plan import put, write_config

KNOBS = "disruption:\n  rebalance: {stabilize: 10m, min_age: 1h, min_gain: 0.01}\n"


def _ready(store, clock, units: dict[str, int]) -> list[str]:
    ids = []
    for pool, n in sorted(units.items()):
        for i in range(n):
            sid = f"srv-{pool}-{i}"
            store.upsert_instance(InstanceRecord(
                sid, f"alpha-{pool}-{i}", "r1", "alpha", pool, 1, None, InstanceStatus.READY,
                rfc3339(clock.now()), rfc3339(clock.now())))
            ids.append(sid)
    return ids


def test_explain_shows_the_rebalance_a_degraded_plan_waits_for(tmp_path, make_store) -> None:
    path = write_config(tmp_path)
    path.write_text(path.read_text() + KNOBS)
    config = load_config(path)
    clock = FixedClock()
    store = make_store(clock)
    put(store, "alpha", 64)
    until = rfc3339(clock.now() + timedelta(minutes=5))
    for pool in config.pools:
        if pool.name not in ("c16.g3.spot", "c16.g4.spot"):
            store.exclude(pool.name, "RECLAIM_NOTICED", until)
    degraded = run_plan(config, store, clock).records["alpha"]
    assert degraded.degraded
    ids = _ready(store, clock, {u.pool: u.units for u in degraded.pools})

    # while the pools are excluded the fresh plan is degraded too: nothing to rebalance
    view = plan_view(config, store, clock, explain="alpha", dry_run=True)
    assert view.rebalance is not None and view.rebalance.pending is None

    # the exclusions lapse; the units are old enough: the stored plan is still degraded
    clock.advance(2 * 3600)
    view = plan_view(config, store, clock, explain="alpha", dry_run=True)
    decided = view.rebalance
    assert decided is not None and decided.pending is not None
    # the stable re-plan trims the caps but keeps the worse pools' units: the fresh plan's
    # mean key is better (min_gain 0.01), so those units move, worst pool first
    assert decided.pending.trigger is RebalanceTrigger.GAIN
    assert decided.pending.since == clock.now() and not decided.planned  # stabilize: 10m
    assert [m.server_id for m in decided.pending.moves] == ["srv-c16.g4.spot-0",
                                                            "srv-c16.g3.spot-0"]
    assert set(ids) >= {m.server_id for m in decided.pending.moves}

    # with no stabilize window the moves are planned at once, into the fresh plan's pools
    path.write_text(path.read_text().replace("stabilize: 10m", "stabilize: 0s"))
    config = load_config(path)
    decided = plan_view(config, store, clock, explain="alpha", dry_run=True).rebalance
    assert decided is not None and decided.planned and len(decided.moves) == 2
    assert decided.into and sum(decided.into.values()) >= 1
    assert "c16.g4.spot" not in decided.into and "c16.g3.spot" not in decided.into
