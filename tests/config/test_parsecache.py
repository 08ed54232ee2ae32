"""The per-user cache of parsed configs (`scoctl.config.parsecache`): a config read through it
is what a fresh parse gives, and an entry that is not exactly for this text, or not the
user's own, is never used."""

from __future__ import annotations

import ast
import datetime as dt
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scoctl.config import parsecache
from scoctl.config.schema import load_config
from scoctl.config.yamlsrc import load_located

CONFIG = ("state: {tmp}/state.db\nspool: {tmp}/spool\nregions:\n  - name: r\n"
          "    launch: {{image: i}}\nranking: {{id: r, scores: {{}}}}\n")

scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=False) | st.text(max_size=8) | st.dates()
           | st.datetimes(timezones=st.none() | st.just(dt.UTC)))
keys = st.text(min_size=1, max_size=6) | st.integers(-5, 5) | st.booleans() | st.dates()
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                         | st.dictionaries(keys, inner, max_size=4), max_leaves=20)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("SCOCTL_NO_CACHE", raising=False)
    return tmp_path / "xdg" / "scoctl"


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("config-*.json")) if folder.exists() else []


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=documents)
def test_a_cached_parse_is_the_fresh_parse(cache: Path, tmp_path: Path, data: object) -> None:
    text = yaml.safe_dump({"doc": data})
    file = str(tmp_path / "c.yaml")
    fresh = load_located(text, file)
    first = load_located(text, file, cache=True)  # parses, keeps the entry
    assert len(_entries(cache)) == 1
    second = load_located(text, file, cache=True)  # from the entry
    assert parsecache.get(file, text) is not None
    for got in (first, second):
        assert got.data == fresh.data and got.lines == fresh.lines and got.file == file
        assert _types(got.data) == _types(fresh.data)


def _types(value: object) -> object:
    """The value's shape with its types (1 == 1.0 == True, but not as config values)."""
    if isinstance(value, dict):
        return {(type(k).__name__, repr(k)): _types(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_types(v) for v in value]
    return type(value).__name__, repr(value)


def test_an_edited_config_is_parsed_afresh(cache: Path, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(tmp=tmp_path))
    assert load_config(path).spool == tmp_path / "spool"
    assert len(_entries(cache)) == 1
    path.write_text(CONFIG.format(tmp=tmp_path).replace("/spool", "/other-spool"))
    assert load_config(path).spool == tmp_path / "other-spool"
    assert len(_entries(cache)) == 1  # one entry per config path, replaced


def test_an_entry_is_only_taken_for_its_own_path(cache: Path, tmp_path: Path) -> None:
    text = "a: 1\n"
    load_located(text, str(tmp_path / "one.yaml"), cache=True)
    assert parsecache.get(str(tmp_path / "one.yaml"), text) is not None
    assert parsecache.get(str(tmp_path / "two.yaml"), text) is None


@pytest.mark.parametrize("spoil", ["others-write", "group-write", "symlink", "garbage",
                                   "tagged", "old-format", "other-text"])
def test_an_entry_that_is_not_trustworthy_or_not_current_is_ignored(
        cache: Path, tmp_path: Path, spoil: str) -> None:
    file, text = str(tmp_path / "c.yaml"), "a: 1\nb: [x, 2]\n"
    load_located(text, file, cache=True)
    (entry,) = _entries(cache)
    body = json.loads(entry.read_text())
    if spoil == "others-write":
        entry.chmod(0o666)
    elif spoil == "group-write":
        cache.chmod(0o770)
    elif spoil == "symlink":
        target = tmp_path / "elsewhere.json"
        entry.rename(target)
        entry.symlink_to(target)
    elif spoil == "garbage":
        entry.write_bytes(b"\x00not json")
    elif spoil == "tagged":
        body["data"] = {"x": 1}
        entry.write_text(json.dumps(body))
    elif spoil == "old-format":
        body["format"] = parsecache.FORMAT - 1
        entry.write_text(json.dumps(body))
    else:
        body["data"] = {"m": [["a", 99]]}  # what a stale entry would hold ...
        body["text"] = "a: 99\n"  # ... for another text
        entry.write_text(json.dumps(body))
    assert parsecache.get(file, text) is None
    assert load_located(text, file, cache=True).data == {"a": 1, "b": ["x", 2]}


def test_binary_dates_and_timestamps_come_back_as_they_were(cache: Path, tmp_path: Path) -> None:
    text = ("b: !!binary aGVsbG8=\nd: 2026-12-03\nt: 2026-12-03T10:00:00+02:00\n"
            "f: .inf\nn: ~\n")
    file = str(tmp_path / "c.yaml")
    load_located(text, file, cache=True)
    got = parsecache.get(file, text)
    assert got is not None and got[0] == load_located(text, file).data
    assert got[0]["b"] == b"hello" and got[0]["t"].utcoffset() == dt.timedelta(hours=2)


def test_a_value_json_cannot_hold_is_not_cached(cache: Path, tmp_path: Path) -> None:
    parsecache.put(str(tmp_path / "c.yaml"), "s: x\n", {"s": {"a", "b"}}, {})
    assert _entries(cache) == []


def test_a_config_that_does_not_parse_leaves_no_entry(cache: Path, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="duplicate key"):
        load_located("a: 1\na: 2\n", str(tmp_path / "c.yaml"), cache=True)
    assert _entries(cache) == []


def test_the_cache_can_be_turned_off(cache: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCOCTL_NO_CACHE", "1")
    load_located("a: 1\n", str(tmp_path / "c.yaml"), cache=True)
    assert not cache.exists()


def test_an_unwritable_cache_leaves_the_config_read_as_before(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert load_located("a: 1\n", str(tmp_path / "c.yaml"), cache=True).data == {"a": 1}
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # ignored (XDG), then HOME
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    load_located("a: 1\n", str(tmp_path / "c.yaml"), cache=True)
    assert _entries(tmp_path / "home" / ".cache" / "scoctl")


def _gate_then_print(tmp_path: Path, printed: str) -> str:
    """Python code that runs a gate line recording workload job-1 (the config in tmp_path,
    an sinfo that is not there), prints ``exit CODE``, then the value of `printed`."""
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(tmp=tmp_path) + f"slurm: {{sinfo: {tmp_path / 'none'}}}\n")
    return textwrap.dedent(f"""\
        import sys
        from scoctl.cli.app import main
        try:
            main(["--config", {str(config)!r}, "-q", "gate", "--backend", "slurm",
                  "--workload", "job-1", "--json"])
        except SystemExit as exc:
            print("exit", exc.code)
        print({printed})
        """)


def test_a_gate_after_the_first_imports_no_yaml_and_none_of_the_fleet(
        cache: Path, tmp_path: Path) -> None:
    # the submit wrapper's path (bench/gate_bench.py): the config from the cache, the row
    # recorded through a store that builds no fleet, plan or notice rows
    code = _gate_then_print(tmp_path, """sorted(m for m in sys.modules if m.split(".")[0] == "yaml"
                     or m in ("scoctl.core.gang", "scoctl.core.planner",
                              "scoctl.core.model.fleet", "scoctl.core.model.plans",
                              "scoctl.core.model.notices", "scoctl.core.model.latency",
                              "scoctl.core.claims", "zoneinfo", "tempfile"))""")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path, check=False, env={**os.environ})
            for _ in range(2)]
    first, second = (run.stdout.strip().splitlines() for run in runs)
    assert first[-2] == "exit 0" and "yaml" in first[-1], runs[0].stderr  # parsed, kept
    assert second[-2:] == ["exit 0", "[]"], runs[1].stderr
    assert '"slug": "job-1"' in runs[1].stdout


def test_a_gate_recording_a_workload_builds_no_claim_counter_or_slurm_job_values(
        cache: Path, tmp_path: Path) -> None:
    # what a recorded verdict needs is the workload's row and event: claims and metric
    # counters (core.model.ledger) and Slurm's jobs (core.model.jobs) are others' values
    code = _gate_then_print(
        tmp_path, 'sorted(m for m in sys.modules if m.startswith("scoctl.core.model."))')
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, check=False, env={**os.environ})
    lines = done.stdout.strip().splitlines()
    assert lines[-2] == "exit 0", done.stderr
    modules = set(ast.literal_eval(lines[-1]))
    assert "scoctl.core.model.records" in modules  # the row it recorded
    assert not modules & {"scoctl.core.model.ledger", "scoctl.core.model.jobs"}, modules
