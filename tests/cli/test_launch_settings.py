"""Launch settings are needed only where instances are launched (design: Acquirer, Schemas): a
what-if
config without `regions[].launch` runs gate, watch and plan; `acquire` and `config check` name
the missing field (exit 2) before anything is called or written."""

from __future__ import annotations

import json
from pathlib import Path

from scoctl.sim.k8s_emulator import K8sEmulator, make_node
from scoctl.state import open_store
from tests.builders import BOOTSTRAP


def what_if_config(tmp_path: Path, kubeconfig: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path / "state.db"}
spool: {tmp_path / "spool"}
budget_dir: {tmp_path / "budget"}
regions:
  - {{name: region-a}}
flavors:
  - {{name: c16, vcpus: 16, ram: 64Gi}}
pools:
  - {{name: c16.az1.spot, region: region-a, az: az1, flavor: c16, group: g1,
     tier: reclaimable, depth: 10}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{c16.az1.spot: 0.9}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
kubernetes: {{kubeconfig: {kubeconfig}}}
{BOOTSTRAP}""", encoding="utf-8")
    return path


def test_gate_watch_and_plan_run_without_launch_settings(
        cli, tmp_path: Path, k8s_emulator: K8sEmulator, k8s_kubeconfig: Path) -> None:
    k8s_emulator.add(make_node("n1", cpu="4", memory="16Gi"))
    config = what_if_config(tmp_path, k8s_kubeconfig)
    gate = cli("--config", str(config), "gate", "--backend", "k8s", "--cpus", "2", "--json")
    assert gate.code == 0, gate.stderr
    assert gate.json()["verdict"] == "fits"
    watch = cli("--config", str(config), "watch", "--source", "k8s", "--once", "--json")
    assert watch.code == 0, watch.stderr
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps({"claims": [
        {"workload": "web", "contract": "T1", "requests": {"cpu": 32, "memory": "64Gi"},
         "largest_pod": {"cpu": 4, "memory": "8Gi"}}]}))
    plan = cli("--config", str(config), "plan", "--claims", str(claims), "--json")
    assert plan.code == 0, plan.stderr
    assert plan.json()["workloads"][0]["pools"][0]["units"] == 2


def test_acquire_and_config_check_name_the_missing_launch_field(
        cli, tmp_path: Path, k8s_kubeconfig: Path) -> None:
    config = what_if_config(tmp_path, k8s_kubeconfig)
    check = cli("--config", str(config), "config", "check")
    assert check.code == 2
    assert "regions[0].launch: is required to launch instances (scoctl acquire)" in check.stderr
    open_store(tmp_path / "state.db", create=True).close()
    for args in (["acquire", "--dry-run"], ["acquire"]):
        result = cli("--config", str(config), *args)
        assert result.code == 2, (args, result.stderr)
        assert "regions[0].launch" in result.stderr and "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1
    with open_store(tmp_path / "state.db") as store:
        assert store.events() == [] and store.launches() == []


def test_the_missing_launch_field_names_the_config_file_and_the_regions_line(
        cli, tmp_path: Path, k8s_kubeconfig: Path) -> None:
    """Issue 28 item 14: ``regions[].launch`` errors named no line, unlike every other field."""
    config = what_if_config(tmp_path, k8s_kubeconfig)
    line = config.read_text().splitlines().index("  - {name: region-a}") + 1
    check = cli("--config", str(config), "config", "check")
    assert check.code == 2
    assert f"{config}:{line}: regions[0].launch: is required" in check.stderr
    open_store(tmp_path / "state.db", create=True).close()
    result = cli("--config", str(config), "acquire")
    assert result.code == 2 and f"{config}:{line}: regions[0].launch" in result.stderr
