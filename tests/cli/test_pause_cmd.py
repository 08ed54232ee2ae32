"""`scoctl pause` and `scoctl resume` through the real entry point: the pause is in the state
(`status --json`'s `paused`, `top`), bad input is exit 2 with nothing recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.state import Cli


@pytest.fixture
def config(tmp_path: Path, cli: Cli) -> Path:
    path = nova_config(tmp_path, "nowhere")
    done = cli("--config", str(path), "init")
    assert done.code == 0, done.stderr
    return path


def test_pause_for_a_while_shows_in_status_and_resume_ends_it(cli: Cli, config: Path,
                                                            tmp_path: Path) -> None:
    done = cli("--config", str(config), "pause", "--disruptions", "--for", "2m",
               "--reason", "INC-4711", "--json")
    assert done.code == 0, done.stderr
    made = json.loads(done.stdout)["paused"]
    assert list(made) == ["disruptions"] and made["disruptions"]["reason"] == "INC-4711"
    status = json.loads(cli("--config", str(config), "status", "--json").stdout)
    assert list(status["paused"]) == ["disruptions"]
    assert status["paused"]["disruptions"]["until"] is not None
    human = cli("--config", str(config), "status")
    assert "PAUSED: disruptions paused until" in human.stdout
    frame = cli("--config", str(config), "top", "--once")
    assert "INC-4711" in frame.stdout
    done = cli("--config", str(config), "resume", "--json")
    assert json.loads(done.stdout) == {"resumed": ["disruptions"]}
    assert json.loads(cli("--config", str(config), "status", "--json").stdout)["paused"] == {}
    with open_store(tmp_path / "state.db") as store:
        assert [e.token for e in store.events()][-2:] == ["PAUSED", "RESUMED"]


def test_pause_without_a_flag_pauses_both(cli: Cli, config: Path) -> None:
    done = cli("--config", str(config), "pause", "--reason", "Nova upgrade", "--json")
    assert done.code == 0, done.stderr
    assert sorted(json.loads(done.stdout)["paused"]) == ["disruptions", "launches"]
    assert json.loads(done.stdout)["paused"]["launches"]["until"] is None


@pytest.mark.parametrize(("args", "named"), [
    (["--disruptions"], "--reason"),
    (["--for", "2m", "--until", "2099-01-01T00:00:00Z", "--reason", "x"], "--until"),
    (["--until", "2001-01-01T00:00:00Z", "--reason", "x"], "--until"),
    (["--until", "tomorrow", "--reason", "x"], "--until"),
    (["--for", "a while", "--reason", "x"], "--for"),
])
def test_bad_pause_input_is_exit_2_naming_the_option_and_records_nothing(
        cli: Cli, config: Path, tmp_path: Path, args: list[str], named: str) -> None:
    done = cli("--config", str(config), "pause", *args)
    assert done.code == 2
    assert named in done.stderr
    with open_store(tmp_path / "state.db") as store:
        assert store.pauses() == [] and store.events() == []


def test_resume_with_nothing_paused_says_so(cli: Cli, config: Path) -> None:
    done = cli("--config", str(config), "resume")
    assert done.code == 0 and "nothing was paused" in done.stdout
