"""Reconcile with Slurm CLOUD nodes: a failed launch puts the node back to powered-down
(``POWER_DOWN_FORCE``, never DOWN) through the scheduler and drops it from its claim — from
reconcile's own failure paths, not only from ResumeFailProgram. A second pass changes nothing.

Nova is the in-package `FakeCloud` and Slurm a recording fake of scoctl's own `BatchScheduler`
Protocol (design: Testing); the real-Slurm side of `update_node` is covered by the adapter tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.batch import SchedulerFailed
from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import Config
from scoctl.core.model import (
    InstanceRecord,
    LaunchRecord,
    LaunchRequest,
    NodeRelease,
    SlurmJob,
    SlurmNode,
)
from scoctl.core.quantity import parse_resources
from scoctl.runner.compose import reconcile_and_release
from scoctl.services.claims import record_claim
from scoctl.stages.reconcile import ReconcileResult, run_reconcile
from scoctl.state import Store
from tests.stages.test_acquire import make_config

NODE = "cloud-1"


class RecordingSlurm:
    """Slurm's CLOUD node `NODE` (powering up) plus every `update_node` and
    `set_node_address` call (`refuse` makes the latter fail)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, str]] = []
        self.addresses: list[tuple[str, str, str]] = []
        self.refuse: SchedulerFailed | None = None
        self.flags = frozenset({"CLOUD", "POWERING_UP"})

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        return [SlurmNode(name=NODE, cpus=1, memory_mb=2000, partitions=("cloud",),
                          state="idle", flags=self.flags)]

    def default_partition(self) -> str | None:
        return None

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        return []

    def job(self, job_id: int) -> SlurmJob | None:
        return None

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        self.updates.append((name, state))
        if state == "POWER_DOWN_FORCE":
            self.flags = frozenset({"CLOUD", "POWERED_DOWN"})

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        if self.refuse is not None:
            raise self.refuse
        self.addresses.append((name, address, hostname))


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


@pytest.fixture
def fake() -> Iterator[FakeCloud]:
    cloud = FakeCloud()
    yield cloud
    cloud.reset()


def reconcile(config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
              slurm: RecordingSlurm) -> ReconcileResult:
    """`scoctl reconcile`: the stage, then its powered-down nodes leave their claims."""
    return reconcile_and_release(config, store, clock, clouds={"region-a": fake},
                                 scheduler=slurm, discover=False)


def claim_node(store: Store) -> None:
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "1"}),
                    largest_pod=parse_resources({"cpu": "1"}), pods=1, source="slurm",
                    nodes=[NODE])


def claimed(store: Store) -> tuple[str, ...]:
    claim = store.claim("hpc")
    return claim.nodes if claim else ()


def test_a_launch_intent_that_never_got_a_server_powers_its_node_down(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    claim_node(store)
    store.add_launch(LaunchRecord(
        launch_id="l-00000000000a", region="region-a", workload="hpc", pool="small.a",
        generation=1, count=1, status="intent", created=rfc3339(clock.now()),
        updated=rfc3339(clock.now()), node_names=(NODE,)))
    slurm = RecordingSlurm()

    young = reconcile(config, store, clock, fake, slurm)
    assert slurm.updates == [] and not young.changed
    clock.advance(config.timeouts.launch + 1)
    timed_out = reconcile(config, store, clock, fake, slurm)

    assert slurm.updates == [(NODE, "POWER_DOWN_FORCE")]  # never DOWN
    assert [launch.status for launch in store.launches()] == ["failed"]
    assert claimed(store) == ()
    assert timed_out.errors == () and fake.mutating_calls() == 0
    again = reconcile(config, store, clock, fake, slurm)
    assert not again.changed and slurm.updates == [(NODE, "POWER_DOWN_FORCE")]


def test_a_slurm_server_that_goes_error_is_deleted_and_its_node_powered_down_once(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    claim_node(store)
    fake.no_valid_host(flavor="m1.small")
    [server] = fake.launch(LaunchRequest(
        name=NODE, flavor="m1.small", image="img-a", min_count=1, max_count=1,
        tags=("sco:managed", "sco:workload=hpc", "sco:pool=small.a", "sco:gen=1",
              "sco:launch=l-00000000000b"))).servers
    store.upsert_instance(InstanceRecord(
        id=server.id, name=NODE, region="region-a", workload="hpc", pool="small.a",
        generation=1, launch_id="l-00000000000b", status="building", created=store.now(),
        updated=store.now(), node_name=NODE))
    slurm = RecordingSlurm()

    result = reconcile(config, store, clock, fake, slurm)

    assert slurm.updates == [(NODE, "POWER_DOWN_FORCE")]
    assert fake.servers() == [] and result.regions[0].deleted == (NODE,)
    assert [e.pool for e in store.exclusions()] == ["small.a"]
    assert store.exclusions()[0].until == rfc3339(clock.now() + timedelta(seconds=180))
    assert claimed(store) == ()
    again = reconcile(config, store, clock, fake, slurm)
    assert not again.changed and slurm.updates == [(NODE, "POWER_DOWN_FORCE")]


def idle_slurm_unit(store: Store, clock: FixedClock, fake: FakeCloud, config: Config) -> str:
    """A ready unit of NODE, idle past the idle timeout, that no plan wants any more."""
    [server] = fake.launch(LaunchRequest(
        name=NODE, flavor="m1.small", image="img-a", min_count=1, max_count=1,
        tags=("sco:managed", "sco:workload=hpc", "sco:pool=small.a", "sco:gen=1",
              "sco:launch=l-00000000000c"))).servers
    long_ago = rfc3339(clock.now() - timedelta(seconds=config.timeouts.idle + 60))
    store.upsert_instance(InstanceRecord(
        id=server.id, name=NODE, region="region-a", workload="hpc", pool="small.a",
        generation=1, launch_id="l-00000000000c", status="ready", created=long_ago,
        updated=long_ago, active_at=long_ago, ready_at=long_ago, idle_since=long_ago,
        node_name=NODE))
    return server.id


@pytest.mark.parametrize(("flags", "powered_down_by_scoctl"), [
    (frozenset({"CLOUD"}), True),  # up and idle: scoctl powers it down, then deletes
    (frozenset({"CLOUD", "POWERED_DOWN"}), False),  # power saving did: only the delete
])
def test_an_idle_slurm_unit_the_plan_no_longer_needs_is_scaled_down(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
    flags: frozenset[str], powered_down_by_scoctl: bool,
) -> None:
    server_id = idle_slurm_unit(store, clock, fake, config)
    slurm = RecordingSlurm()
    slurm.flags = flags

    result = reconcile(config, store, clock, fake, slurm)

    assert result.regions[0].scaled_down == (NODE,)
    assert slurm.updates == ([(NODE, "POWER_DOWN_FORCE")] if powered_down_by_scoctl else [])
    assert fake.servers() == []
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "deleted"
    assert not reconcile(config, store, clock, fake, slurm).changed


def test_the_reconcile_stage_alone_powers_the_node_down_and_returns_it_for_its_claim(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    idle_slurm_unit(store, clock, fake, config)
    claim_node(store)
    slurm = RecordingSlurm()
    slurm.flags = frozenset({"CLOUD"})

    result = run_reconcile(config, store, clock, clouds={"region-a": fake}, scheduler=slurm,
                           discover=False)

    assert slurm.updates == [(NODE, "POWER_DOWN_FORCE")]
    assert result.released == (NodeRelease(NODE, "scale-down"),)
    assert claimed(store) == (NODE,)  # the Slurm power stage drops it, not reconcile


def building_slurm_unit(store: Store, fake: FakeCloud) -> str:
    """A server launched for NODE on a network, recorded as building."""
    [server] = fake.launch(LaunchRequest(
        name="sco-hpc-small-a", flavor="m1.small", image="img-a", networks=("private",),
        tags=("sco:managed", "sco:workload=hpc", "sco:pool=small.a", "sco:gen=1",
              "sco:launch=l-00000000000d"))).servers
    store.upsert_instance(InstanceRecord(
        id=server.id, name=server.name, region="region-a", workload="hpc", pool="small.a",
        generation=1, launch_id="l-00000000000d", status="building", created=store.now(),
        updated=store.now(), node_name=NODE))
    return server.id


def test_a_slurm_server_turning_active_gives_its_node_the_servers_address_until_it_is_up(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    server_id = building_slurm_unit(store, fake)
    slurm = RecordingSlurm()

    result = reconcile(config, store, clock, fake, slurm)

    server = fake.server(server_id)
    assert server is not None and server.address is not None
    assert slurm.addresses == [(NODE, server.address, "sco-hpc-small-a")]
    assert result.errors == () and slurm.updates == []
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "active"
    again = reconcile(config, store, clock, fake, slurm)  # still booting: told again
    assert not again.changed and slurm.addresses == [(NODE, server.address,
                                                      "sco-hpc-small-a")] * 2


def test_a_node_address_slurm_refuses_is_a_slurm_problem_and_the_unit_goes_on(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    server_id = building_slurm_unit(store, fake)
    slurm = RecordingSlurm()
    slurm.refuse = SchedulerFailed("scontrol exited 1: Invalid node name specified")

    result = reconcile(config, store, clock, fake, slurm)

    [problem] = result.problems
    assert problem.api == "slurm" and problem.region == "region-a"
    assert NODE in problem.what and "Invalid node name" in problem.error
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "active"


def test_a_node_address_slurm_refused_is_given_again_on_the_next_pass(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    """Issue 28 item 13: a failed ``scontrol update nodeaddr`` is not final."""
    server_id = building_slurm_unit(store, fake)
    slurm = RecordingSlurm()
    slurm.refuse = SchedulerFailed("scontrol exited 1: slurmctld not responding")
    assert reconcile(config, store, clock, fake, slurm).problems
    slurm.refuse = None
    again = reconcile(config, store, clock, fake, slurm)
    server = fake.server(server_id)
    assert server is not None and again.problems == ()
    assert slurm.addresses == [(NODE, server.address, "sco-hpc-small-a")]
    slurm.flags = frozenset({"CLOUD"})  # registered (up): no more updates
    reconcile(config, store, clock, fake, slurm)
    assert len(slurm.addresses) == 1


def test_a_server_acquire_recorded_active_still_gets_its_nodes_address(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    """Issue 28 item 13: acquire records a server that is ACTIVE at once as active, so no
    BUILD → ACTIVE transition is left for reconcile to see; the address comes all the same."""
    server_id = building_slurm_unit(store, fake)
    inst = store.instance(server_id)
    assert inst is not None
    store.upsert_instance(replace(inst, status="active", active_at=store.now()))
    slurm = RecordingSlurm()
    reconcile(config, store, clock, fake, slurm)
    server = fake.server(server_id)
    assert server is not None
    assert slurm.addresses == [(NODE, server.address, "sco-hpc-small-a")]


class BusySlurm(RecordingSlurm):
    """NODE up and running a job (``allocated``) until `finish`; a DRAIN update sets the
    node's DRAIN flag (its job runs on; Slurm starts no new one there), as scontrol's
    ``update nodename=... state=DRAIN`` does."""

    def __init__(self) -> None:
        super().__init__()
        self.flags = frozenset({"CLOUD"})
        self.state = "allocated"

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        return [replace(node, state=self.state) for node in super().nodes(partition)]

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        super().update_node(name, state=state, reason=reason)
        if state == "DRAIN":
            self.flags = self.flags | {"DRAIN"}

    def finish(self) -> None:
        self.state = "idle"


def test_a_busy_slurm_unit_the_plan_no_longer_holds_is_drained_then_deleted_once_idle(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    """Slurm consolidation (design: Disruption, `underutilized`): a unit running a job that the plan
    no longer holds is DRAINed (its job ends in place, never killed), stays in flight while
    the job runs, and is powered down and deleted on the first pass after the node is idle."""
    server_id = idle_slurm_unit(store, clock, fake, config)
    inst = store.instance(server_id)
    assert inst is not None
    store.upsert_instance(replace(inst, idle_since=None))  # a job runs on it
    slurm = BusySlurm()

    first = reconcile(config, store, clock, fake, slurm)

    assert slurm.updates == [(NODE, "DRAIN")]
    assert first.regions[0].scaled_down == () and len(fake.servers()) == 1
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "draining" and inst.disruption == "underutilized"
    [started] = [e for e in store.events() if e.token == "DISRUPTION_STARTED"]
    assert started.detail["reason"] == "underutilized" and started.detail["server"] == server_id

    clock.advance(60)
    reconcile(config, store, clock, fake, slurm)  # the job still runs: drained already, it waits
    assert slurm.updates == [(NODE, "DRAIN")] and len(fake.servers()) == 1
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "draining"

    slurm.finish()
    clock.advance(60)
    done = reconcile(config, store, clock, fake, slurm)

    assert done.regions[0].scaled_down == (NODE,)
    assert slurm.updates == [(NODE, "DRAIN"), (NODE, "POWER_DOWN_FORCE")]
    assert fake.servers() == []
    inst = store.instance(server_id)
    assert inst is not None and inst.status == "deleted"
    assert not reconcile(config, store, clock, fake, slurm).changed
