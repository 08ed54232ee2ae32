"""The Slurm power stage: requests Slurm's power-saving programs spool (no state access) are
applied by the next pass — resumed nodes join their workload's claim, suspended and failed ones
leave it (a failed resume goes back to powered-down, never DOWN) — in the order Slurm made them.

Slurm is a recording fake of scoctl's own `BatchScheduler` Protocol (design: Testing); the hooks
themselves run as an unprivileged user against real slurmctld in
tests/adapters/test_slurm_hooks.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.adapters.batch import SchedulerUnreachable
from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock
from scoctl.config.schema import Config
from scoctl.core.model import InstanceRecord, SlurmJob, SlurmNode
from scoctl.core.slurm_power import RESUME, RESUME_FAIL, SUSPEND, PowerRequest, node_names
from scoctl.errors import UsageError
from scoctl.host.spool import pending_events, write_event
from scoctl.stages.slurm_power import apply_requests, spool_request
from scoctl.state import Store
from tests.builders import Systems, one_pass
from tests.stages.test_acquire import make_config


class Slurm:
    """Two CLOUD nodes of partition `cloud` (2 CPUs, 1000 MB) and every `update_node` and
    `set_node_address` call."""

    def __init__(self, *jobs: SlurmJob) -> None:
        self.listed = list(jobs)
        self.updates: list[tuple[str, str]] = []
        self.addresses: list[tuple[str, str, str]] = []
        self.down = False

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        if self.down:
            raise SchedulerUnreachable("slurmctld does not answer")
        return [SlurmNode(name=f"cloud-{i}", cpus=2, memory_mb=1000, partitions=("cloud",),
                          state="idle", flags=frozenset({"CLOUD", "POWERED_DOWN"}))
                for i in (1, 2)]

    def default_partition(self) -> str | None:
        return None

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        return []

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.listed if j.job_id == job_id), None)

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        self.updates.append((name, state))

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        self.addresses.append((name, address, hostname))


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


def spool(config: Config, clock: FixedClock, action: str, *nodes: str,
          workload: str | None = None, jobs: dict[str, str] | None = None) -> None:
    spool_request(config, clock, PowerRequest(action, nodes, workload, jobs or {}))
    clock.advance(1)  # spool files sort by time


def claimed(store: Store, workload: str = "hpc") -> tuple[str, ...]:
    claim = store.claim(workload)
    return claim.nodes if claim else ()


def test_a_spooled_resume_is_no_claim_until_a_pass_applies_it(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    spool(config, clock, RESUME, "cloud-1", workload="hpc")
    assert store.claims() == []  # the hook wrote the spool, never the state
    assert list(pending_events(config.spool)) == []  # and watch does not take it for a token

    result = apply_requests(config, store, Slurm())

    assert result.applied == 1 and result.resumed == {"hpc": ["cloud-1"]}
    claim = store.claim("hpc")
    assert claim is not None and claim.nodes == ("cloud-1",) and claim.pods == 1
    assert claim.requests == {"cpu": 2000, "memory": 1000 * 2**20}
    assert [e.token for e in store.events(workload="hpc")] == ["SLURM_NODES_RESUME"]
    assert apply_requests(config, store, Slurm()).applied == 0  # applied once, file gone


def test_a_resume_for_a_multi_node_job_is_a_gang_of_the_nodes_slurm_says_it_needs(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    # after a requeue Slurm's resume file may name only the nodes not up yet: one of two
    spool(config, clock, RESUME, "cloud-2", workload="hpc", jobs={"cloud-2": "7"})
    mpi = SlurmJob(job_id=7, name="mpi", state="CONFIGURING", partition="cloud", node_count=2)
    apply_requests(config, store, Slurm(mpi))
    claim = store.claim("hpc")
    assert claim is not None and (claim.nodes, claim.gang) == (("cloud-2",), 2)
    # without Slurm's word, the file's own count; one node of one job is no gang
    spool(config, clock, RESUME, "cloud-1", workload="solo", jobs={"cloud-1": "8"})
    apply_requests(config, store, Slurm())
    solo = store.claim("solo")
    assert solo is not None and solo.gang == 0
    # a release keeps the gang of what stays and drops it with the last node
    spool(config, clock, RESUME, "cloud-1", workload="hpc", jobs={"cloud-1": "7"})
    spool(config, clock, SUSPEND, "cloud-1")
    apply_requests(config, store, Slurm(mpi))
    kept = store.claim("hpc")
    assert kept is not None and (kept.nodes, kept.gang) == (("cloud-2",), 2)
    spool(config, clock, SUSPEND, "cloud-2")
    apply_requests(config, store, Slurm(mpi))
    gone = store.claim("hpc")
    assert gone is None or (gone.nodes, gone.gang) == ((), 0)


def test_requests_apply_in_order_and_a_suspend_marks_the_server_for_deletion(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    spool(config, clock, RESUME, *node_names("cloud-[1-2]"))  # no workload maps "cloud"
    spool(config, clock, SUSPEND, "cloud-1")
    store.upsert_instance(InstanceRecord(
        id="srv-1", name="cloud-1", region="region-a", workload="slurm-cloud",
        pool="small.a", generation=1, launch_id="l-000000000001", status="ready",
        created=store.now(), updated=store.now(), node_name="cloud-1"))

    result = apply_requests(config, store, Slurm())

    assert result.applied == 2
    assert result.resumed == {"slurm-cloud": ["cloud-1", "cloud-2"]}
    assert result.released == {"slurm-cloud": ["cloud-1"]}
    assert claimed(store, "slurm-cloud") == ("cloud-2",)
    assert store.suspended_nodes() == {"cloud-1"}
    inst = store.instance("srv-1")
    assert inst is not None and inst.idle_since is not None


def test_a_failed_resume_goes_back_to_powered_down_and_leaves_the_claim(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    spool(config, clock, RESUME, "cloud-1", workload="hpc")
    spool(config, clock, RESUME_FAIL, "cloud-1")
    slurm = Slurm()

    result = apply_requests(config, store, slurm)

    assert slurm.updates == [("cloud-1", "POWER_DOWN_FORCE")]  # never DOWN
    assert result.powered_down == ["cloud-1"] and claimed(store) == ()
    assert [e.detail.get("reason") for e in store.events(workload="hpc")] == [
        None, "resume failed (ResumeTimeout)"]


def test_a_resume_slurm_cannot_answer_stays_in_the_spool_with_those_after_it(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    spool(config, clock, RESUME, "cloud-1", workload="hpc")
    spool(config, clock, SUSPEND, "cloud-1")
    slurm = Slurm()
    slurm.down = True

    failed = apply_requests(config, store, slurm)

    assert failed.applied == 0 and "stays in the spool" in failed.errors[0]
    slurm.down = False
    later = apply_requests(config, store, slurm)
    assert later.applied == 2 and claimed(store) == ()


def test_a_spool_file_that_is_no_power_request_is_dropped_with_a_warning(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    write_event(config.spool, ts="2026-01-01T00:00:00Z", token="SLURM_POWER_RESUME",
                workload="", detail={"nodes": "cloud-1"}, kind="power")
    assert apply_requests(config, store, Slurm()).applied == 0
    assert list(config.spool.glob("*.json")) == [] and store.claims() == []


def test_hostlists_are_expanded_and_bad_ones_name_the_argument() -> None:
    assert node_names("cloud-[1-2],gpu-[01-02]") == ("cloud-1", "cloud-2", "gpu-01", "gpu-02")
    with pytest.raises(UsageError, match="HOSTLIST"):
        node_names("cloud-[1-")


def test_a_run_pass_applies_the_power_requests_before_it_plans(
    config: Config, store: Store, clock: FixedClock,
) -> None:
    spool(config, clock, RESUME, "cloud-1", workload="hpc")
    fake = FakeCloud()
    systems = Systems(scheduler=Slurm(), clouds={"region-a": fake}, sources=("slurm",))

    result = one_pass(config, store, clock, systems, acquire_watch=0)

    assert [s.name for s in result.steps] == ["watch", "slurm-power", "plan", "acquire",
                                               "reconcile", "notice"]
    assert claimed(store) == ("cloud-1",)
    assert "hpc" in store.plans()  # planned in the same pass
    assert [s.name for s in fake.servers()] == ["cloud-1"]  # one server named after the node
