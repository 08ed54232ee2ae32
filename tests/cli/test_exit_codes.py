"""design: CLI: bad usage or input exits 2 with one line naming the argument, for every command.

(Exit 3 is covered by the gate tests, 4 by `plan --check`, 75 by the lock tests and 1 by the
unreachable-API tests.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.state import SCHEMA_VERSION, open_store

# (arguments after `--state S`, text the one error line must contain)
BAD_INPUT = [
    (["events", "--since", "yesterday-ish"], "--since"),
    (["events", "--workload", "Not_A_Slug"], "--workload"),
    (["events", "--limit", "0"], "--limit"),
    (["emit", "lower_case", "--workload", "w"], "TOKEN"),
    (["emit", "POD_QUEUED", "--workload", "Not_A_Slug"], "--workload"),
    (["emit", "POD_QUEUED", "--workload", "w", "--detail", "novalue"], "--detail"),
    (["gate", "--backend", "k8s", "--mem", "lots"], "--mem"),
    (["gate", "--backend", "k8s", "--cpus", "0"], "--cpus"),
    (["gate", "--backend", "k8s", "--cpus", "lots"], "--cpus"),
    (["gate", "--backend", "slurm", "--cpus", "500m"], "--cpus"),
    (["gate", "--backend", "slurm", "--mem", "16Gi"], "--mem"),
    (["gate", "--backend", "k8s", "--workload", "Not_A_Slug"], "--workload"),
    (["gate", "--backend", "mainframe"], "--backend"),
    (["plan", "--claims", "missing-claims.yaml"], "missing-claims.yaml"),
    (["plan", "--explain", "no-such-workload"], "--explain no-such-workload"),
    (["run", "--once", "--region", "atlantis"], "--region atlantis"),
    (["acquire", "--region", "atlantis", "--dry-run"], "--region"),
    (["reconcile", "--region", "atlantis", "--dry-run"], "--region"),
    (["run", "--interval", "never"], "--interval"),
    (["watch", "--source", "carrier-pigeon"], "--source"),
    (["sim", "up", "--scenario", "missing-scenario.yaml"], "missing-scenario.yaml"),
    (["sim", "reclaim", "--mode", "explode"], "--mode"),
    (["sim", "reclaim", "--count", "1", "--server", "x"], "--count"),
    (["status", "--no-such-option"], "--no-such-option"),
    (["no-such-command"], "no-such-command"),
]


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "s.db"
    open_store(path, create=True).close()
    return path


@pytest.mark.parametrize(("args", "named"), BAD_INPUT, ids=lambda v: " ".join(v)
                         if isinstance(v, list) else "")
def test_bad_input_exits_2_naming_the_argument_without_a_traceback(cli, state, args, named):
    result = cli("-q", "--state", str(state), *args)
    assert result.code == 2, (result.stdout, result.stderr)
    assert named in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    if result.stderr.startswith("scoctl: error:"):  # scoctl's own errors: one line
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_missing_config_file_is_refused_even_by_commands_that_do_not_read_it(cli, state):
    result = cli("--config", "nowhere.yaml", "--state", str(state), "status")
    assert result.code == 2
    assert result.stderr.strip() == "scoctl: error: --config nowhere.yaml: no such file"


def test_a_state_path_that_cannot_be_created_exits_2_naming_it(cli, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = cli("-q", "--state", str(blocker / "s.db"), "init")
    assert result.code == 2
    assert str(blocker / "s.db") in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_a_file_that_is_not_a_state_file_exits_2_and_is_left_alone(cli, tmp_path):
    path = tmp_path / "s.db"
    path.write_text("not sqlite at all, " * 100)
    before = path.read_bytes()
    for args in (["status"], ["events"], ["init"]):
        result = cli("-q", "--state", str(path), *args)
        assert result.code == 2, (args, result.stderr)
        assert "not a usable SQLite state file" in result.stderr
    assert path.read_bytes() == before


def test_init_migrates_an_older_state_file_and_says_so(cli, tmp_path):
    import sqlite3

    path = tmp_path / "s.db"
    sqlite3.connect(path).close()  # schema 0: an empty SQLite file
    result = cli("-q", "--state", str(path), "init", "--json")
    assert result.code == 0, result.stderr
    body = result.json()
    assert isinstance(body, dict)
    assert (body["created"], body["migrated_from"], body["schema_version"]) == (
        False, 0, SCHEMA_VERSION)
    again = cli("-q", "--state", str(path), "init", "--json").json()
    assert isinstance(again, dict) and again["migrated_from"] is None


def test_init_refuses_a_state_file_of_a_newer_scoctl_and_leaves_it_untouched(cli, tmp_path):
    import sqlite3

    path = tmp_path / "s.db"
    open_store(path, create=True).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    for args in (["init"], ["status"], ["events"]):
        result = cli("-q", "--state", str(path), *args)
        assert result.code == 2, (args, result.stderr)
        assert "newer scoctl" in result.stderr and "not modified" in result.stderr
    assert path.read_bytes() == before


def test_a_writer_waits_for_the_lock_up_to_wait_then_runs(cli, tmp_path):
    import threading
    import time

    from scoctl.host.lock import run_lock

    state = tmp_path / "s.db"
    open_store(state, create=True).close()
    held = threading.Event()
    release = threading.Event()

    def holder() -> None:
        with run_lock(state):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(5)
        timer = threading.Timer(1.0, release.set)
        timer.start()
        started = time.monotonic()
        result = cli("-q", "--state", str(state), "init", "--wait", "20")
        waited = time.monotonic() - started
    finally:
        release.set()
        thread.join(10)
    assert result.code == 0, result.stderr
    assert waited >= 0.9  # it waited for the holder instead of exiting 75 at once
