"""Hostile spool files (issue 28, items 4 and 5): whoever may write the spool (its group) can
drop a FIFO, a symbolic link to /dev/zero, a huge or broken file. Each is refused before it is
read whole, moved to ``spool/rejected/`` with one warning, and the pass goes on — in the real
spool folder, through the reading path `watch` uses, and as a real `scoctl watch --once`."""

from __future__ import annotations

import json
import logging
import os
import stat
import time
from pathlib import Path

import pytest

from scoctl.clock import FixedClock
from scoctl.config.schema import Config, load_config
from scoctl.host.spool import (
    MAX_EVENT_BYTES,
    NOTICE_KIND,
    ensure_spool,
    notice_dir,
    pending_events,
    rejected_dir,
    write_event,
)
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.notice import ingest_spool
from scoctl.stages.watch import run_pass
from scoctl.state import open_store
from tests.builders import BOOTSTRAP
from tests.fixtures.state import Cli

TS = "2026-01-01T00:00:00.000000Z"


def config_in(tmp_path: Path, extra: str = "") -> Path:
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
{BOOTSTRAP}{extra}""", encoding="utf-8")
    return path


def hostile(spool: Path) -> dict[str, Path]:
    """A FIFO, a link to /dev/zero, a file one byte over the limit and one that is no JSON,
    named as events are, before one real event (so a reader that blocks never reaches it)."""
    ensure_spool(spool)
    files = {name: spool / f"20250101T00000{i}000000Z-00000001-{name}.json"
             for i, name in enumerate(("fifo", "zero", "huge", "junk"))}
    os.mkfifo(files["fifo"], 0o664)
    files["zero"].symlink_to("/dev/zero")
    files["huge"].write_bytes(b" " * (MAX_EVENT_BYTES + 1))
    files["junk"].write_bytes(b"{not json")
    return files


def assert_rejected(spool: Path, files: dict[str, Path]) -> None:
    rejected = rejected_dir(spool)
    assert not [p for p in files.values() if os.path.lexists(p)]
    assert sorted(p.name for p in rejected.iterdir()) == sorted(p.name for p in files.values())
    assert stat.S_ISFIFO(os.lstat(rejected / files["fifo"].name).st_mode)  # moved, not opened
    assert os.path.islink(rejected / files["zero"].name)
    mode = os.stat(rejected).st_mode
    assert mode & stat.S_ISGID and mode & stat.S_IWGRP  # as ensure_spool makes the others


def test_watch_refuses_each_hostile_file_once_and_records_the_real_event(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config: Config = load_config(config_in(tmp_path))
    files = hostile(config.spool)
    write_event(config.spool, ts=TS, token="POD_QUEUED", workload="web")
    with open_store(tmp_path / "state.db", clock=FixedClock(), create=True) as store, \
            caplog.at_level(logging.WARNING):
        first = run_pass(config, store, FixedClock(), sources=())
        again = run_pass(config, store, FixedClock(), sources=())
        assert [e.token for e in store.events()] == ["POD_QUEUED"]
    assert (first.spool_tokens, again.spool_tokens) == (1, 0)
    assert_rejected(config.spool, files)
    warned = [r.getMessage() for r in caplog.records if "rejected" in r.getMessage()]
    assert len(warned) == len(files)  # one each, on the pass that found it
    for name, why in (("fifo", "not a regular file"), ("zero", "symbolic link"),
                      ("huge", f"larger than {MAX_EVENT_BYTES}"), ("junk", "not a JSON")):
        assert any(files[name].name in w and why in w for w in warned), (name, warned)


def test_the_notice_reader_warns_for_what_it_drops_too(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = load_config(config_in(tmp_path))
    files = hostile(notice_dir(config.spool))
    with open_store(tmp_path / "state.db", clock=FixedClock(), create=True) as store, \
            caplog.at_level(logging.WARNING):
        assert ingest_spool(config, store) == 0
        assert list(pending_events(notice_dir(config.spool), NOTICE_KIND)) == []
    assert not [p for p in files.values() if os.path.lexists(p)]
    assert len(list(rejected_dir(config.spool).iterdir())) == len(files)
    assert len([r for r in caplog.records if "rejected" in r.getMessage()]) == len(files)


def test_a_real_watch_once_returns_promptly_past_a_fifo_and_dev_zero(
        cli: Cli, tmp_path: Path, k8s_emulator: K8sEmulator, k8s_kubeconfig: Path) -> None:
    config = config_in(tmp_path, f"kubernetes: {{kubeconfig: {k8s_kubeconfig}}}\n")
    spool = tmp_path / "spool"
    files = hostile(spool)
    write_event(spool, ts=TS, token="POD_QUEUED", workload="web")
    started = time.monotonic()
    done = cli("--config", str(config), "watch", "--source", "k8s", "--once", "--json",
               timeout=30)
    assert done.code == 0, done.stderr
    assert time.monotonic() - started < 20
    assert json.loads(done.stdout)["spool_events"] == 1
    assert_rejected(spool, files)
    assert len([line for line in done.stderr.splitlines() if "rejected" in line]) == len(files)


def test_an_emit_the_reader_would_drop_is_refused_naming_the_option(
        cli: Cli, tmp_path: Path) -> None:
    config = config_in(tmp_path)
    done = cli("--config", str(config), "emit", "POD_QUEUED", "--workload", "web",
               "--detail", "note=" + "x" * 70_000)
    assert done.code == 2, (done.stdout, done.stderr)
    assert "--detail" in done.stderr and str(MAX_EVENT_BYTES) in done.stderr
    assert list((tmp_path / "spool").glob("*.json")) == []


def test_control_characters_a_hook_spooled_are_escaped_before_they_are_stored(
        tmp_path: Path) -> None:
    config = load_config(config_in(tmp_path))
    ensure_spool(config.spool)
    raw = {"ts": TS, "token": "POD_QUEUED", "workload": "web",
           "detail": {"note": "a\x1b[2Jb\nc", "bell\x07": ["\u202eevil"]}}
    (config.spool / "20260101T000000000000Z-00000001-ctrl.json").write_text(json.dumps(raw))
    with open_store(tmp_path / "state.db", clock=FixedClock(), create=True) as store:
        assert run_pass(config, store, FixedClock(), sources=()).spool_tokens == 1
        [event] = store.events()
    assert dict(event.detail) == {"note": "a\\x1b[2Jb\\nc", "bell\\x07": ["\\u202eevil"]}
