"""The Slurm adapter against real Slurm daemons on loopback (and broken `sinfo` programs)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from scoctl.adapters.batch import (
    BatchScheduler,
    SchedulerAuthFailed,
    SchedulerError,
    SchedulerFailed,
    SchedulerNotFound,
    SchedulerTimeout,
    SchedulerUnparseable,
    SchedulerUnreachable,
)
from scoctl.adapters.slurm import (
    NODE_FORMAT,
    SlurmCli,
    SlurmRest,
    make_scheduler,
    offered_versions,
    parse_jobs_json,
    parse_long_state,
    parse_nodes_json,
    parse_sacct,
)
from scoctl.core.gate import GateRequest, decide_slurm
from scoctl.core.gres import Gres
from scoctl.core.model import FinishedJob, SlurmNode
from scoctl.errors import PermanentError, TemporaryError
from tests.fixtures.slurm import SlurmCluster, wait_for


def script(tmp_path: Path, name: str, body: str) -> str:
    """A small real program standing in for a Slurm command."""
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def by_name(nodes: list[SlurmNode]) -> dict[str, SlurmNode]:
    return {n.name: n for n in nodes}


# ------------------------------------------------------------ broken sinfo: no cluster needed
def test_absent_sinfo_raises_not_found(tmp_path: Path) -> None:
    cli = SlurmCli(sinfo=str(tmp_path / "no-such-sinfo"))
    with pytest.raises(SchedulerNotFound) as caught:
        cli.nodes()
    assert isinstance(caught.value, PermanentError)
    with pytest.raises(SchedulerNotFound):
        cli.default_partition()


def test_hanging_sinfo_times_out_quickly_and_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "sleep.pid"
    # the sleep is a grandchild: only killing the whole process group ends it
    hang = script(tmp_path, "sinfo", f"sleep 60 & echo $! > {pid_file}; wait")
    cli = SlurmCli(sinfo=hang, timeout=0.5)
    started = time.monotonic()
    with pytest.raises(SchedulerTimeout) as caught:
        cli.nodes()
    assert time.monotonic() - started < 5
    assert isinstance(caught.value, TemporaryError)
    sleeper = int(pid_file.read_text())

    def gone() -> bool:
        try:
            state = Path(f"/proc/{sleeper}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state == "Z"  # killed, waiting for init to reap it

    assert wait_for(gone, timeout=5)


def test_sinfo_printing_garbage_is_unparseable(tmp_path: Path) -> None:
    garbage = script(tmp_path, "sinfo", "echo 'this is not slurm output'")
    with pytest.raises(SchedulerUnparseable):
        SlurmCli(sinfo=garbage).nodes()


def test_sinfo_with_a_bad_gres_column_is_unparseable(tmp_path: Path) -> None:
    bad = script(tmp_path, "sinfo", "echo 'n1|4|4000|gpu:a100:x|cpu*|idle|(null)|none'")
    with pytest.raises(SchedulerUnparseable, match="gres"):
        SlurmCli(sinfo=bad, use_json=False).nodes()


def test_failing_sinfo_raises_failed_with_its_stderr(tmp_path: Path) -> None:
    failing = script(
        tmp_path, "sinfo", "echo 'sinfo: error: Unable to contact slurm controller' >&2; exit 1"
    )
    with pytest.raises(SchedulerFailed) as caught:
        SlurmCli(sinfo=failing).nodes()
    assert caught.value.returncode == 1
    assert "Unable to contact slurm controller" in str(caught.value)


def test_every_sinfo_failure_is_one_scheduler_error_family(tmp_path: Path) -> None:
    programs = [
        (str(tmp_path / "absent"), SchedulerNotFound),
        (script(tmp_path, "hang", "exec sleep 30"), SchedulerTimeout),
        (script(tmp_path, "garbage", "echo '{\"nodes\": 3}'"), SchedulerUnparseable),
        (script(tmp_path, "fail", "exit 2"), SchedulerFailed),
    ]
    for program, kind in programs:
        with pytest.raises(SchedulerError) as caught:
            SlurmCli(sinfo=program, timeout=0.3).nodes()
        assert isinstance(caught.value, kind), (program, caught.value)


def test_nodes_read_the_sinfo_that_start_nodes_started(tmp_path: Path) -> None:
    """`start_nodes` runs ``sinfo --json`` at once; the next `nodes` reads that answer and
    runs none of its own, another command meanwhile runs beside it, and the nodes after are
    read afresh. An sinfo that cannot be executed is reported by `nodes`, as without it."""
    calls = tmp_path / "calls"
    answer = json.dumps({"nodes": []})
    sinfo = script(tmp_path, "sinfo", f"echo \"$*\" >> {calls}\n"
                   f"if [ \"$1\" = --json ]; then echo '{answer}'; else echo 'cpu*'; fi")
    cli = SlurmCli(sinfo=sinfo)
    cli.start_nodes()
    assert wait_for(lambda: calls.exists() and calls.read_text() == "--json\n", timeout=10)
    assert cli.default_partition() == "cpu"  # another command: runs beside it
    assert cli.nodes() == []
    assert calls.read_text().splitlines() == ["--json", "-h -o %P"]
    assert cli.nodes() == []
    assert calls.read_text().splitlines() == ["--json", "-h -o %P", "--json"]
    missing = SlurmCli(sinfo=str(tmp_path / "no-such-sinfo"))
    missing.start_nodes()
    with pytest.raises(SchedulerNotFound):
        missing.nodes()


@pytest.mark.slurm
def test_the_nodes_start_nodes_started_are_those_nodes_reads(cli: SlurmCli) -> None:
    expected = cli.nodes("ml")
    cli.start_nodes()
    assert cli.nodes("ml") == expected


def test_format_state_suffixes_become_flags() -> None:
    assert parse_long_state("idle~") == ("idle", frozenset({"POWERED_DOWN"}))
    assert parse_long_state("mixed#") == ("mixed", frozenset({"POWERING_UP"}))
    assert parse_long_state("drained*") == ("idle", frozenset({"DRAIN", "NOT_RESPONDING"}))
    assert parse_long_state("down~") == ("down", frozenset({"POWERED_DOWN"}))


def test_cli_path_does_not_import_httpx() -> None:
    code = "import sys, scoctl.adapters.slurm; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_rest_adapter_never_shows_its_token() -> None:
    rest = SlurmRest("http://127.0.0.1:9", user="root", token="secret-token-value")
    assert "secret-token-value" not in repr(rest)


def test_rest_without_a_token_fails_auth_before_any_request() -> None:
    with pytest.raises(SchedulerAuthFailed):
        SlurmRest("http://127.0.0.1:9", user="root", token=None).nodes()


# ------------------------------------------------------------------- the real cluster


@pytest.fixture
def cli(slurm_cluster: SlurmCluster) -> SlurmCli:
    return SlurmCli(env={"SLURM_CONF": str(slurm_cluster.conf)})


@pytest.fixture
def rest(slurm_cluster: SlurmCluster) -> Iterator[SlurmRest]:
    assert slurm_cluster.rest_url, "slurmrestd did not start"
    with SlurmRest(slurm_cluster.rest_url, user="root", token=slurm_cluster.token) as client:
        yield client


@pytest.mark.slurm
def test_nodes_have_the_shapes_and_gres_of_slurm_conf(cli: SlurmCli) -> None:
    nodes = by_name(cli.nodes())
    assert isinstance(cli, BatchScheduler)
    assert {"local1", "big-cpu-1", "gpu-a100-1", "gpu-a100-2", "gpu-h100-1", "gpu-any-1"} <= set(
        nodes
    )
    local = nodes["local1"]
    assert (local.cpus, local.memory_mb, local.partitions) == (4, 4000, ("cpu", "ml"))
    assert local.gres == (Gres("gpu", "fake", 2),)
    assert not local.cloud
    a100 = nodes["gpu-a100-1"]
    assert (a100.cpus, a100.memory_mb, a100.partitions) == (32, 512000, ("ml",))
    assert a100.gres == (Gres("gpu", "a100", 4),)
    assert (a100.gpus(), a100.gpus("a100"), a100.gpus("h100")) == (4, 4, 0)
    assert a100.features == ("a100",)
    assert "CLOUD" in a100.flags and a100.cloud
    assert nodes["gpu-h100-1"].gres == (Gres("gpu", "h100", 8),)
    assert nodes["gpu-any-1"].gres == (Gres("gpu", None, 2),)  # untyped
    assert (nodes["big-cpu-1"].cpus, nodes["big-cpu-1"].gres) == (64, ())
    assert nodes["big-cpu-1"].state == "idle"


@pytest.mark.slurm
def test_nodes_of_a_partition(cli: SlurmCli) -> None:
    assert [n.name for n in cli.nodes("cpu")] == ["big-cpu-1", "local1"]
    assert {n.name for n in cli.nodes("ml")} == {
        "local1",
        "gpu-a100-1",
        "gpu-a100-2",
        "gpu-h100-1",
        "gpu-any-1",
    }
    assert cli.nodes("nosuch") == []
    # a partition list, as sbatch -p takes it: the nodes of any of them, each once
    assert [n.name for n in cli.nodes("cloud,cpu")] == [
        "big-cpu-1", "local1", "test-cloud-1", "test-cloud-2"]


@pytest.mark.slurm
def test_format_string_fallback_reads_the_same_nodes(cli: SlurmCli, tmp_path: Path) -> None:
    json_nodes = cli.nodes()
    fmt = SlurmCli(env=cli.env, use_json=False)
    format_nodes = fmt.nodes()
    # %T cannot show CLOUD; everything else is the same
    assert format_nodes == [replace(n, flags=n.flags - {"CLOUD"}) for n in json_nodes]
    powered_down = [n for n in format_nodes if "POWERED_DOWN" in n.flags]
    assert powered_down and all(n.cloud for n in powered_down)

    # a sinfo whose --json is broken falls back to the format string by itself
    no_json = script(
        tmp_path,
        "sinfo",
        'case "$1" in --json) echo "sinfo: unrecognized option --json" >&2; exit 1;; esac\n'
        'exec sinfo "$@"',
    )
    assert SlurmCli(sinfo=no_json, env=cli.env).nodes("ml") == fmt.nodes("ml")


@pytest.mark.slurm
def test_format_string_is_what_sinfo_prints(slurm_cluster: SlurmCluster) -> None:
    lines = slurm_cluster.run("sinfo", "-h", "-N", "-o", NODE_FORMAT).splitlines()
    assert any(line.startswith("gpu-h100-1|96|1024000|gpu:h100:8|ml|") for line in lines)
    assert any(line.startswith("local1|4|4000|gpu:fake:2|cpu*|") for line in lines)


@pytest.mark.slurm
def test_default_partition_is_the_one_sinfo_marks(cli: SlurmCli, rest: SlurmRest) -> None:
    assert cli.default_partition() == "cpu"
    assert rest.default_partition() == "cpu"


@pytest.mark.slurm
def test_submitted_jobs_show_up_with_their_pending_reason(
    slurm_cluster: SlurmCluster, cli: SlurmCli, rest: SlurmRest
) -> None:
    # fill local1 (4 CPUs), then queue behind it; the CLOUD node is excluded so nothing boots
    hog = slurm_cluster.sbatch(
        "-p", "cpu", "-x", "big-cpu-1", "-c", "4", "-J", "scoctl-hog", "--wrap", "sleep 300"
    )
    before = int(time.time())  # Slurm's submit_time is whole seconds
    waiting = slurm_cluster.sbatch(
        "-p",
        "cpu",
        "-x",
        "big-cpu-1",
        "-c",
        "2",
        "--mem=100M",
        "-J",
        "scoctl-wait",
        "--comment",
        "from scoctl tests",
        "--wrap",
        "true",
    )
    gpu = slurm_cluster.sbatch(
        "-p",
        "ml",
        "-x",
        "gpu-a100-[1-2],gpu-h100-1,gpu-any-1",
        "--gres=gpu:fake:1",
        "--mem-per-cpu=300",
        "-J",
        "scoctl-gpu",
        "--wrap",
        "true",
    )
    after = time.time()
    try:

        def squeue_reason() -> str:
            return slurm_cluster.run("squeue", "-h", "-j", str(waiting), "-o", "%r").strip()

        assert wait_for(lambda: squeue_reason() not in ("", "None"), timeout=15)
        assert wait_for(
            lambda: (j := cli.job(hog)) is not None and j.state == "RUNNING", timeout=15
        )

        jobs = {j.job_id: j for j in cli.jobs()}
        job = jobs[waiting]
        assert job.state == "PENDING"
        assert job.reason == squeue_reason().split(",")[0] != "None"
        assert (job.name, job.partition, job.comment, job.user) == (
            "scoctl-wait",
            "cpu",
            "from scoctl tests",
            "root",
        )
        assert (job.cpus, job.memory_per_node_mb, job.memory_per_cpu_mb) == (2, 100, None)
        assert (job.node_count, job.nodes) == (1, "")
        assert job.submitted is not None and before <= job.submitted <= after  # its latency
        assert jobs[hog].nodes == "local1"
        assert jobs[gpu].gres_per_node == (Gres("gpu", "fake", 1),)
        assert jobs[gpu].memory_per_cpu_mb == 300
        assert [j.job_id for j in cli.jobs("ml")] == [
            j for j in sorted(jobs) if jobs[j].partition == "ml"
        ]

        # slurmrestd sees the same jobs
        rest_job = rest.job(waiting)
        assert rest_job is not None
        assert (rest_job.state, rest_job.comment, rest_job.cpus) == (
            "PENDING",
            "from scoctl tests",
            2,
        )
        assert rest_job.submitted == job.submitted
        assert {hog, waiting, gpu} <= {j.job_id for j in rest.jobs()}
        assert rest.job(99_999_999) is None
        assert cli.job(99_999_999) is None
    finally:
        slurm_cluster.cancel(hog, waiting, gpu)


def quiescent(cluster: SlurmCluster) -> bool:
    """No job holds or frees a node and no node changes power state: two reads of the nodes
    a moment apart can only differ if one of them is wrong."""
    busy = cluster.run("squeue", "-h", "-t", "RUNNING,COMPLETING,CONFIGURING", "-o", "%i")
    states = cluster.run("sinfo", "-h", "-N", "-o", "%T").split()
    moving = [s for s in states if s.rstrip("~#%!*") in ("completing", "mixed", "allocated")
              or s[-1:] in ("#", "%", "!")]
    return not busy.strip() and not moving


@pytest.mark.slurm
def test_rest_nodes_match_the_cli(slurm_cluster: SlurmCluster, cli: SlurmCli,
                                  rest: SlurmRest) -> None:
    # jobs of earlier tests may still be COMPLETING on local1: compare once the cluster is still
    assert wait_for(lambda: quiescent(slurm_cluster), timeout=60, interval=0.5)
    assert rest.nodes("ml") == cli.nodes("ml")
    assert rest.nodes() == cli.nodes()
    assert isinstance(rest, BatchScheduler)


@pytest.mark.slurm
def test_rest_negotiates_the_newest_version_debians_slurmrestd_offers(
        slurm_cluster: SlurmCluster, rest: SlurmRest) -> None:
    import httpx

    assert slurm_cluster.rest_url
    spec = httpx.get(slurm_cluster.rest_url + "/openapi/v3", timeout=20,
                     headers={"X-SLURM-USER-NAME": "root",
                              "X-SLURM-USER-TOKEN": slurm_cluster.token})
    offered = offered_versions(spec.text)
    assert {"v0.0.36", "v0.0.37", "v0.0.38"} <= set(offered)  # slurm-start.sh loads them all
    assert rest.api() == "v0.0.38"  # 22.05: the newest, and the oldest scoctl reads
    assert rest.default_partition() == "cpu"


@pytest.mark.slurm
def test_rest_with_a_bad_token_or_no_server_fails_as_scheduler_errors(
    slurm_cluster: SlurmCluster,
) -> None:
    assert slurm_cluster.rest_url
    with SlurmRest(slurm_cluster.rest_url, user="root", token="not-a-jwt") as bad:
        with pytest.raises(SchedulerError):
            bad.nodes()
    with SlurmRest("http://127.0.0.1:9", user="root", token=slurm_cluster.token) as nowhere:
        with pytest.raises(SchedulerUnreachable):
            nowhere.nodes()


@pytest.mark.slurm
def test_make_scheduler_picks_rest_when_a_url_is_configured(slurm_cluster: SlurmCluster) -> None:
    assert isinstance(make_scheduler(), SlurmCli)
    scheduler = make_scheduler(
        rest_url=slurm_cluster.rest_url, rest_user="root", rest_token=slurm_cluster.token
    )
    assert isinstance(scheduler, SlurmRest)
    with scheduler:
        assert scheduler.default_partition() == "cpu"


@pytest.mark.slurm
def test_update_node_drains_and_resumes_a_node(cli: SlurmCli, rest: SlurmRest) -> None:
    try:
        rest.update_node("test-cloud-2", state="DRAIN", reason="scoctl adapter test")
        node = by_name(cli.nodes("cloud"))["test-cloud-2"]
        assert "DRAIN" in node.flags
        assert node.reason == "scoctl adapter test"
    finally:
        cli.update_node("test-cloud-2", state="RESUME")
    assert "DRAIN" not in by_name(cli.nodes("cloud"))["test-cloud-2"].flags
    with pytest.raises(SchedulerFailed):
        cli.update_node("no-such-node", state="RESUME")


def node_line(slurm_cluster: SlurmCluster, name: str) -> dict[str, str]:
    """``scontrol show node -o NAME`` as its key=value fields."""
    out = subprocess.run(["scontrol", "show", "node", "-o", name], env=slurm_cluster.env,
                         capture_output=True, text=True, check=True).stdout
    return dict(field.split("=", 1) for field in out.split() if "=" in field)


@pytest.mark.slurm
@pytest.mark.parametrize("adapter", ["cli", "rest"])
def test_set_node_address_gives_a_cloud_node_its_server_address(
    slurm_cluster: SlurmCluster, cli: SlurmCli, rest: SlurmRest, adapter: str,
) -> None:
    scheduler: BatchScheduler = cli if adapter == "cli" else rest
    before = node_line(slurm_cluster, "test-cloud-1")
    assert "CLOUD" in before["State"]
    try:
        scheduler.set_node_address("test-cloud-1", address="127.0.0.42",
                                   hostname="test-cloud-1-srv")
        after = node_line(slurm_cluster, "test-cloud-1")
        assert (after["NodeAddr"], after["NodeHostName"]) == ("127.0.0.42", "test-cloud-1-srv")
        listed = json.loads(subprocess.run(["sinfo", "--json"], env=slurm_cluster.env,
                                           capture_output=True, text=True, check=True).stdout)
        [shown] = [n for n in listed["nodes"] if n["name"] == "test-cloud-1"]
        assert (shown["address"], shown["hostname"]) == ("127.0.0.42", "test-cloud-1-srv")
    finally:
        cli.set_node_address("test-cloud-1", address=before["NodeAddr"],
                             hostname=before["NodeHostName"])
    restored = node_line(slurm_cluster, "test-cloud-1")
    assert (restored["NodeAddr"], restored["NodeHostName"]) == (before["NodeAddr"],
                                                                before["NodeHostName"])
    with pytest.raises(SchedulerFailed):
        cli.set_node_address("no-such-node", address="127.0.0.42", hostname="x")


@pytest.mark.slurm
def test_gate_core_on_real_sinfo(cli: SlurmCli) -> None:
    ml = cli.nodes("ml")
    assert decide_slurm(GateRequest(cpus=32, gpus=4, gpu_type="a100"), ml).verdict == "fits"
    assert decide_slurm(GateRequest(cpus=8, gpus=2), ml).node.name == "gpu-any-1"  # type: ignore[union-attr]
    assert decide_slurm(GateRequest(gpus=8, gpu_type="a100"), ml).verdict == "over_capacity"
    split = decide_slurm(GateRequest(cpus=96, gpus=4, gpu_type="a100"), ml, partition="ml")
    assert split.verdict == "over_capacity"
    assert "no node holds" in split.reason


def test_node_json_of_later_slurm_releases_parses_too() -> None:
    item = {
        "name": "n1",
        "cpus": {"set": True, "infinite": False, "number": 8},
        "real_memory": 16000,
        "state": ["IDLE", "CLOUD", "POWERED_DOWN"],
        "gres": "gpu:a100:2(S:0)",
        "partitions": ["ml"],
        "features": ["a100", "fast"],
        "reason": "",
    }
    (node,) = parse_nodes_json(json.dumps({"nodes": [item], "errors": []}))
    assert node == SlurmNode(
        name="n1",
        cpus=8,
        memory_mb=16000,
        gres=(Gres("gpu", "a100", 2),),
        partitions=("ml",),
        state="idle",
        flags=frozenset({"CLOUD", "POWERED_DOWN"}),
        features=("a100", "fast"),
    )


def test_sacct_lines_become_finished_jobs() -> None:
    text = ("41|COMPLETED|0:0\n42|CANCELLED by 1000|0:15\n43+0|FAILED|1:0\n"
            "44|OUT_OF_MEMORY|0:125\n\n")
    assert parse_sacct(text) == [FinishedJob(41, "COMPLETED", "0:0"),
                                 FinishedJob(42, "CANCELLED", "0:15"),
                                 FinishedJob(44, "OUT_OF_MEMORY", "0:125")]
    with pytest.raises(SchedulerUnparseable):
        parse_sacct("41 COMPLETED\n")


def test_sacct_is_asked_for_exactly_the_jobs_given(tmp_path: Path) -> None:
    argv = tmp_path / "argv"
    sacct = script(tmp_path, "sacct", f'echo "$@" > {argv}; echo "7|TIMEOUT|0:15"')
    assert SlurmCli(sacct=sacct).finished([9, 7, 9]) == [FinishedJob(7, "TIMEOUT", "0:15")]
    assert argv.read_text().split() == ["-X", "-n", "-P", "-j", "7,9", "-o",
                                        "JobIDRaw,State,ExitCode"]


def test_slurm_json_errors_and_missing_fields_are_scheduler_errors() -> None:
    with pytest.raises(SchedulerFailed, match="boom"):
        parse_nodes_json('{"errors": [{"error": "boom", "errno": 1}], "nodes": []}')
    with pytest.raises(SchedulerUnparseable):
        parse_nodes_json('{"nodes": [{"name": "n1"}]}')
    with pytest.raises(SchedulerUnparseable):
        parse_nodes_json('{"nodes": [{"name": "n1", "cpus": 4, "real_memory": 1, "gres": "?"}]}')
    with pytest.raises(SchedulerUnparseable):
        parse_jobs_json('{"jobs": [{"name": "no id"}]}')
