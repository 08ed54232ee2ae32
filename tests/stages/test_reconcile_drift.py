"""Reconcile with drift (design: Drift) through the stage: the current spec comes from the config
(`services.drift.view`, the rule acquire records with), a drifted Slurm CLOUD node is drained
with reason ``sco: drifted`` while it runs jobs and powered down once idle, a second pass
changes nothing more; a unit on the current spec is left alone.

Nova is the in-package `FakeCloud`, Slurm a recording fake of scoctl's `BatchScheduler`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock
from scoctl.config.schema import Config
from scoctl.core.model import InstanceRecord, LaunchRequest, SlurmJob, SlurmNode
from scoctl.core.spec import hash_of
from scoctl.services.drift import specs_of
from scoctl.stages.reconcile import run_reconcile
from scoctl.state import Store
from tests.stages.test_acquire import make_config, set_plan

NODE = "cloud-1"


class Slurm:
    """CLOUD node `NODE`, running a job until `idle` is set; records `update_node` calls."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, str, str | None]] = []
        self.state = "allocated"
        self.flags = frozenset({"CLOUD"})

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        return [SlurmNode(name=NODE, cpus=1, memory_mb=2000, partitions=("cloud",),
                          state=self.state, flags=self.flags)]

    def default_partition(self) -> str | None:
        return None

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        return []

    def job(self, job_id: int) -> SlurmJob | None:
        return None

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        self.updates.append((name, state, reason))
        if state == "DRAIN":
            self.flags |= {"DRAIN"}
        if state.startswith("POWER_DOWN"):
            self.flags = frozenset({"CLOUD", "POWERED_DOWN"})

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        pass


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


@pytest.fixture
def fake() -> Iterator[FakeCloud]:
    cloud = FakeCloud()
    yield cloud
    cloud.reset()


def slurm_unit(store: Store, fake: FakeCloud, spec_hash: str) -> str:
    [server] = fake.launch(LaunchRequest(
        name=NODE, flavor="m1.small", image="img-a", min_count=1, max_count=1,
        tags=("sco:managed", "sco:workload=hpc", "sco:pool=small.a", "sco:gen=1",
              "sco:launch=l-00000000000c"))).servers
    store.upsert_instance(InstanceRecord(
        id=server.id, name=NODE, region="region-a", workload="hpc", pool="small.a",
        generation=1, launch_id="l-00000000000c", status="ready", created=store.now(),
        updated=store.now(), node_name=NODE, ready_at=store.now(), spec_hash=spec_hash))
    set_plan(store, "hpc", {"small.a": 1})
    return server.id


def current(config: Config) -> str:
    [spec] = specs_of(config, config.regions[0], config.user_data_template(),
                      [("hpc", "small.a")]).values()
    return hash_of(spec)


def test_a_drifted_slurm_node_is_drained_then_powered_down_once_idle(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    sid = slurm_unit(store, fake, "0123456789ab")
    slurm = Slurm()
    run = lambda: run_reconcile(config, store, clock, clouds={"region-a": fake},  # noqa: E731
                                scheduler=slurm, discover=False)
    run()
    [drifted] = [e for e in store.events() if e.token == "UNIT_DRIFTED"]
    assert drifted.detail["server"] == sid and drifted.detail["spec"] == "0123456789ab"
    inst = store.instance(sid)
    assert inst is not None and (inst.status, inst.disruption) == ("draining", "drifted")
    assert slurm.updates == [(NODE, "DRAIN", "sco: drifted")]  # its job runs on
    assert fake.server(sid) is not None
    clock.advance(30)
    run()
    assert slurm.updates == [(NODE, "DRAIN", "sco: drifted")]  # drained once
    assert [e.token for e in store.events()].count("UNIT_DRIFTED") == 1
    slurm.state = "idle"  # the job ended
    clock.advance(30)
    run()
    assert [u[:2] for u in slurm.updates[1:]] == [(NODE, "POWER_DOWN_FORCE")]
    gone = store.instance(sid)
    assert gone is not None and gone.status in ("deleting", "deleted")
    assert fake.server(sid) is None or fake.server(sid).status == "DELETED"


def test_a_unit_on_the_current_spec_is_left_alone(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    sid = slurm_unit(store, fake, current(config))
    slurm = Slurm()
    run_reconcile(config, store, clock, clouds={"region-a": fake}, scheduler=slurm,
                  discover=False)
    assert slurm.updates == [] and "UNIT_DRIFTED" not in [e.token for e in store.events()]
    inst = store.instance(sid)
    assert inst is not None and (inst.status, inst.disruption) == ("ready", None)


def test_acquire_records_the_hash_reconcile_compares_against(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    # one rule (`core.spec.pool_spec`) for both: what acquire launched is never drift
    from tests.stages.test_acquire import acquire

    set_plan(store, "web", {"small.a": 2, "res.a": 1})
    acquire(config, store, clock, fake)
    specs = specs_of(config, config.regions[0], config.user_data_template(),
                     [("web", "small.a"), ("web", "res.a")])
    assert {i.pool: i.spec_hash for i in store.instances()} == {
        pool: hash_of(spec) for (_, pool), spec in specs.items()}
    # web is exclusive (the default isolation): its own taint, beside the reclaimable one
    assert specs[("web", "small.a")].taints == ("reclaimable=true:NoSchedule",
                                                "sco/workload=web:NoSchedule")
    assert specs[("web", "res.a")].taints == ("sco/workload=web:NoSchedule",)


def test_an_image_uploaded_again_under_its_name_drifts_the_units_named_by_field(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    # design: Drift: the image is hashed by the id its name resolved to at launch; the recorded
    # spec (state, not process memory) names the changed field in a process that never saw it
    from scoctl.services import drift as drift_inputs
    from scoctl.services.drift import progress
    from tests.stages.test_acquire import acquire

    assert config.regions[0].launch is not None
    name = config.regions[0].launch.image
    fake.images[name] = "7d3c0d4e-0000-4000-8000-000000000001"
    set_plan(store, "web", {"small.a": 2})
    acquire(config, store, clock, fake)
    assert {r.image for r in fake.launch_calls()} == {"7d3c0d4e-0000-4000-8000-000000000001"}
    units = {i.id: i for i in store.instances()}
    for inst in units.values():  # registered and Ready
        store.upsert_instance(replace(inst, status="ready", ready_at=store.now(),
                                      node_name=inst.name))
    run = lambda: run_reconcile(config, store, clock, clouds={"region-a": fake},  # noqa: E731
                                discover=False)
    run()
    assert "UNIT_DRIFTED" not in [e.token for e in store.events()]
    assert progress(config, store, clock.now()) == []
    fake.images[name] = "7d3c0d4e-0000-4000-8000-000000000002"  # the monthly image, same name
    drift_inputs._SEEN.clear()  # a fresh process: only the state knows the launched spec
    clock.advance(30)
    run()
    drifted = [e.detail for e in store.events() if e.token == "UNIT_DRIFTED"]
    assert sorted(str(d["server"]) for d in drifted) == sorted(units)
    assert all(d["fields"] == ["image"] for d in drifted)
    assert store.image_ids("region-a") == {name: "7d3c0d4e-0000-4000-8000-000000000002"}
    [row] = progress(config, store, clock.now())  # `status` compares with the recorded id
    assert row["workload"] == "web" and row["drifted"] == 2


def test_reverting_mid_rollout_keeps_the_replacements_as_ordinary_units(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    # design: Drift: reverting the config ends the rollout; replacements already launched are
    # ordinary units (not drifted back), and no old unit is removed for drift any more
    from tests.stages.test_acquire import acquire

    assert config.regions[0].launch is not None
    name = config.regions[0].launch.image
    old, new = "7d3c0d4e-0000-4000-8000-0000000000a1", "7d3c0d4e-0000-4000-8000-0000000000b2"
    fake.images[name] = old
    set_plan(store, "web", {"small.a": 3})
    acquire(config, store, clock, fake)
    for inst in store.instances():
        store.upsert_instance(replace(inst, status="ready", ready_at=store.now(),
                                      node_name=inst.name))
    olds = {i.id for i in store.instances()}
    run = lambda: run_reconcile(config, store, clock, clouds={"region-a": fake},  # noqa: E731
                                discover=False)
    fake.images[name] = new
    clock.advance(30)
    run()
    [spec] = specs_of(config, config.regions[0], config.user_data_template(),
                      [("web", "small.a")], new).values()
    drifted = [e.detail for e in store.events() if e.token == "UNIT_DRIFTED"]
    assert {d["server"] for d in drifted} == olds and {d["to"] for d in drifted} == {
        hash_of(spec)}
    assert [i.disruption for i in store.instances()].count("drifted") == 1  # the canary
    # the canary's replacement launched on the new image and turned Ready
    [server] = fake.launch(LaunchRequest(
        name="web-repl", flavor="m1.small", image=new, min_count=1, max_count=1,
        tags=("sco:managed", "sco:workload=web", "sco:pool=small.a", "sco:gen=2",
              "sco:launch=l-0000000000r1"))).servers
    store.upsert_instance(InstanceRecord(
        id=server.id, name="web-repl", region="region-a", workload="web", pool="small.a",
        generation=2, launch_id="l-0000000000r1", status="ready", created=store.now(),
        updated=store.now(), node_name="web-repl", ready_at=store.now(),
        spec_hash=hash_of(spec)))
    fake.images[name] = old  # the operator reverts
    clock.advance(30)
    run()
    clock.advance(30)
    run()
    tokens = [e.token for e in store.events()]
    assert tokens.count("UNIT_DRIFTED") == 3  # the replacement is not drifted back
    [ended] = [e.detail for e in store.events() if e.token == "DRIFT_ENDED"]
    assert ended["why"] == "reverted" and ended["server"] in olds
    units = {i.id: i for i in store.instances()}
    assert olds | {server.id} <= set(units)
    assert all(i.disruption is None and i.status == "ready" for i in units.values())


def test_an_image_the_region_lacks_halts_the_rollout_named_and_is_no_nova_outage(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud) -> None:
    # issue 49 item 1: Nova answered that it has no such image — a config problem of this
    # region (no outage, no back-off), the rollout onto it halted and named, no unit replaced
    from scoctl.errors import ConfigError
    from scoctl.services.drift import progress
    from tests.stages.test_acquire import acquire

    assert config.regions[0].launch is not None
    name = config.regions[0].launch.image
    fake.images[name] = "7d3c0d4e-0000-4000-8000-000000000001"
    set_plan(store, "web", {"small.a": 2})
    acquire(config, store, clock, fake)
    for inst in store.instances():  # registered and Ready
        store.upsert_instance(replace(inst, status="ready", ready_at=store.now(),
                                      node_name=inst.name))
    missing = ConfigError(f"image {name!r} not found in the cloud", field="image")
    fake.fail_next("image_id", missing, count=2)
    clock.advance(30)
    result = run_reconcile(config, store, clock, clouds={"region-a": fake}, discover=False)
    assert [p.api for p in result.problems] == ["config"], result.problems
    [halted] = [e.detail for e in store.events() if e.token == "DRIFT_ROLLOUT_HALTED"]
    assert halted["image"] == name and name in str(halted["why"])
    assert {(i.status, i.disruption) for i in store.instances()} == {("ready", None)}
    [row] = progress(config, store, clock.now())  # `status`: halted, not canary
    assert (row["workload"], row["phase"], row["halted"]) == ("web", "halted", True)
    clock.advance(30)
    run_reconcile(config, store, clock, clouds={"region-a": fake}, discover=False)
    assert [e.token for e in store.events()].count("DRIFT_ROLLOUT_HALTED") == 1  # once
    assert {(i.status, i.disruption) for i in store.instances()} == {("ready", None)}
