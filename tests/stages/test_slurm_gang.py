"""A multi-node Slurm job is a gang (design: Gangs), on a real slurmctld.

`sbatch -N 4` into the cloud partition: Slurm allocates four powered-down CLOUD nodes and
calls ResumeProgram (scoctl's `slurm/resume` hook) with all four; the controller (`scoctl run
--follow`, in its own process) plans them as one gang and creates four servers on the Nova
emulator. The test plays the machine image: a server that goes ACTIVE boots its node's slurmd
(`boot-node.sh`, one after another, a second apart), a server that goes away halts it.

The best pool's availability zone has room for one member only, so the first launch fails in
part; every member is deleted, all four nodes go back to powered-down (the job is requeued,
never run on fewer), ``GANG_FAILED`` names the pool. After the back-off the gang is launched
whole in the other zone, and the job starts only once its fourth node has registered.

The module starts its own cluster (four cloud nodes; the hooks are slurm.conf lines fixed at
start); every daemon, the controller and each booted slurmd are stopped by PID.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scoctl.sim.nova_emulator import DEFAULT_SEED, IMAGE_ID, NovaEmulator
from scoctl.state import open_store
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.slurm import SCRIPTS, SlurmCluster, free_port_base, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.nova, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
MEMBERS = 4
NODES = [f"test-cloud-{i}" for i in range(1, MEMBERS + 1)]
HOOKS = ("_common.sh", "resume", "suspend", "resume-fail")


@dataclass
class Image:
    """What each server's image does: once ACTIVE its node's slurmd boots (one node per
    `gap` seconds), once the server is gone the slurmd is halted. Also samples how many
    servers exist at once."""

    cluster: SlurmCluster
    nova: NovaEmulator
    gap: float = 1.0
    booted: dict[str, float] = field(default_factory=dict)  # node → when its slurmd started
    most_servers: int = 0
    names: set[str] = field(default_factory=set)  # every server name Nova ever listed
    boots: list[tuple[str, float]] = field(default_factory=list)  # every boot, in order
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Image:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for node in sorted(self.booted):
            self._halt(node)

    def _run(self) -> None:
        last_boot = 0.0
        while not self._stop.wait(0.2):
            listed = self.nova.servers_summary()
            self.names.update(s["name"] for s in listed)
            servers = [s for s in listed if s["name"] in NODES and s["status"] != "DELETED"]
            self.most_servers = max(self.most_servers, len(servers))
            active = {s["name"] for s in servers if s["status"] == "ACTIVE"}
            for node in sorted(set(self.booted) - active):
                self._halt(node)
            for node in sorted(active - set(self.booted)):
                if time.monotonic() - last_boot < self.gap:
                    break
                self._boot(node)
                last_boot = time.monotonic()

    def _boot(self, node: str) -> None:
        self.procs[node] = subprocess.Popen(
            ["setsid", str(self.cluster.bin / "boot-node.sh"), node], env=self.cluster.env,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.booted[node] = time.time()
        self.boots.append((node, self.booted[node]))
        self.log.append(f"boot {node}")

    def _halt(self, node: str) -> None:
        subprocess.run([str(self.cluster.bin / "halt-node.sh"), node], env=self.cluster.env,
                       capture_output=True, timeout=30, check=False)
        del self.booted[node]
        self.procs.pop(node).wait(timeout=30)
        self.log.append(f"halt {node}")


@dataclass
class GangCluster:
    cluster: SlurmCluster
    tmp: Path
    config: Path
    env: dict[str, str]

    def job(self, job_id: int, field_format: str) -> str:
        return self.cluster.run("squeue", "-h", "-t", "all", "-j", str(job_id), "-o",
                                field_format, check=False).strip()

    def node_states(self) -> dict[str, str]:
        out = self.cluster.run("sinfo", "-h", "-N", "-p", "cloud", "-o", "%N %T")
        return dict(line.split() for line in out.splitlines() if line.strip())


def _launcher(tmp: Path) -> Path:
    """`scoctl` for the hooks: this interpreter with the checkout on its path."""
    path = tmp / "scoctl"
    path.write_text(f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -m scoctl \"$@\"\n",
                    encoding="utf-8")
    path.chmod(0o755)
    return path


def _keeping_resume_file(tmp: Path, hook: Path) -> Path:
    """ResumeProgram: a copy of Slurm's SLURM_RESUME_FILE kept, then scoctl's hook."""
    path = tmp / "resume-keeping"
    path.write_text(f"#!/bin/sh\n/bin/cp \"$SLURM_RESUME_FILE\" "
                    f"{tmp}/resume-file.$(/bin/date +%s%N).json\nexec {hook} \"$@\"\n",
                    encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture(scope="module")
def gang_cluster() -> Iterator[GangCluster]:
    if os.geteuid() != 0:
        pytest.fail("the Slurm test cluster needs root (it starts munged and slurmd)")
    tmp = Path(tempfile.mkdtemp(prefix="scoctl-gang-"))
    tmp.chmod(0o755)
    hooks = tmp / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        shutil.copy2(REPO / "slurm" / name, hooks / name)
    config = tmp / "config.yaml"
    (hooks / "hooks.env").write_text(f"SCOCTL={_launcher(tmp)}\nSCOCTL_CONFIG={config}\n"
                                     "SCO_HOOK_TIMEOUT=20\n", encoding="utf-8")
    base_dir = tmp / "slurm"
    env = {**os.environ, "SLURM_DIR": str(base_dir), "PORT_BASE": str(free_port_base()),
           "RESTD": "0", "SIMULATE_BOOT": "0", "BOOT_DELAY": "0", "CLOUD_NODES": str(MEMBERS),
           "RESUME_TIMEOUT": "120", "SUSPEND_TIME": "600", "CRED_EXPIRE": "5",
           "RESUME_PROGRAM": str(_keeping_resume_file(tmp, hooks / "resume")),
           "SUSPEND_PROGRAM": str(hooks / "suspend"),
           "RESUME_FAIL_PROGRAM": str(hooks / "resume-fail")}
    done = subprocess.run(["bash", str(SCRIPTS / "slurm-start.sh")], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        pytest.fail(f"slurm-start.sh failed:\n{done.stdout}\n{done.stderr}")
    conf = base_dir / "etc" / "slurm.conf"
    cluster = SlurmCluster(dir=base_dir, conf=conf, rest_url=None,
                           port_base=int(env["PORT_BASE"]), token="")
    run_env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG"))}
    run_env.update(PYTHONPATH=str(REPO), HOME=str(tmp), SLURM_CONF=str(conf))
    try:
        yield GangCluster(cluster, tmp, config, run_env)
    finally:
        subprocess.run(["bash", str(SCRIPTS / "slurm-stop.sh")],
                       env={**os.environ, "SLURM_DIR": str(base_dir), "REMOVE": "1"},
                       capture_output=True, timeout=120, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _write_config(world: GangCluster, nova: NovaEmulator) -> None:
    tmp = world.tmp
    write_clouds_yaml(tmp, "gang", nova.url, "gang")
    world.config.write_text(f"""
state: {tmp}/state.db
spool: {tmp}/spool
budget_dir: {tmp}/run
regions:
  - {{name: region-a, cloud: gang, clouds_yaml: {tmp}/clouds.yaml,
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
flavors: [{{name: m1.large, vcpus: 4, ram: 8Gi}}]
pools:
  - {{name: large.az1, region: region-a, az: az1, flavor: m1.large, group: g1,
     tier: reclaimable, depth: 8}}
  - {{name: large.az2, region: region-a, az: az2, flavor: m1.large, group: g2,
     tier: reclaimable, depth: 8}}
contracts: {{T2: {{floor: 0.0, min_pools: 1}}}}
ranking: {{id: r-1, scores: {{large.az1: 0.9, large.az2: 0.8}}}}
workloads:
  - {{name: mpi, contract: T2, source: slurm, kind: job, partition: cloud}}
gang: {{backoff: 2s, deadline: 2m}}
timeouts: {{reconcile_interval: 1s}}
slurm: {{poll: 1s, timeout: 10s}}
""", encoding="utf-8")
    (tmp / "spool").mkdir(exist_ok=True)
    (tmp / "spool").chmod(0o1777)
    open_store(tmp / "state.db", create=True).close()


def _diagnose(world: GangCluster, job: int, image: Image) -> str:
    """What a test that timed out shows: the job, nodes, events, logs."""
    with open_store(world.tmp / "state.db") as store:
        events = [(e.token, e.detail) for e in store.events()]
    logs = {name: path.read_text()[-4000:] for name, path in (
        ("power", world.cluster.dir / "log" / "power.log"),
        ("slurmctld", world.cluster.dir / "log" / "slurmctld.log"),
        ("controller", world.tmp / "controller.err"))}
    return (f"job {world.job(job, '%T %r')}; nodes {world.node_states()}; image {image.log}; "
            f"events {events}; logs {logs}")


def test_a_four_node_job_runs_only_once_all_four_are_up_and_a_failed_member_powers_all_down(
    gang_cluster: GangCluster,
) -> None:
    world = gang_cluster
    seed = {**DEFAULT_SEED, "availability_zones": ["az1", "az2"],
            "quota": {"instances": 20, "cores": 80, "ram": 200000},
            # az1's host takes one m1.large: the first member there fits, the others do not
            "capacity": {"vcpus": 64, "ram": 65536, "disk": 4000},
            "az_capacity": {"az1": {"vcpus": 4, "ram": 8192, "disk": 4000}},
            "timing": {"schedule": 0.2, "recheck": 0.0, "active": 0.3, "delete": 0.2}}
    nova = NovaEmulator(seed).start()
    _write_config(world, nova)
    image = Image(world.cluster, nova).start()
    out = world.tmp / "job.out"
    # Slurm allocates the four powered-down nodes within a scheduling cycle and asks for them
    # by name; the controller starts once it has. After the requeue the job pends again
    # (Slurm's requeue delay): its claim plans four nodes, and no server is made for them
    # until Slurm names them again (design: Operating, Gangs)
    job = world.cluster.sbatch("-p", "cloud", "-N", str(MEMBERS), "-J", "mpi", "-o", str(out),
                               "--wrap", "date +%s.%N; echo $SLURM_JOB_NODELIST $SLURM_NNODES")
    passes = (world.tmp / "controller.out").open("w", encoding="utf-8")
    errors = (world.tmp / "controller.err").open("w", encoding="utf-8")
    process: subprocess.Popen[str] | None = None
    try:
        assert wait_for(lambda: world.job(job, "%T") == "CONFIGURING", timeout=30), \
            world.job(job, "%T %r")
        process = subprocess.Popen([sys.executable, "-m", "scoctl", "--config",
                                    str(world.config), "run", "--follow", "--json"],
                                   cwd=world.tmp, env=world.env, text=True, stdout=passes,
                                   stderr=errors)
        assert wait_for(lambda: world.job(job, "%T") == "COMPLETED", timeout=240), \
            _diagnose(world, job, image)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    finally:
        world.cluster.cancel(job)
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        passes.close()
        errors.close()
        image.stop()  # and halts every slurmd it booted, by PID
        nova.stop()
    assert code == 0, (world.tmp / "controller.err").read_text()[-3000:]
    started, nodelist = out.read_text().split("\n", 1)
    assert nodelist.split() == ["test-cloud-[1-4]", str(MEMBERS)]
    with open_store(world.tmp / "state.db") as store:
        events = list(store.events())
        gangs = store.gangs()
    gang = [e for e in events if e.token.startswith("GANG_")]
    assert [(e.token, e.detail.get("pool")) for e in gang] == [
        ("GANG_FAILED", "large.az1"), ("GANG_PROVISIONED", None)]
    assert gang[1].detail["pools"] == ["large.az2"]
    # the failed launch handed every node back, the one that had come up too
    failed_at = gang[0].id
    released = {n for e in events if e.token == "SLURM_NODES_RELEASED" and e.id > failed_at
                for n in str(e.detail["nodes"]).split(",")}
    assert released == set(NODES)
    ctld = (world.cluster.dir / "log" / "slurmctld.log").read_text()
    assert all(f"powering down node {node}" in ctld for node in NODES)
    assert f"requeue job JobId={job} due to failure of node" in ctld
    # the job ran once, on the second launch's nodes, after the last of them had booted
    second = image.boots[-MEMBERS:]
    assert sorted(n for n, _ in second) == NODES
    assert float(started) > max(t for _, t in second)
    assert image.most_servers <= MEMBERS
    assert image.names == set(NODES)  # never a server no node could register under
    # Slurm's resume file named one job waiting on all four: the claim was one gang of four
    resumes = [json.loads(path.read_text())
               for path in sorted(world.tmp.glob("resume-file.*.json"))]
    assert len(resumes) >= 2  # the first allocation, then the one after the requeue
    assert [(j["job_id"], j["nodes"]) for j in resumes[0]["jobs"]] == [(job, "test-cloud-[1-4]")]
    assert all([j["job_id"] for j in r["jobs"]] == [job] for r in resumes)
    assert (gangs["mpi"].size, gangs["mpi"].failures) == (MEMBERS, 1)
