"""`BUFFER_SHORT` (design: Buffers): a buffer still unmet a launch timeout after its claim was
written is reported once per claim write; a held one is not. Real temporary SQLite."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.clock import FixedClock
from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import InstanceRecord
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.timefmt import rfc3339
from scoctl.services.buffers import buffers_now, record_short
from scoctl.services.claims import record_claim
from scoctl.state import Store, open_store
from tests.builders import BOOTSTRAP

GI = 2**30
CONFIG = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 8, ram: 32Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 9}]
ranking: {id: rk, scores: {p1: 1.0}}
workloads: [{name: web}]
timeouts: {launch: 5m}
buffers: [{workload: web, replicas: 3}]
"""


@pytest.fixture
def config() -> Config:
    return parse_config(load_located(CONFIG + BOOTSTRAP, "c.yaml"), path=None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    store = open_store(tmp_path / "state.db", clock=FixedClock(), create=True)
    yield store
    store.close()


def unit(store: Store, n: int, status: InstanceStatus = InstanceStatus.READY) -> None:
    now = rfc3339(store.clock.now())
    store.upsert_instance(InstanceRecord(f"i-{n}", f"sco-web-{n}", "r1", "web", "p1", 1, "l-1",
                                         status, now, now))


def shorts(store: Store) -> list[dict[str, object]]:
    return [dict(e.detail) for e in store.events(workload="web") if e.token == "BUFFER_SHORT"]


def test_an_unmet_buffer_is_reported_once_after_the_launch_timeout(config: Config,
                                                                    store: Store) -> None:
    clock = store.clock
    assert isinstance(clock, FixedClock)
    # 1 pod of 4 vCPU / 16 GiB and the buffer's 3 chunks: one 8 vCPU unit holds the pod and 1
    record_claim(store, "web", contract="T1", requests={"cpu": 16000, "memory": 64 * GI},
                 largest_pod={"cpu": 4000, "memory": 16 * GI}, pods=1, source="k8s")
    unit(store, 1)
    (state,) = buffers_now(config, store.claims(), store.instances(), clock.now())
    assert (state.desired, state.held, state.short) == (3, 1, True)
    assert record_short(config, store, clock.now()) == 0  # capacity may still be on its way
    clock.advance(301)
    assert record_short(config, store, clock.now()) == 1
    assert shorts(store) == [{"desired": 3, "held": 1, "claim_version": 1}]
    clock.advance(60)
    assert record_short(config, store, clock.now()) == 0  # once per claim write
    # the units arrive: held, nothing more to report, even after a new claim write
    unit(store, 2)
    unit(store, 3, InstanceStatus.BUILDING)  # not Ready: holds nothing yet
    (state,) = buffers_now(config, store.claims(), store.instances(), clock.now())
    assert (state.desired, state.held, state.short) == (3, 3, False)
    record_claim(store, "web", contract="T1", requests={"cpu": 16000, "memory": 64 * GI},
                 largest_pod={"cpu": 4000, "memory": 16 * GI}, pods=1, source="k8s",
                 tolerates_reclaimable=False)
    clock.advance(timedelta(minutes=10).total_seconds())
    assert record_short(config, store, clock.now()) == 0
    assert len(shorts(store)) == 1


@pytest.mark.parametrize(("tier", "held"), [("any", 3), ("committed", 3), ("reclaimable", 0)])
def test_a_tiered_buffer_is_held_only_by_units_of_its_tier(store: Store, tier: str,
                                                           held: int) -> None:
    # design: Buffers: p1 is committed, so its Ready units hold a committed (or any) buffer alone
    config = parse_config(load_located(CONFIG.replace(
        "replicas: 3}", f"replicas: 3, tier: {tier}}}") + BOOTSTRAP, "c.yaml"), path=None)
    record_claim(store, "web", contract="T1", requests={"cpu": 16000, "memory": 64 * GI},
                 largest_pod={"cpu": 4000, "memory": 16 * GI}, pods=1, source="k8s")
    for n in (1, 2):
        unit(store, n)  # 16 vCPU: the pod and 3 chunks
    (state,) = buffers_now(config, store.claims(), store.instances(), store.clock.now())
    assert (state.desired, state.held, state.short) == (3, held, held < 3)
