"""What the notice stage asks of real Slurm (design: Notices): DRAIN a node with the reclaim reason
while its job runs on, requeue that job, and refuse to requeue what Slurm does not know."""

from __future__ import annotations

import pytest

from scoctl.adapters.batch import SchedulerFailed
from scoctl.adapters.slurm import SlurmCli
from scoctl.stages.notice import running_jobs
from tests.fixtures.slurm import SlurmCluster, wait_for

pytestmark = pytest.mark.slurm


def test_a_draining_node_keeps_its_job_until_requeued(slurm_cluster: SlurmCluster) -> None:
    cli = SlurmCli(env={"SLURM_CONF": str(slurm_cluster.conf)})
    local = next(n for n in cli.nodes("cpu") if not n.cloud)
    job = slurm_cluster.sbatch("-p", "cpu", "-w", local.name, "-c", "1", "--requeue",
                               "-J", "scoctl-requeue", "--wrap", "sleep 300")
    try:
        assert wait_for(lambda: (j := cli.job(job)) is not None and j.state == "RUNNING",
                        timeout=20)
        reason = "sco: reclaim at 2026-05-01T12:00:00Z"
        cli.update_node(local.name, state="DRAIN", reason=reason)
        node = next(n for n in cli.nodes("cpu") if n.name == local.name)
        assert "DRAIN" in node.flags and node.reason == reason
        assert running_jobs(cli.jobs())[local.name] == (job,)  # it runs on while draining

        cli.requeue(job)
        assert wait_for(lambda: (j := cli.job(job)) is not None and j.state == "PENDING",
                        timeout=20)
        assert local.name not in running_jobs(cli.jobs())
        with pytest.raises(SchedulerFailed):
            cli.requeue(999999)
    finally:
        def gone() -> bool:  # a job cancelled while its requeue settles may need another try
            slurm_cluster.cancel(job)
            return job not in {int(i) for i in
                               slurm_cluster.run("squeue", "-h", "-o", "%i").split()}

        assert wait_for(gone, timeout=30, interval=0.5)
        cli.update_node(local.name, state="RESUME")
