"""`scoctl gate` end to end: real Slurm daemons, the Kubernetes emulator, the real CLI."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scoctl.core.tokens import map_token
from scoctl.services.tokens import record_token
from scoctl.sim.k8s_emulator import make_node
from scoctl.state import open_store
from tests.builders import JOIN_FIELDS

BIN = Path(sys.executable).parent


def gate_config(tmp_path: Path, *, sinfo: str = "sinfo", kubeconfig: Path | None = None,
                extra_flavors: str = "", extra_pools: str = "") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        state: {tmp_path / "state.db"}
        spool: {tmp_path / "spool"}
        regions:
          - name: r1
            launch: {{image: img, networks: [net]}}
        flavors:
          - {{name: c64.big, vcpus: 64, ram: 512Gi}}
          - {{name: g8.a100, vcpus: 32, ram: 256Gi, accelerators: {{nvidia.com/gpu: 8}}}}
        {extra_flavors}
        pools:
          - {{name: c64.big.az1, region: r1, az: az1, flavor: c64.big, group: g1,
             tier: reclaimable, depth: 4}}
          - {{name: g8.a100.az1, region: r1, az: az1, flavor: g8.a100, group: g2,
             tier: reclaimable, depth: 4}}
        {extra_pools}
        ranking: {{id: r-1, scores: {{c64.big.az1: 0.9, g8.a100.az1: 0.8}}}}
        workloads:
          - {{name: train-7, contract: T1, source: slurm}}
        kubernetes: {{kubeconfig: {kubeconfig or tmp_path / "no-kubeconfig"}}}
        bootstrap: {{{JOIN_FIELDS}}}
        slurm: {{gpu_partition: ml, sinfo: {sinfo}, timeout: 2s}}
        """))
    return path


def run_gate(cli, config: Path, *args: str, env: dict[str, str] | None = None):
    if env:
        cli.env.update(env)
    return cli("--config", str(config), "gate", "--json", *args)


@pytest.fixture
def slurm_cli(cli, slurm_cluster):
    cli.env["SLURM_CONF"] = str(slurm_cluster.conf)
    return cli


@pytest.mark.slurm
@pytest.mark.parametrize(("args", "verdict", "node"), [
    (["--cpus", "2", "--mem", "1G"], "fits", "local1"),
    (["--cpus", "2", "--gpus", "1"], "fits", "local1"),
    (["--cpus", "32", "--mem", "400G", "--gpus", "4", "--gpu-type", "a100"], "fits",
     "gpu-a100-1"),
    (["--cpus", "8", "--gpus", "8", "--gpu-type", "h100"], "fits", "gpu-h100-1"),
    (["--cpus", "8", "--gpus", "2", "--partition", "ml"], "fits", "gpu-any-1"),
])
def test_a_request_some_node_holds_fits(slurm_cli, tmp_path, args, verdict, node):
    config = gate_config(tmp_path)
    result = run_gate(slurm_cli, config, "--backend", "slurm", "--no-elastic", *args)
    assert result.code == 0, result.stderr
    body = result.json()
    assert body["verdict"] == verdict
    assert body["node"]["name"] == node


@pytest.mark.slurm
@pytest.mark.parametrize(("args", "word"), [
    (["--cpus", "200"], "CPU"),                                   # CPU alone too big
    (["--cpus", "1", "--mem", "2T"], "memory"),                   # memory alone too big
    (["--cpus", "1", "--gpus", "16"], "GPU"),                     # GPUs alone too big
    (["--cpus", "64", "--gpus", "4", "--gpu-type", "a100"], "no node"),  # each fits, none all
    (["--cpus", "2", "--gpus", "8", "--gpu-type", "a100"], "GPU"),  # the type filter
])
def test_a_request_no_node_can_hold_is_over_capacity(slurm_cli, tmp_path, args, word):
    config = gate_config(tmp_path)
    result = run_gate(slurm_cli, config, "--backend", "slurm", "--no-elastic", *args)
    assert result.code == 3, result.stderr
    body = result.json()
    assert body["verdict"] == "over_capacity"
    assert word.lower() in body["reason"].lower()


@pytest.mark.slurm
def test_over_capacity_fails_the_workload_row_and_records_the_event(slurm_cli, tmp_path):
    config = gate_config(tmp_path)
    result = run_gate(slurm_cli, config, "--backend", "slurm", "--cpus", "64", "--gpus", "4",
                      "--gpu-type", "a100", "--no-elastic", "--workload", "train-7")
    assert result.code == 3
    assert result.json()["workload"] == {"slug": "train-7", "status": "failed"}
    with open_store(tmp_path / "state.db") as store:
        row = store.latest_workload("train-7")
        events = store.events(workload="train-7")
    assert row is not None and row.status == "failed"
    assert [e.token for e in events] == ["CAPACITY_EXCEEDED"]
    assert events[0].level == map_token("CAPACITY_EXCEEDED").level == "error"  # one level
    detail = events[0].detail
    assert detail["request"]["cpus"] == 64 and detail["request"]["gpus"] == 4
    assert detail["node"]["name"]  # the best candidate node is named


@pytest.mark.slurm
def test_a_fit_reuses_the_active_pending_row(slurm_cli, tmp_path):
    config = gate_config(tmp_path)
    for _ in range(2):
        result = run_gate(slurm_cli, config, "--backend", "slurm", "--cpus", "1",
                          "--workload", "train-7")
        assert result.code == 0 and result.json()["workload"]["status"] == "pending"
    with open_store(tmp_path / "state.db") as store:
        assert len(store.conn.execute("SELECT id FROM workloads").fetchall()) == 1


@pytest.mark.slurm
def test_the_gate_never_fails_a_running_workload(slurm_cli, tmp_path):
    config = gate_config(tmp_path)
    with open_store(tmp_path / "state.db", create=True) as store:
        store.ensure_workload("train-7", kind="job", source="slurm", contract="T1")
        record_token(store, "train-7", "SLURM_JOB_STATUS", {"state": "RUNNING"})
    result = run_gate(slurm_cli, config, "--backend", "slurm", "--cpus", "500",
                      "--no-elastic", "--workload", "train-7")
    assert result.code == 3
    assert result.json()["workload"]["status"] == "running"


@pytest.mark.slurm
def test_an_elastic_fit_through_a_pool_flavor_names_the_pool(slurm_cli, tmp_path):
    # 64 CPUs and 300 GB: big-cpu-1 (64 CPUs, 256000 MB) cannot, flavor c64.big (512Gi) can,
    # and big-cpu-1 is a CLOUD node of that shape in partition cpu.
    config = gate_config(tmp_path)
    elastic = run_gate(slurm_cli, config, "--backend", "slurm", "--cpus", "64", "--mem", "300G")
    rigid = run_gate(slurm_cli, config, "--backend", "slurm", "--cpus", "64", "--mem", "300G",
                     "--no-elastic")
    assert elastic.code == 0 and elastic.json()["pool"] == "c64.big.az1"
    assert rigid.code == 3


@pytest.mark.parametrize(("script", "why"), [
    (None, "missing"),
    ("#!/bin/sh\nsleep 30\n", "hanging"),
    ("#!/bin/sh\necho 'garbage {{{ not json'\necho 'more garbage'\n", "garbage"),
    ("#!/bin/sh\necho boom >&2\nexit 1\n", "failing"),
])
def test_unreadable_sinfo_is_skipped_with_exit_0(cli, tmp_path, script, why):
    sinfo = tmp_path / "sinfo"
    if script is not None:
        sinfo.write_text(script)
        sinfo.chmod(0o755)
    config = gate_config(tmp_path, sinfo=str(sinfo))
    started = time.monotonic()
    result = run_gate(cli, config, "--backend", "slurm", "--cpus", "4", "--workload", "train-7")
    assert result.code == 0, (why, result.stderr)
    assert result.json()["verdict"] == "skipped"
    assert result.json()["workload"]["status"] == "pending"
    assert "warning" in result.stderr
    assert time.monotonic() - started < 20


@pytest.mark.k8s
def test_kubernetes_gpu_request_without_gpu_nodes_is_skipped_not_failed(cli, tmp_path,
                                                                       k8s_emulator,
                                                                       k8s_kubeconfig):
    k8s_emulator.add(make_node("cpu-1", cpu="16", memory="64Gi"))
    config = gate_config(tmp_path, kubeconfig=k8s_kubeconfig)
    result = run_gate(cli, config, "--backend", "k8s", "--cpus", "4", "--gpus", "2",
                      "--no-elastic")
    assert result.code == 0, result.stderr
    assert result.json()["verdict"] == "skipped"


@pytest.mark.k8s
def test_kubernetes_per_node_conjunction_and_elastic_pool(cli, tmp_path, k8s_emulator,
                                                         k8s_kubeconfig):
    k8s_emulator.add(make_node("cpu-big", cpu="64", memory="64Gi"))
    k8s_emulator.add(make_node("gpu-small", cpu="8", memory="512Gi", gpus=4))
    config = gate_config(tmp_path, kubeconfig=k8s_kubeconfig)
    fits = run_gate(cli, config, "--backend", "k8s", "--cpus", "6", "--mem", "200G",
                    "--gpus", "2", "--no-elastic")
    assert fits.code == 0 and fits.json()["node"]["name"] == "gpu-small"
    # CPUs fit cpu-big, GPUs fit gpu-small, no node holds both
    over = run_gate(cli, config, "--backend", "k8s", "--cpus", "32", "--gpus", "2",
                    "--no-elastic", "--workload", "train-7", "--kind", "deployment")
    assert over.code == 3 and over.json()["verdict"] == "over_capacity"
    assert over.json()["workload"]["status"] == "failed"
    elastic = run_gate(cli, config, "--backend", "k8s", "--cpus", "24", "--gpus", "6")
    assert elastic.code == 0 and elastic.json()["pool"] == "g8.a100.az1"


@pytest.mark.slurm
def test_the_submit_wrapper_submits_a_fitting_job_and_records_its_id(slurm_cli, tmp_path,
                                                                   slurm_cluster):
    config = gate_config(tmp_path)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --cpus-per-task=1\n#SBATCH --mem=100M\ntrue\n")
    slurm_cli.env.update({"SCOCTL": str(BIN / "scoctl"), "SCOCTL_CONFIG": str(config)})
    import subprocess

    wrapper = Path(__file__).resolve().parents[2] / "slurm" / "sbatch-gate"
    done = subprocess.run([str(wrapper), "--sco-workload", "train-7", "-p", "cpu", "-t", "1",
                           "-o", str(tmp_path / "out.txt"), str(script)],
                          env=slurm_cli.env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().rsplit(" ", 1)[-1]
    assert job_id.isdigit()
    spooled = [json.loads(p.read_text()) for p in sorted((tmp_path / "spool").glob("*.json"))]
    assert [(e["token"], e["detail"].get("job_id")) for e in spooled] == [
        ("SLURM_JOB_SUBMITTED", job_id)]
    slurm_cluster.cancel(int(job_id))


@pytest.mark.slurm
def test_the_submit_wrapper_refuses_an_over_capacity_job(slurm_cli, tmp_path, slurm_cluster):
    config = gate_config(tmp_path)
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#SBATCH --cpus-per-task=500\ntrue\n")
    slurm_cli.env.update({"SCOCTL": str(BIN / "scoctl"), "SCOCTL_CONFIG": str(config)})
    before = slurm_cluster.run("squeue", "-h", "-o", "%i")
    import subprocess

    wrapper = Path(__file__).resolve().parents[2] / "slurm" / "sbatch-gate"
    done = subprocess.run([str(wrapper), "--sco-workload", "train-7", str(script)],
                          env=slurm_cli.env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    # no job was submitted: no id that was not queued before (an earlier test's job may end
    # meanwhile, so the queue may shrink)
    after = slurm_cluster.run("squeue", "-h", "-o", "%i")
    assert set(after.split()) <= set(before.split()), (before, after)
    spooled = [json.loads(p.read_text())["token"] for p in (tmp_path / "spool").glob("*.json")]
    assert spooled == ["SLURM_JOB_SUBMISSION_FAILED"]
    with open_store(tmp_path / "state.db") as store:
        assert store.latest_workload("train-7").status == "failed"


@pytest.mark.k8s
def test_kubernetes_backend_reads_kubernetes_quantities(cli, tmp_path, k8s_emulator,
                                                        k8s_kubeconfig):
    # README: the k8s backend takes a pod's own notation (Kubernetes quantities:
    # k8s.io/apimachinery/pkg/api/resource/quantity.go — 16Gi binary, 16G decimal, 500m cpu)
    k8s_emulator.add(make_node("cpu-1", cpu="16", memory="64Gi"))
    config = gate_config(tmp_path, kubeconfig=k8s_kubeconfig)
    fits = run_gate(cli, config, "--backend", "k8s", "--cpus", "500m", "--mem", "16Gi",
                    "--no-elastic")
    assert fits.code == 0, fits.stderr
    assert fits.json()["verdict"] == "fits" and fits.json()["node"]["name"] == "cpu-1"
    exact = run_gate(cli, config, "--backend", "k8s", "--cpus", "16", "--mem", "64Gi",
                     "--no-elastic")
    assert exact.code == 0 and exact.json()["verdict"] == "fits", exact.stdout
    decimal = run_gate(cli, config, "--backend", "k8s", "--mem", "68G", "--no-elastic")
    assert decimal.code == 0 and decimal.json()["verdict"] == "fits"  # 68e9 B < 64 GiB
    over = run_gate(cli, config, "--backend", "k8s", "--cpus", "16500m", "--mem", "65Gi",
                    "--no-elastic")
    assert over.code == 3, over.stderr
    reason = over.json()["reason"]
    assert "16.5 CPUs" in reason and "66560 MB of memory" in reason, reason
    # Slurm keeps sbatch's units: a Kubernetes suffix or a part of a CPU is a usage error
    slurm = run_gate(cli, config, "--backend", "slurm", "--mem", "16Gi")
    assert slurm.code == 2 and "--mem" in slurm.stderr
    part = run_gate(cli, config, "--backend", "slurm", "--cpus", "500m")
    assert part.code == 2 and "--cpus" in part.stderr
