"""scoctl's Slurm hooks (slurm/) called by a real slurmctld, running as an unprivileged user
that cannot open the state (design: State): PrologSlurmctld / EpilogSlurmctld tokens and the
power-saving programs' requests (ResumeProgram / SuspendProgram / ResumeFailProgram) land in
the spool, a failing hook never drains a node or costs a job, the submit wrapper gates and
submits as the submitting user, and the next pass (`scoctl slurm apply`, `scoctl watch`, as the
state's owner) applies what they dropped.

The suite runs as root, so the module creates a system user for the hooks and runs every hook
through ``setpriv`` as that user; the state file stays 0600 and owned by root, the spool is
root-owned, setgid and writable by the hook user's group (as `scoctl init` makes it). The module
starts its own cluster (scripts/slurm-start.sh on free ports) because the hooks are slurm.conf
lines fixed at start; daemons are stopped by PID and the user is removed at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoctl.core.model import InstanceRecord
from scoctl.services.claims import record_claim
from scoctl.state import Store, open_store
from tests.fixtures.slurm import SCRIPTS, SlurmCluster, free_port_base, wait_for
from tests.fixtures.users import HookUser, python_for, system_users

REPO = Path(__file__).resolve().parents[2]
HOOKS = ("_common.sh", "prolog-slurmctld", "epilog-slurmctld", "resume", "suspend",
         "resume-fail")
SLURMCTLD_HOOKS = {"PROLOG_SLURMCTLD": "prolog-slurmctld",
                   "EPILOG_SLURMCTLD": "epilog-slurmctld", "RESUME_PROGRAM": "resume",
                   "SUSPEND_PROGRAM": "suspend", "RESUME_FAIL_PROGRAM": "resume-fail"}
SUSPEND_TIME = 4


@dataclass
class HookCluster:
    cluster: SlurmCluster
    user: HookUser
    hooks: Path
    spool: Path
    state: Path
    config: Path
    scoctl: Path

    def env_file(self, scoctl: str) -> None:
        (self.hooks / "hooks.env").write_text(
            f"SCOCTL={scoctl}\nSCOCTL_CONFIG={self.config}\nSLURM_CONF={self.cluster.conf}\n"
            "SCO_HOOK_TIMEOUT=20\n", encoding="utf-8")

    def spooled(self, kind: str | None = None) -> list[dict[str, object]]:
        out = []
        for path in sorted(self.spool.glob("[!.]*.json")):
            data = json.loads(path.read_text())
            if kind is None or data.get("kind", "token") == kind:
                out.append(data)
        return out

    def spool_owners(self) -> set[int]:
        return {path.stat().st_uid for path in self.spool.glob("[!.]*.json")}

    def job_state(self, job_id: int) -> str:
        return self.cluster.run("squeue", "-h", "-t", "all", "-j", str(job_id),
                                "-o", "%T", check=False).strip()

    def node_state(self, node: str) -> str:
        return self.cluster.run("sinfo", "-h", "-N", "-n", node, "-o", "%T").split()[0]

    def store(self) -> Store:
        return open_store(self.state)

    def as_owner(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`scoctl ARGS` as the state's owner: the next pass that applies the spool."""
        return subprocess.run([str(self.scoctl), "--config", str(self.config), *args],
                              env=self.cluster.env, capture_output=True, text=True,
                              timeout=60, check=False)

    def power_log(self) -> str:
        return (self.cluster.dir / "log" / "power.log").read_text()


def _as_user_wrapper(directory: Path, user: HookUser, hook: Path) -> Path:
    """What slurm.conf names: slurmctld (SlurmUser root here) runs the hook as `user`."""
    path = directory / f"as-user-{hook.name}"
    path.write_text("#!/bin/sh\nexec " + " ".join(user.argv(str(hook))) + ' "$@"\n')
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def hook_user() -> Iterator[HookUser]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the hook user and start the Slurm daemons")
    with system_users(f"scohook{os.getpid()}"[:32]) as (user,):
        yield user


CONFIG = """
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
"""


@pytest.fixture(scope="module")
def hooked(hook_user: HookUser) -> Iterator[HookCluster]:
    if not os.access("/usr/sbin/slurmctld", os.X_OK):  # CI is root with Slurm: a failure there
        pytest.fail("the Slurm daemons are not installed: run scripts/setup-slurm.sh")
    tmp = Path(tempfile.mkdtemp(prefix="scoctl-hooks-"))
    tmp.chmod(0o755)  # munged (as munge) and the hook user walk into the cluster directory
    hooks = tmp / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        shutil.copy2(REPO / "slurm" / name, hooks / name)
    spool, state, config = tmp / "spool", tmp / "state.db", tmp / "config.yaml"
    config.write_text(CONFIG.format(state=state, spool=spool, tmp=tmp), encoding="utf-8")
    open_store(state, create=True).close()  # 0600, root's: the hooks cannot open it
    spool.mkdir()
    os.chown(spool, 0, hook_user.gid)
    spool.chmod(0o2775)  # setgid, group-writable: what `scoctl init` makes for SlurmUser
    scoctl = python_for(hook_user, tmp, module="scoctl")
    base_dir = tmp / "slurm"
    env = {**os.environ, "SLURM_DIR": str(base_dir), "PORT_BASE": str(free_port_base()),
           "RESTD": "0", "SIMULATE_BOOT": "1", "BOOT_DELAY": "1",
           "SUSPEND_TIME": str(SUSPEND_TIME), "RESUME_TIMEOUT": "60"}
    for setting, hook in SLURMCTLD_HOOKS.items():
        env[setting] = str(_as_user_wrapper(tmp, hook_user, hooks / hook))
    done = subprocess.run(["bash", str(SCRIPTS / "slurm-start.sh")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"slurm-start.sh failed:\n{done.stdout}\n{done.stderr}")
    cluster = SlurmCluster(dir=base_dir, conf=base_dir / "etc" / "slurm.conf", rest_url=None,
                           port_base=int(env["PORT_BASE"]), token="")
    world = HookCluster(cluster, hook_user, hooks, spool, state, config, scoctl)
    world.env_file(str(scoctl))
    try:
        yield world
    finally:
        subprocess.run(["bash", str(SCRIPTS / "slurm-stop.sh")],
                       env={**os.environ, "SLURM_DIR": str(base_dir), "REMOVE": "1"},
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _tokens(world: HookCluster, workload: str) -> list[tuple[str, str]]:
    return [(str(e["token"]), str(dict(e["detail"]).get("state", "")))  # type: ignore[arg-type]
            for e in world.spooled("token") if e["workload"] == workload]


def test_the_hook_user_cannot_open_the_state(hooked: HookCluster) -> None:
    assert (hooked.state.stat().st_uid, hooked.state.stat().st_mode & 0o777) == (0, 0o600)
    done = subprocess.run(hooked.user.argv("/bin/cat", str(hooked.state)),
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode != 0 and "Permission denied" in done.stderr


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
    ended = {str(e["workload"]): dict(e["detail"]) for e in hooked.spooled("token")  # type: ignore[arg-type]
             if e["token"] == "SLURM_JOB_ENDED"}
    assert (ended["hook-ok"]["job_id"], ended["hook-ok"]["exit_code"]) == (str(fine), "0:0")
    assert (ended["hook-fail"]["job_id"], ended["hook-fail"]["exit_code"]) == \
        (str(failing), "3:0")
    assert ended["hook-fail"]["restarts"] == "0"
    assert wait_for(lambda: hooked.job_state(other) == "COMPLETED", timeout=20)
    assert {e["workload"] for e in hooked.spooled("token")} == {"hook-fail", "hook-ok"}
    assert wait_for(lambda: hooked.job_state(failing) == "FAILED", timeout=20)
    assert hooked.spool_owners() == {hooked.user.uid}  # written by the hook user
    # the next pass, as the state's owner, records what the hooks dropped
    watched = hooked.as_owner("watch", "--once", "--source", "slurm", "--json")
    assert watched.returncode == 0, watched.stderr
    with hooked.store() as store:
        assert [e.token for e in store.events(workload="hook-fail")][-1] == "SLURM_JOB_STATUS"
        row = store.latest_workload("hook-fail")
        assert row is not None and row.status == "failed"
    assert hooked.spooled("token") == []


def test_a_failing_hook_never_drains_a_node_or_costs_a_job(hooked: HookCluster) -> None:
    hooked.env_file("/bin/false")  # every emit fails
    try:
        job = hooked.cluster.sbatch("-J", "hook-broken", "-p", "cpu", "--wrap", "true")
        assert wait_for(lambda: hooked.job_state(job) == "COMPLETED", timeout=30)
        hooked.env_file("/nonexistent/scoctl")  # missing binary: same
        job2 = hooked.cluster.sbatch("-J", "hook-broken", "-p", "cpu", "--wrap", "true")
        assert wait_for(lambda: hooked.job_state(job2) == "COMPLETED", timeout=30)
    finally:
        hooked.env_file(str(hooked.scoctl))
    assert hooked.node_state("local1") == "idle"
    assert _tokens(hooked, "hook-broken") == []


def claimed(world: HookCluster) -> tuple[str, ...]:
    with world.store() as store:
        claim = store.claim("hpc")
        return claim.nodes if claim else ()


def applied(world: HookCluster) -> dict[str, object]:
    done = world.as_owner("slurm", "apply", "--json")
    assert done.returncode == 0, done.stderr
    body: dict[str, object] = json.loads(done.stdout)
    return body


def test_resume_and_suspend_are_spooled_by_the_hook_user_and_applied_by_the_next_pass(
    hooked: HookCluster,
) -> None:
    job = hooked.cluster.sbatch("-J", "burst", "-p", "cloud", "-w", "test-cloud-1",
                                "--wrap", "sleep 1")
    assert wait_for(lambda: "RESUME_PROGRAM" in hooked.power_log(), timeout=30)
    assert f"{hooked.hooks.parent}/as-user-resume rc=0" in hooked.power_log()  # exit 0
    [request] = hooked.spooled("power")
    assert (request["token"], dict(request["detail"])["nodes"]) == (  # type: ignore[arg-type]
        "SLURM_POWER_RESUME", ["test-cloud-1"])
    assert hooked.spool_owners() == {hooked.user.uid}
    assert claimed(hooked) == ()  # the hook never touched the state

    assert applied(hooked)["resumed"] == {"hpc": ["test-cloud-1"]}
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
    # idle for SuspendTime → slurmctld runs SuspendProgram (as the hook user) → spooled
    assert wait_for(lambda: "SUSPEND_PROGRAM" in hooked.power_log(), timeout=SUSPEND_TIME + 60,
                    interval=0.5)
    assert f"{hooked.hooks.parent}/as-user-suspend rc=0" in hooked.power_log()
    assert claimed(hooked) == ("test-cloud-1",)

    assert applied(hooked)["released"] == {"hpc": ["test-cloud-1"]}
    assert claimed(hooked) == ()
    with hooked.store() as store:
        assert "test-cloud-1" in store.suspended_nodes()
        inst = store.instance("srv-1")
        assert inst is not None and inst.idle_since is not None
        assert [e.token for e in store.events(workload="hpc")] == [
            "SLURM_NODES_RESUME", "SLURM_NODES_RELEASED"]
    assert hooked.spooled("power") == []


def test_resume_fail_is_spooled_and_the_next_pass_powers_the_node_down_never_down(
    hooked: HookCluster,
) -> None:
    with hooked.store() as store:
        record_claim(store, "hpc", contract="T1", requests={"cpu": 2000}, largest_pod={"cpu": 2000},
                        pods=1, source="slurm", nodes=["test-cloud-2"])
    resumes = hooked.power_log().count("RESUME_PROGRAM")
    hooked.cluster.run("scontrol", "update", "NodeName=test-cloud-2", "State=POWER_UP")
    # slurmctld ran our ResumeProgram (the node is in the claim); now say the resume failed
    assert wait_for(lambda: hooked.power_log().count("RESUME_PROGRAM") > resumes, timeout=20)
    started = time.monotonic()
    done = subprocess.run(hooked.user.argv(str(hooked.hooks / "resume-fail"), "test-cloud-2"),
                          env={"SLURM_CONF": str(hooked.cluster.conf)},
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert [r["token"] for r in hooked.spooled("power")] == [
        "SLURM_POWER_RESUME", "SLURM_POWER_RESUME_FAIL"]

    body = applied(hooked)

    assert body["powered_down"] == ["test-cloud-2"] and body["errors"] == []
    assert wait_for(lambda: hooked.node_state("test-cloud-2") in ("idle~", "idle%"),
                    timeout=30)
    assert "down" not in hooked.node_state("test-cloud-2")
    assert time.monotonic() - started < 30
    with hooked.store() as store:
        claim = store.claim("hpc")
        assert claim is not None and claim.nodes == () and claim.requests == {}


def gate_wrapper(world: HookCluster, *args: str) -> subprocess.CompletedProcess[str]:
    """slurm/sbatch-gate as the submitting user (the hook user here)."""
    env = {"PATH": "/usr/bin:/bin", "SCOCTL": str(world.scoctl),
           "SCOCTL_CONFIG": str(world.config), "SLURM_CONF": str(world.cluster.conf)}
    return subprocess.run(world.user.argv(str(REPO / "slurm" / "sbatch-gate"), *args),
                          env=env, cwd="/tmp", capture_output=True, text=True, timeout=60,
                          check=False)


def test_the_submit_wrapper_gates_and_submits_as_the_submitting_user(
    hooked: HookCluster,
) -> None:
    fits = gate_wrapper(hooked, "--sco-workload", "gated-ok", "-p", "cpu", "-c", "1",
                        "-o", "/dev/null", "--wrap", "true")
    assert fits.returncode == 0, fits.stderr
    job = int(fits.stdout.split()[-1])
    assert wait_for(lambda: hooked.job_state(job) == "COMPLETED", timeout=30)
    submitted = [e for e in hooked.spooled("token") if e["workload"] == "gated-ok"]
    assert [(e["token"], dict(e["detail"]).get("job_id"))  # type: ignore[arg-type]
            for e in submitted][:1] == [("SLURM_JOB_SUBMITTED", str(job))]

    over = gate_wrapper(hooked, "--sco-workload", "gated-big", "-p", "cpu", "-c", "500",
                        "--wrap", "true")

    assert over.returncode == 3, over.stderr
    assert "not submitted" in over.stderr
    assert [e["token"] for e in hooked.spooled("token") if e["workload"] == "gated-big"] == [
        "CAPACITY_EXCEEDED", "SLURM_JOB_SUBMISSION_FAILED"]
    assert hooked.cluster.run("squeue", "-h", "-u", hooked.user.name, "-t", "pending").strip() \
        == ""
    assert hooked.spool_owners() == {hooked.user.uid}
    with hooked.store() as store:  # nothing reached the state but through the spool
        assert store.latest_workload("gated-ok") is None
        assert store.latest_workload("gated-big") is None
    watched = hooked.as_owner("watch", "--once", "--source", "slurm")
    assert watched.returncode == 0, watched.stderr
    with hooked.store() as store:
        big = store.latest_workload("gated-big")
        assert big is not None and big.status == "failed"
