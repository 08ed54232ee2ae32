"""scoctl's Slurm hooks (slurm/) called by a real slurmctld: PrologSlurmctld / EpilogSlurmctld
tokens land in the spool for real jobs, a failing hook never drains a node or costs a job, and
ResumeProgram / SuspendProgram / ResumeFailProgram hand power saving to scoctl.

The module starts its own cluster (scripts/slurm-start.sh on free ports) because the hooks are
slurm.conf lines fixed at start; it is stopped by PID at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoctl.core.model import InstanceRecord
from scoctl.state import Store, open_store
from tests.fixtures.slurm import SCRIPTS, SlurmCluster, free_port_base, wait_for

REPO = Path(__file__).resolve().parents[2]
HOOKS = ("_common.sh", "prolog-slurmctld", "epilog-slurmctld", "resume", "suspend",
         "resume-fail")
SUSPEND_TIME = 4


@dataclass
class HookCluster:
    cluster: SlurmCluster
    hooks: Path
    spool: Path
    state: Path
    config: Path

    def env_file(self, scoctl: str) -> None:
        (self.hooks / "hooks.env").write_text(
            f"SCOCTL={scoctl}\nSCOCTL_CONFIG={self.config}\nSLURM_CONF={self.cluster.conf}\n"
            "SCO_HOOK_TIMEOUT=20\n", encoding="utf-8")

    def spooled(self) -> list[dict[str, object]]:
        out = []
        for path in sorted(self.spool.glob("[!.]*.json")):
            out.append(json.loads(path.read_text()))
        return out

    def job_state(self, job_id: int) -> str:
        return self.cluster.run("squeue", "-h", "-t", "all", "-j", str(job_id),
                                "-o", "%T", check=False).strip()

    def node_state(self, node: str) -> str:
        return self.cluster.run("sinfo", "-h", "-N", "-n", node, "-o", "%T").split()[0]

    def store(self) -> Store:
        return open_store(self.state)


def _scoctl_wrapper(directory: Path) -> Path:
    """An absolute `scoctl` for hooks run with no PATH: this interpreter and this checkout."""
    path = directory / "scoctl"
    path.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m scoctl \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def hooked() -> Iterator[HookCluster]:
    if os.geteuid() != 0:
        pytest.skip("needs root and the Slurm daemons (scripts/setup-slurm.sh)")
    if not os.access("/usr/sbin/slurmctld", os.X_OK):  # CI is root with Slurm: a failure there
        pytest.fail("the Slurm daemons are not installed: run scripts/setup-slurm.sh")
    tmp = Path(tempfile.mkdtemp(prefix="scoctl-hooks-"))
    tmp.chmod(0o755)  # munged (as munge) walks into the cluster directory
    hooks = tmp / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        shutil.copy2(REPO / "slurm" / name, hooks / name)
    spool, state, config = tmp / "spool", tmp / "state.db", tmp / "config.yaml"
    config.write_text(f"""
state: {state}
spool: {spool}
budget_dir: {tmp}/budget
regions:
  - {{name: r1, cloud: r1, launch: {{image: img}}}}
flavors:
  - {{name: small, vcpus: 4, ram: 8Gi}}
pools:
  - {{name: small.spot, region: r1, az: nova, flavor: small, group: g1, tier: reclaimable,
     depth: 10}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{small.spot: 0.9}}}}
workloads:
  - {{name: hpc, contract: T1, source: slurm, kind: job, partition: cloud}}
slurm: {{cloud_partitions: [cloud]}}
""", encoding="utf-8")
    open_store(state, create=True).close()
    base_dir = tmp / "slurm"
    env = {**os.environ, "SLURM_DIR": str(base_dir), "PORT_BASE": str(free_port_base()),
           "RESTD": "0", "SIMULATE_BOOT": "1", "BOOT_DELAY": "1",
           "SUSPEND_TIME": str(SUSPEND_TIME), "RESUME_TIMEOUT": "60",
           "PROLOG_SLURMCTLD": str(hooks / "prolog-slurmctld"),
           "EPILOG_SLURMCTLD": str(hooks / "epilog-slurmctld"),
           "RESUME_PROGRAM": str(hooks / "resume"), "SUSPEND_PROGRAM": str(hooks / "suspend"),
           "RESUME_FAIL_PROGRAM": str(hooks / "resume-fail")}
    done = subprocess.run(["bash", str(SCRIPTS / "slurm-start.sh")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"slurm-start.sh failed:\n{done.stdout}\n{done.stderr}")
    cluster = SlurmCluster(dir=base_dir, conf=base_dir / "etc" / "slurm.conf", rest_url=None,
                           port_base=int(env["PORT_BASE"]), token="")
    world = HookCluster(cluster, hooks, spool, state, config)
    world.env_file(str(_scoctl_wrapper(tmp)))
    try:
        yield world
    finally:
        subprocess.run(["bash", str(SCRIPTS / "slurm-stop.sh")],
                       env={**os.environ, "SLURM_DIR": str(base_dir), "REMOVE": "1"},
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _tokens(world: HookCluster, workload: str) -> list[tuple[str, str]]:
    return [(str(e["token"]), str(dict(e["detail"]).get("state", "")))  # type: ignore[arg-type]
            for e in world.spooled() if e["workload"] == workload]


def test_prolog_and_epilog_spool_start_and_end_tokens_of_real_jobs(hooked: HookCluster) -> None:
    failing = hooked.cluster.sbatch("-J", "hook-fail", "-p", "cpu", "--wrap", "exit 3")
    fine = hooked.cluster.sbatch("-J", "ignored_Name", "-p", "cpu",
                                 "--comment", "sco:workload=hook-ok", "--wrap", "true")
    other = hooked.cluster.sbatch("-J", "Not_A_Slug", "-p", "cpu", "--wrap", "true")
    assert wait_for(lambda: len(_tokens(hooked, "hook-fail")) == 2
                    and len(_tokens(hooked, "hook-ok")) == 2, timeout=30)
    # every ending is recorded, with the exit code Slurm gives the epilog
    assert _tokens(hooked, "hook-fail") == [("SLURM_JOB_STATUS", "CONFIGURING"),
                                            ("SLURM_JOB_ENDED", "")]
    assert _tokens(hooked, "hook-ok") == [("SLURM_JOB_STATUS", "CONFIGURING"),
                                          ("SLURM_JOB_ENDED", "")]
    ended = {str(e["workload"]): dict(e["detail"]) for e in hooked.spooled()  # type: ignore[arg-type]
             if e["token"] == "SLURM_JOB_ENDED"}
    assert (ended["hook-ok"]["job_id"], ended["hook-ok"]["exit_code"]) == (str(fine), "0:0")
    assert (ended["hook-fail"]["job_id"], ended["hook-fail"]["exit_code"]) == \
        (str(failing), "3:0")
    assert ended["hook-fail"]["restarts"] == "0"
    assert wait_for(lambda: hooked.job_state(other) == "COMPLETED", timeout=20)
    assert {e["workload"] for e in hooked.spooled()} == {"hook-fail", "hook-ok"}
    assert wait_for(lambda: hooked.job_state(failing) == "FAILED", timeout=20)


def test_a_failing_hook_never_drains_a_node_or_costs_a_job(hooked: HookCluster) -> None:
    scoctl = (hooked.hooks / "hooks.env").read_text().split("\n")[0].split("=", 1)[1]
    hooked.env_file("/bin/false")  # every emit fails
    try:
        job = hooked.cluster.sbatch("-J", "hook-broken", "-p", "cpu", "--wrap", "true")
        assert wait_for(lambda: hooked.job_state(job) == "COMPLETED", timeout=30)
        hooked.env_file("/nonexistent/scoctl")  # missing binary: same
        job2 = hooked.cluster.sbatch("-J", "hook-broken", "-p", "cpu", "--wrap", "true")
        assert wait_for(lambda: hooked.job_state(job2) == "COMPLETED", timeout=30)
    finally:
        hooked.env_file(scoctl)
    assert hooked.node_state("local1") == "idle"
    assert _tokens(hooked, "hook-broken") == []


def test_resume_claims_the_nodes_and_suspend_hands_them_back(hooked: HookCluster) -> None:
    job = hooked.cluster.sbatch("-J", "burst", "-p", "cloud", "-w", "test-cloud-1",
                                "--wrap", "sleep 1")

    def claimed() -> tuple[str, ...]:
        with hooked.store() as store:
            claim = store.claim("hpc")
            return claim.nodes if claim else ()

    assert wait_for(lambda: claimed() == ("test-cloud-1",), timeout=30)
    with hooked.store() as store:
        claim = store.claim("hpc")
        assert claim is not None and claim.source == "slurm" and claim.pods == 1
        assert claim.requests == {"cpu": 2000, "memory": 1000 * 2**20}
        # acquire's part: one server for the node, recorded as an instance
        store.upsert_instance(InstanceRecord(
            id="srv-1", name="test-cloud-1", region="r1", workload="hpc", pool="small.spot",
            generation=1, launch_id="l-000000000001", status="ready", created=store.now(),
            updated=store.now(), node_name="test-cloud-1"))
    hooked.cluster.cancel(job)
    # idle for SuspendTime → slurmctld runs SuspendProgram → the claim drops the node
    assert wait_for(lambda: claimed() == (), timeout=SUSPEND_TIME + 60, interval=0.5)
    with hooked.store() as store:
        assert "test-cloud-1" in store.suspended_nodes()
        inst = store.instance("srv-1")
        assert inst is not None and inst.idle_since is not None
        assert [e.token for e in store.events(workload="hpc")] == [
            "SLURM_NODES_RESUME", "SLURM_NODES_RELEASED"]
    power_log = hooked.cluster.dir / "log" / "power.log"
    # the wrapper logs SUSPEND_PROGRAM once our program has returned: that can trail the claim
    assert wait_for(lambda: "SUSPEND_PROGRAM" in power_log.read_text(), timeout=20)
    log = power_log.read_text()
    assert "RESUME_PROGRAM" in log and "rc=0" in log


def test_resume_fail_puts_the_node_back_to_powered_down_never_down(
    hooked: HookCluster,
) -> None:
    with hooked.store() as store:
        store.put_claim("hpc", contract="T1", requests={"cpu": 2000}, largest_pod={"cpu": 2000},
                        pods=1, source="slurm", nodes=["test-cloud-2"])
    log = hooked.cluster.dir / "log" / "power.log"
    resumes = log.read_text().count("RESUME_PROGRAM")
    hooked.cluster.run("scontrol", "update", "NodeName=test-cloud-2", "State=POWER_UP")
    # slurmctld ran our ResumeProgram (the node is in the claim); now say the resume failed
    assert wait_for(lambda: log.read_text().count("RESUME_PROGRAM") > resumes, timeout=20)
    started = time.monotonic()
    done = subprocess.run([str(hooked.hooks / "resume-fail"), "test-cloud-2"],
                          env={"SLURM_CONF": str(hooked.cluster.conf)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert wait_for(lambda: hooked.node_state("test-cloud-2") in ("idle~", "idle%"),
                    timeout=30)
    assert "down" not in hooked.node_state("test-cloud-2")
    assert time.monotonic() - started < 30
    with hooked.store() as store:
        claim = store.claim("hpc")
        assert claim is not None and claim.nodes == () and claim.requests == {}
