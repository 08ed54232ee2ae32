"""The commands on a PostgreSQL state: init, status leaders, a non-leader's exit 75, the gate
and hooks through the spool, and the state URL's checks (design: CLI, State, Runners)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoctl.sim.k8s_emulator import K8sEmulator, make_node
from scoctl.state.postgresql import connect, leases
from tests.e2e.runners import write_config
from tests.fixtures.postgres import PgState
from tests.fixtures.state import Cli


@pytest.fixture
def config(pg_state: PgState, tmp_path: Path) -> Path:
    return write_config(tmp_path, url=pg_state.url, password_file=pg_state.password_file,
                        nova_url="http://127.0.0.1:9/unused", project="cli", ttl=15,
                        interval_dir=tmp_path)


def test_init_creates_then_finds_the_database_up_to_date(cli: Cli, config: Path) -> None:
    first = cli("--config", str(config), "init", "--json")
    assert first.code == 0, first.stderr
    assert json.loads(first.stdout)["created"] is True
    again = cli("--config", str(config), "init", "--json")
    body = json.loads(again.stdout)
    assert (body["created"], body["migrated_from"]) == (False, None)
    assert "scoctl:" not in body["state"].split("@")[0].split("//")[1]  # no password shown


def test_a_non_leaders_acquire_and_reconcile_exit_75_naming_the_leader(
        cli: Cli, config: Path, pg_state: PgState) -> None:
    assert cli("--config", str(config), "init").code == 0
    with connect(pg_state.url, password_file=pg_state.password_file) as other:
        leases.take(other, "region-a", "other-host:4242", None, 60)
    for command in ("acquire", "reconcile"):
        result = cli("--config", str(config), command, "--region", "region-a")
        assert result.code == 75, (command, result.stderr)
        assert "not the leader" in result.stderr and "other-host:4242" in result.stderr
    status = cli("--config", str(config), "status", "--json")
    [leader] = json.loads(status.stdout)["leaders"]
    assert (leader["region"], leader["holder"], leader["generation"]) == (
        "region-a", "other-host:4242", 1)
    assert leader["expires_at"].endswith("Z")
    # read-only commands and dry-runs work anywhere
    assert cli("--config", str(config), "acquire", "--dry-run").code == 0
    assert cli("--config", str(config), "plan", "--json").code == 0


def test_the_gate_and_hooks_record_through_the_spool_without_database_credentials(
        cli: Cli, config: Path, tmp_path: Path, k8s_emulator: K8sEmulator,
        k8s_kubeconfig: Path) -> None:
    k8s_emulator.add(make_node("cpu-small", cpu="4", memory="16Gi"))
    text = config.read_text().replace("state_password_file:", "# no credentials:")
    blind = tmp_path / "hook.yaml"
    blind.write_text(text + f"kubernetes: {{kubeconfig: {k8s_kubeconfig}}}\n")
    gate = cli("--config", str(blind), "gate", "--backend", "k8s", "--cpus", "512",
               "--no-elastic", "--workload", "web", "--json")
    assert gate.code == 3, gate.stderr
    assert gate.json()["verdict"] == "over_capacity"
    emit = cli("--config", str(blind), "emit", "SLURM_JOB_SUBMITTED", "--workload", "web",
               "--job-id", "7", "--hook")
    assert emit.code == 0, emit.stderr
    spooled = sorted(p.name for p in (tmp_path / "spool").rglob("*.json"))
    assert len(spooled) == 2


@pytest.mark.parametrize(("state", "message"), [
    ("postgresql://scoctl:hunter2@127.0.0.1:5432/db", "carries a password"),
    ("mysql://u@h/db", "not a state backend"),
    ("postgresql://127.0.0.1:5432/", "postgresql://USER@HOST:PORT/DB"),
])
def test_a_bad_state_url_is_exit_2_naming_the_field_and_never_the_password(
        cli: Cli, tmp_path: Path, state: str, message: str) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {state}\nregions:\n  - {{name: r1, launch: {{image: i}}}}\n"
                      "flavors: []\npools: []\nranking: {id: r, scores: {}}\nworkloads: []\n")
    result = cli("--config", str(config), "status")
    assert result.code == 2, result.stderr
    assert "state" in result.stderr and message in result.stderr
    assert "hunter2" not in result.stderr
    option = cli("--state", state, "status")
    assert option.code == 2 and "--state" in option.stderr and "hunter2" not in option.stderr


def test_a_password_file_others_may_read_is_refused_as_libpq_refuses_it(
        cli: Cli, config: Path, pg_state: PgState) -> None:
    """Issue 28 item 14: a ``state_password_file`` at 0644 was accepted; libpq ignores a
    password file that its group or the world may read, and so does scoctl (exit 2)."""
    assert cli("--config", str(config), "init").code == 0
    pg_state.password_file.chmod(0o644)
    try:
        result = cli("--config", str(config), "status")
    finally:
        pg_state.password_file.chmod(0o600)
    assert result.code == 2, result.stderr
    assert "state_password_file" in result.stderr and "0644" in result.stderr
    assert "chmod 600" in result.stderr
    assert cli("--config", str(config), "status").code == 0
