"""The command-line contract of design: CLI: global options, exit codes, JSON, start-up."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scoctl.host.lock import run_lock

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "example.yaml"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_help_imports_neither_kubernetes_nor_openstack():
    code = ("import sys; from scoctl.cli.app import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'openstack')]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"


def test_every_command_has_help_with_an_example(cli):
    import click
    import typer.main

    from scoctl.cli.app import app

    group = typer.main.get_command(app)
    leaves: list[tuple[str, ...]] = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        else:
            leaves.append(path)

    walk(group, ())
    names = {path[0] for path in leaves}
    assert {"init", "status", "events", "emit", "config", "gate", "plan"} <= names
    for path in leaves:
        result = cli(*path, "--help")
        assert result.code == 0, result.stderr
        assert "Example" in result.stdout, f"scoctl {' '.join(path)} --help has no example"


def test_the_bundled_demo_config_is_used_with_a_warning(cli):
    result = cli("config", "check", "--json")
    assert result.code == 0, result.stderr
    assert "bundled demo config" in result.stderr
    summary = result.json()
    assert summary["pools"] == {"total": 71, "committed": 8, "reclaimable": 63, "groups": 9,
                                "depth": summary["pools"]["depth"]}


def test_the_example_config_is_valid(cli):
    result = cli("--config", str(EXAMPLE), "config", "check")
    assert result.code == 0, result.stderr
    assert "valid" in result.stdout


@pytest.mark.parametrize(("text", "where"), [
    ("regions: [\n", "config.yaml:2"),
    ("state: x.db\nregions:\n  - name: r\n    launch: {image: i}\nranking: {id: r, scores: {}}\n"
     "pools:\n  - {name: p, az: a, flavor: nope, group: g, tier: reclaimable}\n",
     "config.yaml:7: pools[0].flavor"),
    ("state: x.db\nregions:\n  - name: r\n    launch: {image: i}\nranking: {id: r, scores: {}}\n"
     "flavors:\n  - {name: f, vcpus: 4, ram: lots}\n", "config.yaml:7: flavors[0].ram"),
    ("state: x.db\nbogus: 1\n", "config.yaml:2: bogus"),
])
def test_a_malformed_config_names_its_file_line_and_field_and_exits_2(cli, tmp_path, text,
                                                                      where):
    path = write_config(tmp_path, text)
    result = cli("--config", str(path), "config", "check")
    assert result.code == 2
    assert where in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_init_creates_the_state_and_status_shows_it_as_json(cli, tmp_path):
    state = tmp_path / "s.db"
    assert cli("--state", str(state), "init").code == 0
    result = cli("--state", str(state), "status", "--json")
    assert result.code == 0, result.stderr
    assert result.json() == {"workloads": [], "claims": [],
                             "plan": {"generation": 0, "ranking": None, "workloads": []},
                             "instances": [], "leaders": [], "disruption": [], "drift": [],
                             "rebalance": [], "buffers": [], "paused": {},
                             "latency": {m: {"samples": 0, "p50": None, "p99": None}
                                         for m in ("placement_decision", "pending_to_ready")}}


def test_status_without_a_state_file_says_to_run_init(cli, tmp_path):
    result = cli("--state", str(tmp_path / "none.db"), "status")
    assert result.code == 2
    assert "scoctl init" in result.stderr


def test_a_held_lock_gives_exit_75(cli, tmp_path):
    state = tmp_path / "s.db"
    assert cli("--state", str(state), "init").code == 0
    with run_lock(state):
        result = cli("--state", str(state), "init", "--wait", "0.2")
    assert result.code == 75
    assert "lock" in result.stderr


def test_read_only_commands_do_not_block_on_the_lock(cli, tmp_path):
    state = tmp_path / "s.db"
    assert cli("--state", str(state), "init").code == 0
    with run_lock(state):
        assert cli("--state", str(state), "status").code == 0
        assert cli("--state", str(state), "events").code == 0


def test_a_bad_option_is_a_usage_error_with_exit_2(cli):
    result = cli("status", "--no-such-option")
    assert result.code == 2
    assert "No such option" in result.stderr


def test_emit_drops_a_token_in_the_spool_without_the_lock(cli, tmp_path):
    config = EXAMPLE.read_text().replace("spool: /var/spool/scoctl",
                                         f"spool: {tmp_path / 'spool'}")
    path = write_config(tmp_path, config)
    result = cli("--config", str(path), "emit", "SLURM_JOB_STATUS", "--workload", "train-7",
                 "--job-id", "42", "--detail", "state=COMPLETED", "--json")
    assert result.code == 0, result.stderr
    files = list((tmp_path / "spool").glob("*.json"))
    assert len(files) == 1
    body = json.loads(files[0].read_text())
    assert body["token"] == "SLURM_JOB_STATUS"
    assert body["detail"] == {"state": "COMPLETED", "job_id": "42"}


def test_emit_in_hook_mode_exits_0_even_when_it_fails(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = EXAMPLE.read_text().replace("spool: /var/spool/scoctl", f"spool: {blocker}/spool")
    path = write_config(tmp_path, config)
    failing = cli("--config", str(path), "emit", "POD_QUEUED", "--workload", "w")
    hooked = cli("--config", str(path), "emit", "POD_QUEUED", "--workload", "w", "--hook")
    assert failing.code == 1
    assert hooked.code == 0


def test_emit_refuses_a_bad_slug_with_exit_2(cli):
    result = cli("emit", "POD_QUEUED", "--workload", "Not_A_Slug")
    assert result.code == 2
    assert "--workload" in result.stderr
