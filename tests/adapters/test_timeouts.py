"""Issue 17 item 1: every outside call is bounded in time, every retry loop has a total budget,
every pass a deadline, and the gate its own short bound.

The servers are real sockets on 127.0.0.1: `silent_server` accepts TCP and never answers (the
real openstacksdk and kubernetes clients talk to it), and the Nova emulator answers every create
with 429 and Retry-After 5. Short timeouts are injected through the config (`timeouts.api`,
`timeouts.run`, `timeouts.retry_budget`, `gate.timeout`); before these existed, each scoctl
command below hung until the test's subprocess timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scoctl.services.claims import record_claim
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.state import open_store
from tests.builders import BOOTSTRAP
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.silent import SilentServer

REPO = Path(__file__).resolve().parents[2]
HANG = 60  # a command that has not answered by now would have hung for good


def scoctl(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG"))}
    env["PYTHONPATH"] = str(REPO)
    env["HOME"] = str(tmp)  # no ~/.kube/config of the machine
    return subprocess.run([sys.executable, "-m", "scoctl", "--config", "c.yaml", *args],
                          cwd=tmp, env=env, capture_output=True, text=True, timeout=HANG)


def write_config(tmp: Path, nova_url: str, *, timeouts: str, extra: str = "") -> None:
    write_clouds_yaml(tmp, "nova", nova_url, "p1")
    (tmp / "c.yaml").write_text(f"""\
state: {tmp}/s.db
budget_dir: {tmp}/budget
spool: {tmp}/spool
regions:
  - {{name: region-a, cloud: nova, clouds_yaml: {tmp}/clouds.yaml,
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
flavors: [{{name: m1.tiny, vcpus: 1, ram: 512Mi}}]
pools:
  - {{name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1,
     tier: reclaimable, depth: 20}}
  - {{name: tiny.b, region: region-a, az: nova, flavor: m1.tiny, group: g2,
     tier: reclaimable, depth: 20}}
contracts: {{T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 2}}}}
ranking: {{id: r-1, scores: {{tiny.a: 0.5, tiny.b: 0.4}}}}
workloads: [{{name: web, contract: T1, source: k8s}}]
timeouts: {timeouts}
{BOOTSTRAP}""" + extra)
    (tmp / "claims.yaml").write_text(
        "claims:\n  - {workload: web, requests: {cpu: 4, memory: 2Gi}, "
        "largest_pod: {cpu: 1, memory: 512Mi}, pods: 4}\n")


def assert_api_failure(result: subprocess.CompletedProcess[str], named: str) -> None:
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr
    assert named in result.stderr, result.stderr


def test_a_nova_that_never_answers_fails_reconcile_after_the_api_timeout(tmp_path,
                                                                       silent_server):
    write_config(tmp_path, silent_server.url + "/v2.1",
                 timeouts="{api: 0.4s, retry_budget: 0.5s}")
    assert scoctl(tmp_path, "init").returncode == 0
    result = scoctl(tmp_path, "reconcile")
    assert_api_failure(result, "Nova")
    assert silent_server.accepted >= 1  # it really was asked


def test_a_nova_that_never_answers_fails_acquire_and_frees_the_lock(tmp_path, silent_server):
    write_config(tmp_path, silent_server.url + "/v2.1",
                 timeouts="{api: 0.4s, retry_budget: 0.5s}")
    assert scoctl(tmp_path, "init").returncode == 0
    assert scoctl(tmp_path, "plan", "--claims", "claims.yaml").returncode == 0
    result = scoctl(tmp_path, "acquire")
    assert_api_failure(result, "Nova")
    assert scoctl(tmp_path, "plan").returncode == 0  # the run lock was released


def test_a_pass_past_timeouts_run_stops_records_what_it_did_and_exits_1(tmp_path,
                                                                        silent_server):
    # acquire's first Nova call is still waiting (api 4 s) when the deadline (2 s: room for the
    # watch and plan stages on a loaded machine) passes: it is not retried, and neither
    # reconcile nor the notice stage starts
    write_config(tmp_path, silent_server.url + "/v2.1",
                 timeouts="{api: 4s, run: 2s, retry_budget: 10s}")
    assert scoctl(tmp_path, "init").returncode == 0
    assert scoctl(tmp_path, "plan", "--claims", "claims.yaml", "--dry-run").returncode == 0
    with open_store(tmp_path / "s.db") as store:
        record_claim(store, "web", contract="T1", requests={"cpu": 4000, "memory": 2 * 2**30},
                        largest_pod={"cpu": 1000, "memory": 2**29}, pods=4, source="file")

    result = scoctl(tmp_path, "run", "--once", "--json")

    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    stages = {s["step"]: s for s in report["steps"]}
    assert stages["plan"]["ok"]  # done before the deadline, and kept
    assert not stages["acquire"]["ok"]
    assert stages["reconcile"]["errors"] == ["the pass's deadline (timeouts.run) passed: "
                                             "not run"]
    events = [json.loads(line) for line in scoctl(tmp_path, "events", "--json").stdout.splitlines()]
    deadline = [e for e in events if e["token"] == "RUN_DEADLINE_EXCEEDED"]
    assert deadline and deadline[0]["detail"]["not_run"] == ["reconcile", "notice"]
    assert "plan" in deadline[0]["detail"]["ran"]
    status = json.loads(scoctl(tmp_path, "status", "--json").stdout)
    assert status["plan"]["generation"] >= 1


def write_k8s(tmp: Path, server: SilentServer, *, gate: str, timeouts: str = "{}") -> None:
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": server.url}}],
        "users": [{"name": "silent", "user": {"token": "t"}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}]}))
    write_config(tmp, "http://127.0.0.1:9/v2.1", timeouts=timeouts,
                 extra=f"kubernetes: {{kubeconfig: {kubeconfig}}}\ngate: {gate}\n")


def test_a_kubernetes_api_that_never_answers_makes_the_gate_skip_with_a_warning(
        tmp_path, silent_server):
    write_k8s(tmp_path, silent_server, gate="{timeout: 0.5s}")
    result = scoctl(tmp_path, "gate", "--backend", "k8s", "--cpus", "2", "--no-elastic",
                    "--json")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] == "skipped"
    assert "node capacity unreadable" in verdict["reason"]
    assert "gate skipped" in result.stderr
    assert silent_server.accepted == 1  # one bounded read, no retries behind our back


def test_a_gate_that_fits_by_a_pool_without_readable_nodes_still_warns(tmp_path,
                                                                       silent_server):
    write_k8s(tmp_path, silent_server, gate="{timeout: 0.5s}")
    result = scoctl(tmp_path, "gate", "--backend", "k8s", "--cpus", "1", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["verdict"] == "fits"
    assert "node capacity unreadable" in result.stderr  # not a silent "fits"


def test_a_kubernetes_api_that_never_answers_fails_watch_after_the_api_timeout(
        tmp_path, silent_server):
    write_k8s(tmp_path, silent_server, gate="{}", timeouts="{api: 0.4s}")
    assert scoctl(tmp_path, "init").returncode == 0
    result = scoctl(tmp_path, "watch", "--source", "k8s")
    assert_api_failure(result, "Kubernetes")


@pytest.mark.nova
def test_a_persistent_429_with_retry_after_5_costs_one_retry_budget_not_minutes(tmp_path):
    emulator = NovaEmulator().start()
    try:
        emulator.inject(429, count=10_000, retry_after=5, methods=["POST"])
        write_config(tmp_path, emulator.url, timeouts="{api: 5s, retry_budget: 2s}")
        assert scoctl(tmp_path, "init").returncode == 0
        assert scoctl(tmp_path, "plan", "--claims", "claims.yaml").returncode == 0

        result = scoctl(tmp_path, "acquire", "--json")

        posts = [c for c in emulator.calls() if c[:2] == ("POST", "/v2.1/servers")]
    finally:
        emulator.stop()
    assert result.returncode == 1, result.stderr
    launches = json.loads(result.stdout)["launches"]
    assert len(launches) == 2  # one per pool
    # a 5 s wait never fits a 2 s budget: each launch was tried once, and nothing slept
    assert len(posts) == len(launches) and all(status == 429 for *_, status in posts)


@pytest.mark.parametrize("call", ["delete_managed", "bootstrap_tokens", "inference_services"])
def test_a_kubernetes_api_that_never_answers_fails_each_raw_read_after_the_api_timeout(
        tmp_path, silent_server, call):
    """The reads that take raw JSON (a managed object before its teardown, the bootstrap token
    Secrets, KServe's InferenceServices) carry the API timeout too: one bounded call each."""
    from scoctl.adapters.kubernetes import KubernetesCluster
    from scoctl.errors import TemporaryError

    write_k8s(tmp_path, silent_server, gate="{}")
    cluster = KubernetesCluster(str(tmp_path / "kubeconfig"), read_timeout=0.3)
    reads = {"delete_managed": lambda: cluster.delete_managed("Deployment", "shop", "web"),
             "bootstrap_tokens": cluster.bootstrap_tokens,
             "inference_services": cluster.inference_services}
    try:
        with pytest.raises(TemporaryError, match="Kubernetes API .*(Timeout|timed out)"):
            reads[call]()
    finally:
        cluster.close()
    assert silent_server.accepted == 1
