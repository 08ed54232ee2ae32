"""The Slurm flow of design: Statuses through the real commands a launcher runs: `scoctl emit` for
the
set-up, slurm/sbatch-gate in place of sbatch (real sbatch, options in every spelling), then
`scoctl watch --source slurm --once` until the job has run:
pending (gate) → preparing (set-up) → queued (submitted, held) → running → succeeded.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scoctl.state import open_store
from tests.builders import slurm_config
from tests.fixtures.slurm import SlurmCluster, wait_for

pytestmark = pytest.mark.slurm

WRAPPER = Path(__file__).resolve().parents[2] / "slurm" / "sbatch-gate"
BIN = Path(sys.executable).parent


def write_config(tmp_path: Path) -> Path:
    return slurm_config(tmp_path, "{gpu_partition: ml, timeout: 20s}")


def test_launcher_flow_through_the_wrapper_and_watch(cli, tmp_path, slurm_cluster: SlurmCluster):
    import subprocess

    config = write_config(tmp_path)
    cli.env.update({"SLURM_CONF": str(slurm_cluster.conf), "SCOCTL_CONFIG": str(config),
                    "SCOCTL": str(BIN / "scoctl")})
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH -c 1 --mem=100M\n#SBATCH -J ignored-name\nsleep 6\n",
                      encoding="utf-8")

    assert cli("emit", "SLURM_INIT_REPO_CLONE", "--workload", "train-9").code == 0
    # -H (held: no value), -t 5 and -o FILE (separate values), -x NODE: nothing boots
    done = subprocess.run([str(WRAPPER), "--sco-workload", "train-9", "-H", "-t", "5",
                           "-o", str(tmp_path / "out.txt"), "-p", "cpu", "-x", "big-cpu-1",
                           str(script)], env=cli.env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    job = int(done.stdout.strip().rsplit(" ", 1)[-1])
    try:
        shown = slurm_cluster.run("squeue", "-h", "-j", str(job), "-o", "%T|%r|%l|%C|%m")
        assert shown.strip() == "PENDING|JobHeldUser|5:00|1|100M"

        def watch() -> str:
            result = cli("watch", "--source", "slurm", "--once", "--json")
            assert result.code == 0, result.stderr
            with open_store(tmp_path / "state.db") as store:
                row = store.latest_workload("train-9")
            assert row is not None and row.job_id == str(job)
            return row.status

        assert watch() == "queued"
        slurm_cluster.run("scontrol", "release", str(job))
        # the job sleeps long enough for a watch pass (a process each) to see it run, even
        # on a loaded machine, where a 1 s job could start and end between two passes
        assert wait_for(lambda: watch() == "running", timeout=30, interval=0.2)
        assert wait_for(lambda: watch() == "succeeded", timeout=30, interval=0.5)
    finally:
        slurm_cluster.cancel(job)
    with open_store(tmp_path / "state.db") as store:
        events = store.events(workload="train-9")
        first = store.conn.execute("SELECT status FROM workloads").fetchall()
    history = [(e.token, e.status) for e in events]
    assert history[:3] == [("SLURM_INIT_REPO_CLONE", "preparing"),
                           ("SLURM_JOB_SUBMITTED", "queued"),
                           ("SLURM_JOB_QUEUED", "queued")]
    assert events[2].detail["reason"] == "JobHeldUser"
    statuses = [s for _, s in history]
    assert statuses[-1] == "succeeded" and "running" in statuses[3:]
    assert len(first) == 1  # the gate's pending row is the one that ran
