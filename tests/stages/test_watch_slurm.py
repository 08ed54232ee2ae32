"""`scoctl watch` against the real Slurm daemons: the Slurm flows of design: Statuses end to end.

Jobs stay off the CLOUD nodes (``-x``) so nothing boots, and every wait is for one scheduler
event (a second or so), never for slurmctld's periodic cycles.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scoctl.adapters.batch import BatchScheduler
from scoctl.adapters.factory import scheduler_for
from scoctl.clock import FixedClock
from scoctl.config.schema import Config, load_config
from scoctl.host.spool import write_event
from scoctl.stages.watch import WatchResult, run_pass
from scoctl.state import Store, open_store
from tests.fixtures.slurm import SlurmCluster, wait_for

pytestmark = pytest.mark.slurm

MIB = 2**20
LOCAL_ONLY = ("-p", "cpu", "-x", "big-cpu-1")


def write_config(tmp_path: Path, *, rest_url: str | None = None,
                 token_file: Path | None = None) -> Path:
    rest = f"rest_url: {rest_url}, rest_token_file: {token_file}, " if rest_url else ""
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path}/state.db
spool: {tmp_path}/spool
budget_dir: {tmp_path}/run
regions:
  - name: region-a
    launch: {{image: ubuntu-24.04, networks: [net-a]}}
flavors:
  - {{name: c4.xlarge, vcpus: 16, ram: 64Gi}}
pools:
  - {{name: c4.xlarge.az1.spot, region: region-a, az: az1, flavor: c4.xlarge, group: row-a,
     tier: reclaimable, depth: 40}}
contracts:
  T1: {{floor: 0.30}}
  T2: {{floor: 0.0}}
ranking: {{id: r-1, scores: {{c4.xlarge.az1.spot: 0.9}}}}
workloads:
  - {{name: train-llm, contract: T2, source: slurm, kind: job, account: ml-team}}
slurm: {{{rest}gpu_partition: ml, timeout: 20s}}
""", encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path, slurm_cluster: SlurmCluster) -> Config:
    return load_config(write_config(tmp_path))


@pytest.fixture
def wstore(tmp_path: Path) -> Iterator[Store]:
    store = open_store(tmp_path / "state.db", clock=FixedClock(), create=True)
    yield store
    store.close()


@pytest.fixture
def hog(slurm_cluster: SlurmCluster) -> Iterator[int]:
    """A job holding every CPU of local1, so that other local jobs pend."""
    job = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "4", "-J", "watch-hog", "--wrap", "sleep 300")
    assert wait_for(lambda: state_of(slurm_cluster, job) == "RUNNING", timeout=20)
    yield job
    slurm_cluster.cancel(job)


def state_of(cluster: SlurmCluster, job: int) -> str:
    return cluster.run("squeue", "-h", "-j", str(job), "-o", "%T", check=False).strip()


def reason_of(cluster: SlurmCluster, job: int) -> str:
    return cluster.run("squeue", "-h", "-j", str(job), "-o", "%r", check=False).strip()


def once(config: Config, store: Store, scheduler: BatchScheduler | None = None) -> WatchResult:
    return run_pass(config, store, store.clock, sources=["slurm"],
                    scheduler=scheduler or scheduler_for(config))


def history(store: Store, slug: str) -> list[tuple[str, str | None]]:
    return [(e.token, e.status) for e in store.events(workload=slug)]


def test_slurm_flow_pending_preparing_queued_running_succeeded(
        slurm_cluster: SlurmCluster, config: Config, wstore: Store, hog: int) -> None:
    # the submit script's set-up, before sbatch: the row is created and preparing
    write_event(config.spool, ts="2026-01-01T00:00:00.000000Z", token="SLURM_INIT_REPO_CLONE",
                workload="train-a")
    once(config, wstore)
    assert wstore.active_workload("train-a").status == "preparing"  # type: ignore[union-attr]

    job = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "1", "--mem=100M", "-J", "watch-flow",
                               "--wrap", "sleep 1")
    try:
        write_event(config.spool, ts="2026-01-01T00:00:01.000000Z",
                    token="SLURM_JOB_SUBMITTED", workload="train-a",
                    detail={"job_id": str(job)})
        assert wait_for(lambda: reason_of(slurm_cluster, job) not in ("", "None"), timeout=20)
        pending = once(config, wstore)
        row = wstore.active_workload("train-a")
        assert row is not None and (row.status, row.job_id) == ("queued", str(job))
        reason = reason_of(slurm_cluster, job)
        assert history(wstore, "train-a")[-1] == ("SLURM_JOB_QUEUED", "queued")
        assert wstore.events(workload="train-a")[-1].detail["reason"] == reason
        # the tracked job's pending demand is its claim: one node of 1 CPU and 100 MiB
        claim = wstore.claim("train-a")
        assert claim is not None and (claim.pods, claim.requests) == \
            (1, {"cpu": 1000, "memory": 100 * MIB})
        assert pending.sources["slurm"].claims_changed == 1

        again = once(config, wstore)  # the same reason again: not recorded twice
        assert again.tokens == 0 and len(wstore.events(workload="train-a")) == 3

        slurm_cluster.cancel(hog)
        assert wait_for(lambda: state_of(slurm_cluster, job) in ("RUNNING", "COMPLETING",
                                                                 "COMPLETED", ""), timeout=20)
        once(config, wstore)
        assert wait_for(lambda: state_of(slurm_cluster, job) in ("COMPLETED", ""), timeout=20)
        once(config, wstore)
    finally:
        slurm_cluster.cancel(job)
    statuses = [s for _, s in history(wstore, "train-a")]
    assert statuses == ["preparing", "queued", "queued", "running", "succeeded"]
    assert [t for t, _ in history(wstore, "train-a")][-2:] == \
        ["SLURM_JOB_STATUS", "SLURM_JOB_STATUS"]
    assert wstore.claim("train-a").requests == {}  # type: ignore[union-attr]  # it ran on local1


def test_hopeless_job_fails_when_nothing_could_ever_hold_it(
        slurm_cluster: SlurmCluster, config: Config, wstore: Store) -> None:
    # 5000 MB per node in a partition whose nodes have 1000 MB: Slurm says BadConstraints
    big = slurm_cluster.sbatch("-p", "cloud", "-c", "1", "--mem=500M", "--hold",
                               "--comment", "sco:workload=hopeless-1", "--wrap", "true")
    # a dependency that can never be met, but a shape that fits: it stays queued
    first = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "1", "--mem=100M", "--hold", "--wrap", "true")
    stuck = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "1", "--mem=100M",
                                 f"--dependency=afterok:{first}",
                                 "--comment", "sco:workload=stuck-1", "--wrap", "true")
    try:
        once(config, wstore)  # both discovered through their comment, held / waiting
        assert history(wstore, "hopeless-1") == [("SLURM_JOB_QUEUED", "queued")]
        assert wstore.events(workload="hopeless-1")[0].detail["reason"] == "JobHeldUser"

        slurm_cluster.run("scontrol", "update", f"jobid={big}", "MinMemoryNode=5000",
                          check=False)
        slurm_cluster.run("scontrol", "release", str(big))
        slurm_cluster.cancel(first)
        assert wait_for(lambda: reason_of(slurm_cluster, big) in ("BadConstraints",
                                                                  "PartitionConfig"), timeout=20)
        assert wait_for(lambda: reason_of(slurm_cluster, stuck) == "DependencyNeverSatisfied",
                        timeout=20)
        once(config, wstore)
        tokens = history(wstore, "hopeless-1")
        assert [s for _, s in tokens] == ["queued", "queued", "failed"]
        failed = wstore.events(workload="hopeless-1")[-1]
        assert failed.token == "SLURM_JOB_SCHEDULING_FAILED"
        assert "5000 MB" in failed.detail["gate"]
        assert wstore.active_workload("stuck-1").status == "queued"  # type: ignore[union-attr]
        assert wstore.events(workload="stuck-1")[-1].detail["reason"] == \
            "DependencyNeverSatisfied"

        once(config, wstore)  # failed is terminal and the reason did not change: nothing new
        assert len(history(wstore, "hopeless-1")) == 3
    finally:
        slurm_cluster.cancel(big, first, stuck)


def test_pending_jobs_of_an_account_become_one_claim_through_slurmrestd(
        slurm_cluster: SlurmCluster, tmp_path: Path, wstore: Store, hog: int) -> None:
    assert slurm_cluster.rest_url, "slurmrestd is not running (scripts/setup-slurm.sh installs " \
        "slurm-wlm-jwt-plugin)"
    token_file = tmp_path / "jwt"
    token_file.write_text(slurm_cluster.token, encoding="utf-8")
    config = load_config(write_config(tmp_path, rest_url=slurm_cluster.rest_url,
                                      token_file=token_file))
    jobs = [slurm_cluster.sbatch(*LOCAL_ONLY, "-A", "ml-team", "-c", "2", "--mem-per-cpu=512M",
                                 "-J", "watch-acct", "--wrap", "true") for _ in range(2)]
    other = slurm_cluster.sbatch(*LOCAL_ONLY, "-A", "other", "-c", "1", "--wrap", "true")
    rest = scheduler_for(config)
    assert type(rest).__name__ == "SlurmRest"
    try:
        assert wait_for(lambda: all(reason_of(slurm_cluster, j) not in ("", "None")
                                    for j in jobs), timeout=20)
        result = once(config, wstore, rest)
        assert [c.workload for c in wstore.claims()] == ["train-llm"]
        claim = wstore.claim("train-llm")
        assert claim is not None
        assert (claim.contract, claim.pods, claim.source) == ("T2", 2, "slurm")
        assert claim.requests == {"cpu": 4000, "memory": 2048 * MIB}
        assert claim.largest_pod == {"cpu": 2000, "memory": 1024 * MIB}
        assert result.sources["slurm"].seen >= 3 and result.errors == []
        assert once(config, wstore, rest).claims_changed == 0
    finally:
        slurm_cluster.cancel(*jobs, other)
        rest.close()  # type: ignore[attr-defined]


def test_an_epilog_record_waits_while_squeue_still_lists_the_job(
        slurm_cluster: SlurmCluster, config: Config, wstore: Store) -> None:
    job = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "1", "--mem=100M", "-J", "watch-held",
                               "--wrap", "sleep 2")
    try:
        write_event(config.spool, ts="2026-01-01T00:00:00.000000Z", token="SLURM_JOB_SUBMITTED",
                    workload="held-1", detail={"job_id": str(job)})
        assert wait_for(lambda: state_of(slurm_cluster, job) == "RUNNING", timeout=20)
        once(config, wstore)
        assert wstore.active_workload("held-1").status == "running"  # type: ignore[union-attr]
        # what slurm/epilog-slurmctld spools: "0:0" says neither success nor cancel
        write_event(config.spool, ts="2026-01-01T00:00:05.000000Z", token="SLURM_JOB_ENDED",
                    workload="held-1", detail={"job_id": str(job), "exit_code": "0:0",
                                               "restarts": "0", "hook": "epilog_slurmctld"})
        once(config, wstore)  # squeue still lists the job: the record is held
        row = wstore.latest_workload("held-1")
        assert row is not None and row.status == "running"
        assert wait_for(lambda: slurm_cluster.run("squeue", "-h", "-t", "all", "-j", str(job),
                                                  "-o", "%T").strip() == "COMPLETED", timeout=20)
        once(config, wstore)
    finally:
        slurm_cluster.cancel(job)
    assert history(wstore, "held-1") == [("SLURM_JOB_SUBMITTED", "queued"),
                                         ("SLURM_JOB_STATUS", "running"),
                                         ("SLURM_JOB_ENDED", "running"),
                                         ("SLURM_JOB_STATUS", "succeeded")]
