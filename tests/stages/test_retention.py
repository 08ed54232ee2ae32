"""Retention: the config's `retention`, and the pruning the normal passes do (the reconcile
composition that `scoctl reconcile` and every `scoctl run` pass run) in bounded batches."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import Config, Retention
from scoctl.core.model import InstanceRecord, LaunchRecord, NewEvent
from scoctl.errors import ConfigError
from scoctl.runner.compose import reconcile_and_release
from scoctl.stages.reconcile import ReconcileResult
from scoctl.state import Store, open_store
from tests.stages.test_reconcile import REGION, make_config

DAY = 86400.0


def reconcile(config: Config, store: Store, clock: FixedClock,
              dry_run: bool = False) -> ReconcileResult:
    return reconcile_and_release(config, store, clock, clouds={REGION: FakeCloud()},
                                 discover=False, dry_run=dry_run)


def days_ago(clock: FixedClock, days: float) -> str:
    return rfc3339(clock.now() - timedelta(days=days))


def test_retention_defaults_and_limits_are_read_from_the_config(tmp_path: Path) -> None:
    assert make_config(tmp_path).retention == Retention(events=30 * DAY, instances=7 * DAY,
                                                        launches=7 * DAY)
    kept = make_config(tmp_path, retention="{events: 90d, instances: 12h, launches: 1d}")
    assert kept.retention == Retention(events=90 * DAY, instances=DAY / 2, launches=DAY)
    with pytest.raises(ConfigError, match=r"retention\.events: must be at least 1d"):
        make_config(tmp_path, retention="{events: 12h}")
    # past the retention bound (36500d) but within what any duration may be (100 years)
    with pytest.raises(ConfigError, match=r"retention\.launches: must be at most 36500d"):
        make_config(tmp_path, retention="{launches: 36510d}")
    with pytest.raises(ConfigError, match=r"retention\.instances"):
        make_config(tmp_path, retention="{instances: -1}")
    with pytest.raises(ConfigError, match="keep"):
        make_config(tmp_path, retention="{keep: 1d}")


def test_reconcile_prunes_old_rows_a_batch_at_a_time_and_keeps_everything_recent(
        tmp_path: Path) -> None:
    clock = FixedClock()
    config = make_config(tmp_path)
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        with store.transaction():
            for i in range(1500):
                store.append_event(NewEvent("web", "OLD", "info", {"i": i},
                                            ts=days_ago(clock, 31 + i / 1000)))
            store.append_event(NewEvent("web", "RECENT", "info", {}, ts=days_ago(clock, 29)))
            for i in range(42):  # a soak's worth of servers long gone, one still fresh
                store.upsert_instance(InstanceRecord(
                    id=f"gone-{i}", name=f"gone-{i}", region=REGION, workload="web",
                    pool="tiny.spot", generation=1, launch_id=f"l-{i:012d}", status="deleted",
                    created=days_ago(clock, 9), updated=days_ago(clock, 8)))
                store.add_launch(LaunchRecord(
                    launch_id=f"l-{i:012d}", region=REGION, workload="web", pool="tiny.spot",
                    generation=1, count=1, status="recorded", created=days_ago(clock, 9),
                    updated=days_ago(clock, 9)))
            store.upsert_instance(InstanceRecord(
                id="gone-new", name="gone-new", region=REGION, workload="web",
                pool="tiny.spot", generation=1, launch_id=None, status="deleted",
                created=days_ago(clock, 2), updated=days_ago(clock, 1)))

        assert reconcile(config, store, clock, dry_run=True).pruned == {}
        assert store.counts()["events"] == 1501

        first = reconcile(config, store, clock)
        assert first.pruned == {"events": 1000, "instances": 42, "launches": 42}
        second = reconcile(config, store, clock)
        assert second.pruned == {"events": 500}
        assert reconcile(config, store, clock).pruned == {}

        assert [e.token for e in store.events()] == ["RECENT"]
        assert [i.id for i in store.instances(include_deleted=True)] == ["gone-new"]
        assert store.launches() == []
