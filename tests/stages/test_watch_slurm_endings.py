"""No Slurm row stays active after its job ended (design: Statuses), against real Slurm daemons
whose
EpilogSlurmctld is slurm/epilog-slurmctld and whose MinJobAge is 2 s, so finished jobs leave
squeue before the next watch pass, as they do on a busy cluster or behind a stopped timer.

There is no slurmdbd here: `sacct` fails, and the rows end from the epilog's records through
the spool, or as "ended, final state unknown". The module starts its own cluster (the hook and
MinJobAge are slurm.conf lines fixed at start) and stops it by PID.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoctl.adapters.batch import SchedulerFailed
from scoctl.adapters.slurm import SlurmCli
from scoctl.clock import FixedClock
from scoctl.config.schema import Config, load_config
from scoctl.core.jobend import UNKNOWN_END
from scoctl.host.spool import write_event
from scoctl.stages.watch import WatchResult, run_pass
from scoctl.state import Store, open_store
from tests.fixtures.slurm import SCRIPTS, SlurmCluster, free_port_base, wait_for

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
LOCAL_ONLY = ("-p", "cpu", "-x", "big-cpu-1")


@dataclass
class EndingWorld:
    cluster: SlurmCluster
    config: Config
    store: Store
    scheduler: SlurmCli

    def once(self) -> WatchResult:
        return run_pass(self.config, self.store, self.store.clock, sources=["slurm"],
                        scheduler=self.scheduler)

    def listed(self, job: int) -> bool:
        out = self.cluster.run("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%i",
                               check=False)
        return out.strip() == str(job)

    def state(self, job: int) -> str:
        return self.cluster.run("squeue", "-h", "-t", "all", "-j", str(job), "-o", "%T",
                                check=False).strip()

    def submitted(self, slug: str, job: int) -> None:
        """What slurm/sbatch-gate spools after sbatch."""
        write_event(self.config.spool, ts="2026-01-01T00:00:00.000000Z",
                    token="SLURM_JOB_SUBMITTED", workload=slug, detail={"job_id": str(job)})


def _hooks(tmp: Path, config: Path, conf: Path) -> Path:
    hooks = tmp / "hooks"
    hooks.mkdir()
    for name in ("_common.sh", "epilog-slurmctld"):
        shutil.copy2(REPO / "slurm" / name, hooks / name)
    wrapper = tmp / "scoctl"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m scoctl \"$@\"\n")
    wrapper.chmod(0o755)
    (hooks / "hooks.env").write_text(f"SCOCTL={wrapper}\nSCOCTL_CONFIG={config}\n"
                                     f"SLURM_CONF={conf}\nSCO_HOOK_TIMEOUT=20\n")
    return hooks


@pytest.fixture(scope="module")
def ending() -> Iterator[EndingWorld]:
    if os.geteuid() != 0 or not os.access("/usr/sbin/slurmctld", os.X_OK):
        pytest.fail("needs root and the Slurm daemons (scripts/setup-slurm.sh)")
    tmp = Path(tempfile.mkdtemp(prefix="scoctl-endings-"))
    tmp.chmod(0o755)  # munged (as munge) walks into the cluster directory
    base = tmp / "slurm"
    config_path = tmp / "config.yaml"
    config_path.write_text(f"""
state: {tmp / "state.db"}
spool: {tmp / "spool"}
budget_dir: {tmp / "budget"}
regions:
  - {{name: r1}}
flavors:
  - {{name: small, vcpus: 4, ram: 8Gi}}
pools:
  - {{name: small.spot, region: r1, az: nova, flavor: small, group: g1, tier: reclaimable,
     depth: 10}}
ranking: {{id: r-1, scores: {{small.spot: 0.9}}}}
slurm: {{timeout: 20s}}
""", encoding="utf-8")
    hooks = _hooks(tmp, config_path, base / "etc" / "slurm.conf")
    env = {**os.environ, "SLURM_DIR": str(base), "PORT_BASE": str(free_port_base()),
           "RESTD": "0", "MIN_JOB_AGE": "2", "EPILOG_SLURMCTLD": str(hooks / "epilog-slurmctld")}
    done = subprocess.run(["bash", str(SCRIPTS / "slurm-start.sh")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"slurm-start.sh failed:\n{done.stdout}\n{done.stderr}")
    cluster = SlurmCluster(dir=base, conf=base / "etc" / "slurm.conf", rest_url=None,
                           port_base=int(env["PORT_BASE"]), token="")
    store = open_store(tmp / "state.db", clock=FixedClock(), create=True)
    try:
        yield EndingWorld(cluster, load_config(config_path), store,
                          SlurmCli(env={"SLURM_CONF": str(cluster.conf)}, timeout=20))
    finally:
        store.close()
        subprocess.run(["bash", str(SCRIPTS / "slurm-stop.sh")],
                       env={**os.environ, "SLURM_DIR": str(base), "REMOVE": "1"},
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def test_sacct_without_slurmdbd_is_a_scheduler_failure(ending: EndingWorld) -> None:
    with pytest.raises(SchedulerFailed, match="sacct exited 1"):
        ending.scheduler.finished([1])
    assert ending.scheduler.finished([]) == []


def test_jobs_that_left_squeue_end_from_the_epilog_record_or_as_unknown(
        ending: EndingWorld) -> None:
    w = ending
    jobs = {
        "end-fail": w.cluster.sbatch(*LOCAL_ONLY, "--hold", "-J", "end-fail", "--wrap", "exit 3"),
        "end-ok": w.cluster.sbatch(*LOCAL_ONLY, "--hold", "-J", "end-ok", "--wrap", "true"),
        "end-cancel": w.cluster.sbatch(*LOCAL_ONLY, "--hold", "-J", "end-cancel",
                                       "--wrap", "sleep 120"),
        # the epilog finds no workload in this job's name or comment: it records nothing
        "end-quiet": w.cluster.sbatch(*LOCAL_ONLY, "--hold", "-J", "Not_A_Slug", "--wrap", "true"),
    }
    try:
        for slug, job in jobs.items():
            w.submitted(slug, job)
        w.once()
        for slug in jobs:
            row = w.store.active_workload(slug)
            assert row is not None and row.status == "queued", slug  # held: JobHeldUser
        w.cluster.run("scontrol", "release", ",".join(str(j) for j in jobs.values()))
        assert wait_for(lambda: w.state(jobs["end-cancel"]) == "RUNNING", timeout=30)
        w.cluster.cancel(jobs["end-cancel"])
        # MinJobAge 2 s, purged every 10 s: all four leave squeue before the next pass
        assert wait_for(lambda: not any(w.listed(j) for j in jobs.values()), timeout=60,
                        interval=0.5)
        result = w.once()
    finally:
        w.cluster.cancel(*jobs.values())

    assert any(m.startswith("Slurm accounting unavailable") for m in result.warnings)
    ends = {}
    for slug, job in jobs.items():
        row = w.store.latest_workload(slug)
        assert row is not None and row.status == "failed", (slug, row)
        last = w.store.events(workload=slug)[-1]
        assert (last.token, last.status, last.detail["job_id"]) == \
            ("SLURM_JOB_ENDED", "failed", str(job))
        ends[slug] = (last.detail["source"], last.detail.get("exit_code"), last.detail["reason"])
    assert ends == {
        "end-fail": ("epilog", "3:0", "exit code 3:0"),
        # Slurm gives the epilog "0:0" for a success and an scancel alike: honestly unknown
        "end-ok": ("epilog", "0:0", UNKNOWN_END),
        "end-cancel": ("epilog", "0:0", UNKNOWN_END),
        "end-quiet": ("none", None, UNKNOWN_END),
    }
    held = [e for e in w.store.events(workload="end-fail") if e.token == "SLURM_JOB_ENDED"]
    assert held[0].detail["hook"] == "epilog_slurmctld" and held[0].status == "queued"

    before = len(w.store.events())
    assert w.once().tokens == 0 and len(w.store.events()) == before  # ended rows stay ended
