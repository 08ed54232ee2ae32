"""Issue 17 item 7: hostile input ends in exit 2 naming the file (and line and field), fast —
never a traceback, a MemoryError or minutes of CPU.

Each case runs the real CLI in a subprocess under a CPU-time and address-space limit (not a
wall-clock assertion: the limits only turn "40 s of CPU, then MemoryError" into a failure
instead of a hang). Before the fix, each of these crashed with a traceback or ran into a limit.
"""

from __future__ import annotations

import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from scoctl.state import open_store

REPO = Path(__file__).resolve().parents[2]
CPU_SECONDS = 10
ADDRESS_SPACE = 2 * 2**30

BASE = """\
state: {tmp}/s.db
regions:
  - {{name: r, launch: {{image: i}}}}
flavors: [{{name: f, vcpus: 4, ram: 16Gi}}]
pools: [{{name: p, az: a, flavor: f, group: g, tier: reclaimable, depth: 1}}]
ranking: {{id: r-1, scores: {{p: 1.0}}}}
"""

BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9 if prev else ['x'] * 9)}]\n"
    for prev, name in zip([None, *"abcdefgh"], "abcdefghi", strict=True))


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def scoctl(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "scoctl", *args], cwd=tmp, env=env,
                          capture_output=True, text=True, timeout=120, preexec_fn=_limits)


def assert_refused(result: subprocess.CompletedProcess[str], *named: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("scoctl: error: "), result.stderr[-2000:]
    for text in named:
        assert text in lines[-1], lines[-1]


CONFIGS = {
    # name: (extra text after BASE, or a whole text with {tmp}; what the error names)
    "exponential anchors": (BOMB, ["c.yaml", "expands to more than"]),
    "a recursive list alias": ("spool: &s [*s]\n", ["c.yaml:7", "spool", "contains it"]),
    "a recursive mapping alias": ("metrics: &m {textfile: *m}\n", ["c.yaml:7", "metrics"]),
    "a list as a mapping key": ("? [a, b]\n: 1\n", ["c.yaml:7", "not a list"]),
    "a mapping as a mapping key": ("? {a: 1}\n: 1\n", ["c.yaml:7", "not a mapping"]),
    "a duplicate top-level key": ("spool: /a\nspool: /b\n", ["c.yaml:8", "spool", "duplicate"]),
    "a duplicate nested key": (
        "workloads: [{name: w, name: v}]\n", ["c.yaml:7", "workloads[0].name", "duplicate"]),
    "an impossible date": ("spool: 2001-13-45\n", ["c.yaml", "month"]),
    "an integer of 5000 digits": ("gc_orphans: " + "1" * 5000 + "\n", ["c.yaml"]),
    "nesting 100 deep": ("metrics: " + "[" * 100 + "]" * 100 + "\n", ["c.yaml", "deeper"]),
    "a NUL byte": ("spool: a\x00b\n", ["c.yaml"]),
    "two documents": ("---\nstate: x\n", ["c.yaml"]),
    "a list document": ("- a\n", ["c.yaml"]),
    "quantity 1e400": ("node_reserve: {memory: '1e400'}\n", ["node_reserve.memory", "too large"]),
    "quantity 1e999999": ("node_reserve: {memory: '1e999999'}\n", ["node_reserve.memory"]),
    "quantity Infinity": ("node_reserve: {cpu: Infinity}\n", ["node_reserve.cpu"]),
    "quantity NaN": ("node_reserve: {cpu: NaN}\n", ["node_reserve.cpu"]),
    "quantity .inf": ("node_reserve: {cpu: .inf}\n", ["node_reserve.cpu", "finite"]),
    "an unknown isolation": ("workloads: [{name: w, isolation: private}]\n",
                             ["workloads[0].isolation", "exclusive, shared"]),
    "a depth of 10**30": ("pools: [{name: q, az: a, flavor: f, group: g, tier: committed, "
                          "depth: 1000000000000000000000000000000}]\n", ["pools[0].depth"]),
}


@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_a_hostile_config_exits_2_naming_it(tmp_path, case):
    extra, named = CONFIGS[case]
    text = BASE.format(tmp=tmp_path)
    if extra.startswith(("---", "- ")):
        text = text + extra if extra.startswith("---") else extra
    else:
        keys = {line.split(":")[0] for line in extra.splitlines() if ":" in line}
        text = "".join(line + "\n" for line in text.splitlines()
                       if line.split(":")[0] not in keys - {"spool"}) + extra
    (tmp_path / "c.yaml").write_text(text)
    assert_refused(scoctl(tmp_path, "--config", "c.yaml", "config", "check"), *named)


def test_a_config_that_is_not_utf8_exits_2_naming_the_byte(tmp_path):
    (tmp_path / "c.yaml").write_bytes(BASE.format(tmp=tmp_path).encode()
                                      + "spool: /var/spool/sc\u00f6ctl\n".encode("latin-1"))
    assert_refused(scoctl(tmp_path, "--config", "c.yaml", "config", "check"),
                   "c.yaml", "not UTF-8", "0xf6")


CLAIM = ("claims:\n  - workload: w\n    requests: {cpu: 4, memory: 16Gi}\n"
         "    largest_pod: {cpu: 1, memory: 4Gi}\n")
CLAIMS = {
    # name: (file name, text, what the error names)
    "exponential anchors": ("c.yaml", BOMB + CLAIM, []),
    "a recursive alias": ("c.yaml", "claims: &c [*c]\n", ["claims[0]"]),
    "a duplicate key": ("c.yaml", CLAIM + "    requests: {cpu: 8}\n", ["duplicate"]),
    "an unknown claim field": ("c.yaml", CLAIM + "    larget_pod: {cpu: 1}\n",
                               ["claims[0].larget_pod", "unknown field"]),
    "an unknown top-level field": ("c.yaml", CLAIM + "claimz: []\n", ["claimz"]),
    "a list as a key": ("c.yaml", CLAIM + "? [a]\n: 1\n", ["mapping key"]),
    "quantity 1e999999": ("c.yaml", CLAIM.replace("16Gi", "'1e999999'"),
                          ["claims[0].requests.memory", "too large"]),
    "quantity 1e400": ("c.yaml", CLAIM.replace("16Gi", "1e400"), ["claims[0].requests.memory"]),
    "quantity Infinity": ("c.yaml", CLAIM.replace("cpu: 4", "cpu: Infinity"),
                          ["claims[0].requests.cpu"]),
    "JSON NaN": ("c.json", '{"claims": [{"workload": "w", "requests": {"cpu": NaN}, '
                           '"largest_pod": {"cpu": 1}}]}', ["not JSON", "NaN"]),
    "JSON 1e400": ("c.json", '{"claims": [{"workload": "w", "requests": {"cpu": 1e400}, '
                             '"largest_pod": {"cpu": 1}}]}', ["claims[0].requests.cpu"]),
    "JSON nested 100000 deep": ("c.json", "[" * 100000 + "]" * 100000, ["not JSON"]),
    "JSON an integer of 5000 digits": ("c.json", '{"claims": [{"pods": ' + "1" * 5000 + "}]}",
                                       ["not JSON"]),
    "pods 10**30": ("c.yaml", CLAIM + "    pods: 1000000000000000000000000000000\n",
                    ["claims[0].pods"]),
}


@pytest.mark.parametrize("case", sorted(CLAIMS))
def test_a_hostile_claims_file_exits_2_naming_it(tmp_path, case):
    name, text, named = CLAIMS[case]
    (tmp_path / name).write_text(text)
    open_store(tmp_path / "s.db", create=True).close()
    result = scoctl(tmp_path, "--state", "s.db", "plan", "--claims", name, "--dry-run")
    assert_refused(result, name, *named)


def test_a_claims_file_that_is_not_utf8_exits_2_naming_it(tmp_path):
    (tmp_path / "c.yaml").write_bytes(CLAIM.replace("w\n", "w\u00e9\n").encode("latin-1"))
    result = scoctl(tmp_path, "--state", "s.db", "plan", "--claims", "c.yaml", "--dry-run")
    assert_refused(result, "c.yaml", "not UTF-8")


@pytest.mark.parametrize("since", ["99999999d", "9" * 400 + "d", "0001-01-01T00:00:00+01:00",
                                   "9999-12-31T23:59:59-05:00"])
def test_events_since_an_absurd_age_or_time_exits_2_naming_since(tmp_path, since):
    open_store(tmp_path / "s.db", create=True).close()
    assert_refused(scoctl(tmp_path, "--state", "s.db", "events", "--since", since), "--since")


def test_a_sqlite_file_of_another_program_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "s.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    for args in (["init"], ["status"], ["events"], ["plan", "--dry-run"]):
        assert_refused(scoctl(tmp_path, "--state", "s.db", *args), "s.db",
                       "not a scoctl state file", "users")
    assert path.read_bytes() == before
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(("-wal", "-shm"))]


def test_a_scenario_file_that_is_not_utf8_exits_2_naming_it(tmp_path):
    (tmp_path / "s.yaml").write_bytes("nodes: []\n# caf\u00e9\n".encode("latin-1"))
    result = scoctl(tmp_path, "sim", "up", "--scenario", "s.yaml", "--dir", "sim")
    assert_refused(result, "s.yaml", "not UTF-8")


def test_a_slurmrestd_token_file_that_is_not_utf8_exits_2_naming_the_field(tmp_path):
    (tmp_path / "jwt").write_bytes(b"\xff\xfe-not-a-token")
    (tmp_path / "c.yaml").write_text(BASE.format(tmp=tmp_path) + (
        "workloads: [{name: train, source: slurm}]\n"
        f"slurm: {{rest_url: 'http://127.0.0.1:9', rest_token_file: {tmp_path}/jwt}}\n"))
    open_store(tmp_path / "s.db", create=True).close()
    result = scoctl(tmp_path, "--config", "c.yaml", "watch", "--source", "slurm")
    assert_refused(result, "slurm.rest_token_file", "not UTF-8")
