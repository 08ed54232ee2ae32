"""`scoctl run --interval` as a real process: it loops, and SIGTERM / SIGINT stop it cleanly
after the pass in progress (exit 0, run lock released), against the Nova emulator.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scoctl.sim.nova_emulator import NovaEmulator
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Loop:
    home: Path
    config: Path

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG", "SLURM_"))}
        # no Kubernetes, no Slurm on this "host": watch is skipped, the rest runs
        env.update(PYTHONPATH=str(REPO), HOME=str(self.home),
                   SLURM_CONF=str(self.home / "no-slurm.conf"))
        return env

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(self.config),
                                 *args], cwd=self.home, env=self.env(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture
def loop(tmp_path: Path) -> Iterator[Loop]:
    emulator = NovaEmulator({"timing": {"schedule": 0.0, "recheck": 0.0, "active": 0.0}})
    emulator.start()
    write_clouds_yaml(tmp_path, "loop-test", emulator.url, "loop-project")
    config = nova_config(tmp_path, "loop-test")
    open_store(tmp_path / "state.db", create=True).close()
    try:
        yield Loop(tmp_path, config)
    finally:
        emulator.stop()


def read_passes(process: subprocess.Popen[str], count: int, timeout: float = 60) -> list[dict]:
    """The first `count` JSON lines (one per pass) the loop prints."""
    assert process.stdout is not None
    passes: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(passes) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(passes)} passes in {timeout} s"
        ready, _, _ = select.select([process.stdout], [], [], left)
        if ready:
            line = process.stdout.readline()
            assert line, "the loop ended early"
            passes.append(json.loads(line))
    return passes


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_the_loop_runs_pass_after_pass_and_stops_cleanly_on_a_signal(
    loop: Loop, sig: signal.Signals,
) -> None:
    process = loop.start("run", "--interval", "0.2s", "--json")
    try:
        passes = read_passes(process, 3)
        process.send_signal(sig)
        _, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()  # reaps it and closes the pipes

    assert process.returncode == 0, err
    assert f"{sig.name}: stopped" in err
    assert "Traceback" not in err
    for one in passes:
        assert one["ok"] is True, one
        assert [s["step"] for s in one["steps"]] == ["watch", "plan", "acquire", "reconcile",
                                                       "notice"]
    # the run lock went with the process: a one-shot run gets it at once
    once = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(loop.config), "run",
                           "--once", "--json"], cwd=loop.home, env=loop.env(), text=True,
                          capture_output=True, timeout=120, check=False)
    assert once.returncode == 0, once.stderr


def test_bad_intervals_are_usage_errors(loop: Loop) -> None:
    for args in (["--interval", "soon"], ["--interval", "0s"], ["--once", "--interval", "1s"]):
        process = loop.start("run", *args)
        _, err = process.communicate(timeout=60)
        assert process.returncode == 2, (args, err)


def test_a_stop_request_ends_the_pause_and_a_second_ctrl_c_interrupts_at_once() -> None:
    from scoctl.runner.signals import Signals

    stop = Signals()
    assert stop.pause(0.01) is False  # nothing asked: the pause runs out
    stop.on_stop(signal.SIGTERM, None)
    started = time.monotonic()
    assert stop.pause(60) is True and time.monotonic() - started < 1
    assert stop.stop == ["SIGTERM"]
    assert stop.event.wait(5)  # the threads that wait on an Event are told too
    with pytest.raises(KeyboardInterrupt):
        stop.on_stop(signal.SIGINT, None)  # a Ctrl-C after a stop request: stop now
    with stop.installed():  # installed for the loop, restored afterwards
        assert signal.getsignal(signal.SIGTERM) == stop.on_stop
        assert signal.getsignal(signal.SIGHUP) != stop.on_hup  # no reload asked for
    assert signal.getsignal(signal.SIGTERM) != stop.on_stop
    with stop.installed(reload=True):
        assert signal.getsignal(signal.SIGHUP) == stop.on_hup
    assert signal.getsignal(signal.SIGHUP) != stop.on_hup
