"""The notice stage with a Slurm CLOUD node (design: Notices): DRAIN with the reclaim reason, the
node dropped from its claim (no second server under its name), its jobs requeued at
``deadline − drain_margin``, then the empty node's server deleted and the node powered down.

Nova is the in-package `FakeCloud`, Slurm a recording fake of scoctl's own `BatchScheduler`
(design: Testing); `tests/adapters/test_slurm_requeue.py` runs the same Slurm calls on real daemons.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.core.model import (
    InstanceRecord,
    LaunchRequest,
    NodeRelease,
    ServerInfo,
    SlurmJob,
    SlurmNode,
)
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.stages.notice import NoticeResult, run_notices
from scoctl.state import Store, open_store
from tests.builders import Systems, one_pass
from tests.stages.test_acquire import make_config

NODE = "cloud-1"


class RecordingSlurm:
    """Slurm's CLOUD node `NODE` running job 7, and every call scoctl makes."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.flags = frozenset({"CLOUD"})
        self.running = [7]

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        return [SlurmNode(name=NODE, cpus=1, memory_mb=2000, partitions=("cloud",),
                          state="allocated" if self.running else "idle", flags=self.flags)]

    def default_partition(self) -> str | None:
        return None

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        return [SlurmJob(job_id=j, name="train", state="RUNNING", nodes=NODE)
                for j in self.running]

    def job(self, job_id: int) -> SlurmJob | None:
        return None

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        self.calls.append(("update", name, state, reason or ""))
        if state == "DRAIN":
            self.flags |= {"DRAIN"}

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        self.calls.append(("address", name, address, hostname))

    def requeue(self, job_id: int) -> None:
        self.calls.append(("requeue", str(job_id)))
        self.running.remove(job_id)



def noticed_slurm_node(cloud: FakeCloud, store: Store, deadline: str) -> ServerInfo:
    """A ready Slurm node of `hpc` whose server carries a reclaim notice for `deadline`."""
    server = cloud.launch(LaunchRequest(
        name=NODE, flavor="m1.small", image="img-a",
        tags=("sco:managed", "sco:workload=hpc", "sco:pool=small.a"),
        metadata={META_RECLAIM_AT: deadline})).servers[0]
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "1"}),
                    largest_pod=parse_resources({"cpu": "1"}), pods=1, source="slurm",
                    nodes=[NODE])
    store.upsert_instance(InstanceRecord(
        id=server.id, name=NODE, region="region-a", workload="hpc", pool="small.a",
        generation=1, launch_id="l-1", status="ready", created=store.now(),
        updated=store.now(), ready_at=store.now(), node_name=NODE))
    return server


def test_a_noticed_slurm_node_is_drained_requeued_then_deleted(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    clock = FixedClock()
    cloud, slurm = FakeCloud(), RecordingSlurm()
    deadline = rfc3339(clock.now() + timedelta(seconds=60))
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        server = noticed_slurm_node(cloud, store, deadline)

        def notice_pass() -> NoticeResult:
            result = run_notices(config, store, clock, clouds={"region-a": cloud},
                                 scheduler=slurm)  # type: ignore[arg-type]
            assert not result.errors, result.errors
            return result

        first = notice_pass()
        assert slurm.calls == [("update", NODE, "DRAIN", f"sco: reclaim at {deadline}")]
        # for the composer: no second server under the name while this one still runs
        assert first.release == (NodeRelease(NODE, "reclaim notice"),)
        inst = store.instance(server.id)
        assert inst is not None and inst.status == "noticed"

        clock.advance(30)
        assert notice_pass().release == ()  # draining: the job runs on, nothing else
        assert len(slurm.calls) == 1
        clock.advance(15)  # deadline − drain_margin
        notice_pass()
        assert slurm.calls[1:] == [("requeue", "7")]
        assert cloud.server(server.id) is not None  # requeued, not yet seen empty
        clock.advance(1)
        notice_pass()
        assert cloud.server(server.id) is None
        assert slurm.calls[-1][:3] == ("update", NODE, "POWER_DOWN_FORCE")
        tokens = [e.token for e in store.events()]
        assert tokens.count("SLURM_JOBS_REQUEUED") == 1
        reclaimed = next(e for e in store.events() if e.token == "INSTANCE_RECLAIMED")
        assert reclaimed.detail["noticed"] is True and reclaimed.detail["why"] == "empty"


def test_run_drops_a_noticed_slurm_node_from_its_claim_in_the_same_pass(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    clock = FixedClock()
    cloud, slurm = FakeCloud(), RecordingSlurm()
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        noticed_slurm_node(cloud, store, rfc3339(clock.now() + timedelta(seconds=60)))
        systems = Systems(clouds={"region-a": cloud}, scheduler=slurm)  # type: ignore[arg-type]
        result = one_pass(config, store, clock, systems, acquire_watch=0)
        assert result.exit_code == 0, result.as_dict()
        claim = store.claim("hpc")
        assert claim is not None and claim.nodes == ()  # no second server under its name
        assert cloud.launch_calls()[1:] == []
        assert slurm.calls[0][:3] == ("update", NODE, "DRAIN")
