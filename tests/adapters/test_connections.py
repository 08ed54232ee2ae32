"""Issue 17 item 6: one openstacksdk connection per region per process, however many passes
`scoctl run --interval` makes, closed at exit.

A real `scoctl run --interval` talks to the Nova emulator (each pass's reconcile lists the
region's servers); its TCP sockets to the emulator are counted from outside (psutil, an
openstacksdk dependency) after the 3rd and the 20th pass. Before the fix each pass opened a
Connection that was never closed: 20 passes left 20-odd sockets.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from scoctl.sim.nova_emulator import NovaEmulator
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml

pytestmark = pytest.mark.nova
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def emulator() -> Iterator[NovaEmulator]:
    with NovaEmulator() as emu:
        yield emu


def sockets_to(pid: int, port: int) -> int:
    return sum(1 for c in psutil.Process(pid).net_connections(kind="tcp")
               if c.raddr and c.raddr.port == port)


def test_run_interval_keeps_one_connection_per_region_over_twenty_passes(tmp_path, emulator):
    write_clouds_yaml(tmp_path, "emu", emulator.url, "p1")
    nova_config(tmp_path, "emu")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "OS_"))}
    env["PYTHONPATH"] = str(REPO)
    base = [sys.executable, "-m", "scoctl", "--config", "config.yaml"]
    assert subprocess.run([*base, "init"], cwd=tmp_path, env=env).returncode == 0
    proc = subprocess.Popen([*base, "run", "--interval", "0.1s", "--json"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    counts: dict[int, int] = {}
    try:
        assert proc.stdout is not None
        for passes in range(1, 21):
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
            stages = {s["step"]: s for s in json.loads(line)["steps"]}
            assert stages["reconcile"]["ok"], stages  # it talked to Nova this pass
            if passes in (3, 20):
                counts[passes] = sockets_to(proc.pid, emulator.port)
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=30)  # reads and closes both pipes
    assert proc.returncode == 0, stderr
    assert 1 <= counts[20] <= counts[3] <= 2, counts
    lists = [c for c in emulator.calls() if c[1] == "/v2.1/servers/detail"]
    assert len(lists) >= 20  # every pass listed the servers over that one connection


def test_the_region_connection_is_shared_by_every_adapter_and_closed_by_close_connections(
        tmp_path, emulator):
    from scoctl.adapters.factory import close_connections, cloud_for
    from scoctl.config.schema import load_config

    write_clouds_yaml(tmp_path, "emu", emulator.url, "p1")
    config = load_config(nova_config(tmp_path, "emu"))
    region = config.regions[0]
    first = cloud_for(config, region)
    first.servers()
    second = cloud_for(config, region)
    second.servers()
    assert first.connection is second.connection  # type: ignore[attr-defined]
    assert sockets_to(os.getpid(), emulator.port) == 1

    close_connections()

    assert sockets_to(os.getpid(), emulator.port) == 0
    third = cloud_for(config, region)
    assert third.connection is not first.connection  # type: ignore[attr-defined]
    third.servers()
    close_connections()
