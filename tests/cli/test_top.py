"""`scoctl top` (design: Visibility): one frame with --once (plain when piped), and the live view
in a
real terminal (tmux) as a person sees it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from scoctl.cli.top import bar
from scoctl.core.model import InstanceRecord, PlanUnitRecord, PlanWorkloadRecord
from scoctl.services.claims import record_claim
from scoctl.services.tokens import record_token
from scoctl.state import open_store

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scoctl" / "data" / "demo.yaml"


def two_workloads(path: Path) -> None:
    """web (3 units over two pools of row-a and row-b, 2 Ready) and batch (1 unit, booting)."""
    with open_store(path, create=True) as store:
        for slug in ("web", "batch"):
            store.ensure_workload(slug, kind="deployment", source="k8s", contract="T1")
            record_token(store, slug, "POD_QUEUED")
            record_claim(store, slug, contract="T1", requests={"cpu": 4000}, pods=3,
                         largest_pod={"cpu": 4000}, source="k8s")
        store.commit_plan(ranking="r-1", full=True, plans=[
            PlanWorkloadRecord("web", 0, 1, "T1", "r-1", True, False, (), (
                PlanUnitRecord("c4.xlarge.row-a.res", "committed", "row-a", 2, 0.10, 1.0),
                PlanUnitRecord("c4.large.row-b.spot", "reclaimable", "row-b", 1, 0.20, 1.0))),
            PlanWorkloadRecord("batch", 0, 1, "T1", "r-1", True, False, (), (
                PlanUnitRecord("c4.large.row-a.spot", "reclaimable", "row-a", 1, 0.15, 1.0),)),
        ])
        for i, status in enumerate(("ready", "ready", "draining")):
            store.upsert_instance(InstanceRecord(
                id=f"s{i}", name=f"sco-web-{i}", region="sim-region", workload="web",
                pool="c4.xlarge.row-a.res", generation=1, launch_id="l-1", status=status,  # type: ignore[arg-type]
                created=store.now(), updated=store.now()))
        store.upsert_instance(InstanceRecord(
            id="b0", name="sco-batch-0", region="sim-region", workload="batch",
            pool="c4.large.row-a.spot", generation=1, launch_id="l-2", status="building",  # type: ignore[arg-type]
            created=store.now(), updated=store.now()))


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    out["PYTHONPATH"] = str(REPO)
    out.pop("COLUMNS", None)  # the terminal's size is tmux's, not the runner's (pytest-xdist
    out.pop("LINES", None)  # workers export COLUMNS=80 and LINES=24)
    return out


def workload_row(screen: str, name: str) -> list[str] | None:
    """The cells of the Workloads table's row of `name` (the first table of the frame)."""
    for line in screen.splitlines():
        cells = [c.strip() for c in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == name and len(cells) == 6:
            return cells
    return None


def test_a_bar_is_the_share_against_the_cap() -> None:
    assert bar(0.15, 0.15, 10) == "██████████ 15%/15%"
    assert bar(0.075, 0.15, 10) == "█████····· 8%/15%"
    assert bar(0.30, 0.15, 10) == "██████████ 30%/15%!"
    assert bar(0.0, 0.15, 4) == "···· 0%/15%"
    assert bar(0.27, None, 10) == "███······· 27% (committed: no cap)"  # never flagged


def test_top_once_prints_one_plain_frame_naming_workloads_pools_and_bars(tmp_path: Path) -> None:
    state = tmp_path / "s.db"
    two_workloads(state)
    result = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(DEMO), "--state",
                             str(state), "top", "--once"], env=env(), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "\x1b[" not in text  # piped: no terminal codes
    lines = text.splitlines()
    assert workload_row(text, "web") == ["web", "queued", "3", "3", "2", "ok"]
    assert workload_row(text, "batch") == ["batch", "queued", "3", "1", "0", "ok"]
    # a reclaimable pool's share against the contract's pool cap (T1: 15%), a group's
    # reclaimable share against 30%; a committed pool has no cap (issue 49: not "27%/15%!")
    assert any("c4.xlarge.row-a.res" in line and "10% (committed: no cap)" in line
               for line in lines)
    assert not any("c4.xlarge.row-a.res" in line and "/15%" in line for line in lines)
    assert any("c4.large.row-b.spot" in line and "20%/15%!" in line for line in lines)
    assert any("batch" in line and "row-a" in line and "15%/30%" in line for line in lines)
    assert not any("web" in line and "row-a" in line and "%/30%" in line for line in lines)
    assert any("sco-batch-0" in line and "building" in line for line in lines)  # in flight
    assert any("sco-web-2" in line and "draining" in line for line in lines)


def test_top_live_in_a_real_terminal(tmp_path: Path) -> None:
    """tmux runs `scoctl top` in an 120×50 terminal; `capture-pane` shows what a person sees:
    the workloads, pools and bars, redrawn when the state changes."""
    tmux = shutil.which("tmux")
    assert tmux is not None, "tmux is installed by scripts/setup-system.sh"
    state = tmp_path / "s.db"
    two_workloads(state)
    socket = str(tmp_path / "tmux.sock")
    command = (f"{sys.executable} -m scoctl --config {DEMO} --state {state} top "
               "--interval 0.5")
    subprocess.run([tmux, "-S", socket, "new-session", "-d", "-x", "120", "-y", "50",
                    "-s", "top", command], env=env(), check=True, timeout=10)
    try:
        def screen() -> str:
            return subprocess.run([tmux, "-S", socket, "capture-pane", "-p", "-t", "top"],
                                  capture_output=True, text=True, check=True,
                                  timeout=10).stdout

        deadline = time.monotonic() + 60
        while "Leaders" not in (shown := screen()):
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)
        assert "web" in shown and "batch" in shown
        assert "c4.xlarge.row-a.res" in shown and "█" in shown and "20%/15%!" in shown
        with open_store(state) as store:  # one more Ready unit: the next frame shows it
            store.upsert_instance(InstanceRecord(
                id="b0", name="sco-batch-0", region="sim-region", workload="batch",
                pool="c4.large.row-a.spot", generation=1, launch_id="l-2", status="ready",  # type: ignore[arg-type]
                created=store.now(), updated=store.now()))
        deadline = time.monotonic() + 60
        while workload_row(shown := screen(), "batch") != ["batch", "queued", "3", "1", "1",
                                                             "ok"]:
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)
    finally:
        pid = subprocess.run([tmux, "-S", socket, "list-panes", "-t", "top", "-F",
                              "#{pane_pid}"], capture_output=True, text=True, timeout=10)
        subprocess.run([tmux, "-S", socket, "kill-server"], timeout=10)
        for line in pid.stdout.split():
            try:
                os.kill(int(line), 9)
            except ProcessLookupError:
                pass
