"""The gate's fast entry (`scoctl.cli.gate_fast`): it reads a command line exactly as the typer
command tree does, or leaves it to the tree; and it runs the gate without a CLI framework."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import click
import pytest
import typer.main
from hypothesis import given
from hypothesis import strategies as st

from scoctl.cli import gate_fast
from scoctl.cli.gate_fast import GateArgs, RootArgs, parse_fast
from scoctl.cli.root import app

# Units of a command line: those the fast entry reads, and those it must leave to the tree.
ROOT_READ = [["--config", "c.yaml"], ["--config=c.yaml"], ["--state", "s.db"], ["--state=s.db"],
             ["--json"], ["-q"], ["--quiet"], ["-v"], ["-vv"], ["-vvv"], ["--verbose"]]
ROOT_LEFT = [["--config"], ["--config="], ["--config", "-q"], ["--json=1"], ["-qv"],
             ["--version"], ["-h"], ["--help"], ["--bogus"], ["--"], ["status"], ["gat"]]
GATE_READ = [
    ["--backend", "slurm"], ["--backend", "k8s"], ["--backend=slurm"], ["--cpus", "4"],
    ["--cpus", "1"], ["--cpus", "04"], ["--cpus=8"], ["--mem", "8G"], ["--mem=64G"],
    ["--mem", "lots"], ["--mem", "16Gi"], ["--gpus", "0"], ["--gpus", "2"], ["--gpu-type", "a100"],
    ["--gpu-resource", "nvidia.com/gpu"], ["--partition", "ml"], ["-p", "cpu,ml"],
    ["--workload", "train-7"], ["-w", "train-7"], ["-w", "Bad_Slug"], ["--kind", "job"],
    ["--kind", "deployment"], ["--kind", "inference"], ["--job-id", "42"], ["--job-id=7"],
    ["--no-elastic"], ["--json"],
]
GATE_LEFT = [
    ["--backend", "SLURM"], ["--backend", "mainframe"], ["--backend", ""], ["--backend"],
    ["--cpus", "0"], ["--cpus", "+4"], ["--cpus", " 4"], ["--cpus", "-1"], ["--cpus", "1e3"],
    ["--cpus", "\u0663"], ["--cpus", "500m"], ["--cpus", "0.5"], ["--mem", "-1"], ["--mem", ""],
    ["--gpus", "-2"], ["-pml"],
    ["-p=ml"], ["--kind", "batch"], ["--no-elastic=1"], ["--help"], ["-h"], ["--"], ["extra"],
    ["-q"], ["--cpus"],
]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """`scoctl [root options] gate [options]`, most of them plain, some with one unit the fast
    entry must leave to the typer tree."""
    root = draw(st.lists(st.sampled_from(ROOT_READ), max_size=3))
    gate = draw(st.lists(st.sampled_from(GATE_READ), max_size=6))
    if draw(st.booleans()):  # usually, but not always, a backend
        gate.insert(draw(st.integers(0, len(gate))), ["--backend", draw(st.sampled_from(
            ["slurm", "k8s"]))])
    if draw(st.booleans()):
        if draw(st.booleans()):
            root.insert(draw(st.integers(0, len(root))), draw(st.sampled_from(ROOT_LEFT)))
        else:
            gate.insert(draw(st.integers(0, len(gate))), draw(st.sampled_from(GATE_LEFT)))
    return [token for part in [*root, ["gate"], *gate] for token in part]


# (field of the fast entry, name of the typer parameter)
ROOT_PARAMS = {"config": "config", "state": "state", "json": "json_out", "verbose": "verbose",
               "quiet": "quiet"}
GATE_PARAMS = {name: name for name in GateArgs.__dataclass_fields__} | {"json": "json_out"}


def _plain(value: Any) -> Any:
    return str(value) if isinstance(value, Path) else value


def click_reading(argv: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The root's and the gate's parameters as the typer tree parses `argv` (the callbacks are
    replaced by recorders, so nothing runs)."""
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    seen: dict[str, dict[str, Any]] = {}
    group.callback = lambda **params: seen.__setitem__("root", params)
    group.commands["gate"].callback = lambda **params: seen.__setitem__("gate", params)
    group.main(args=argv, prog_name="scoctl", standalone_mode=False)
    return seen["root"], seen["gate"]


def fast_reading(root: RootArgs, args: GateArgs) -> tuple[dict[str, Any], dict[str, Any]]:
    root_params = {ROOT_PARAMS[k]: _plain(getattr(root, k)) for k in ROOT_PARAMS}
    gate_params = {GATE_PARAMS[k]: getattr(args, k) for k in GATE_PARAMS}
    return root_params, gate_params


@given(command_lines())
def test_a_line_the_fast_entry_reads_means_the_same_to_the_typer_tree(argv):
    fast = parse_fast(argv)
    if fast is None:
        return  # the typer tree parses it (and reports any error) as it always has
    expected_root, expected_gate = click_reading(argv)
    got_root, got_gate = fast_reading(*fast)
    assert got_root == {k: _plain(v) for k, v in expected_root.items() if k != "version"}
    assert got_gate == {k: _plain(v) for k, v in expected_gate.items()}


@given(st.lists(st.sampled_from(ROOT_READ), max_size=3), st.sampled_from(ROOT_LEFT + GATE_LEFT),
       st.lists(st.sampled_from(GATE_READ), max_size=4))
def test_a_line_with_anything_the_fast_entry_cannot_read_goes_to_the_typer_tree(root, odd,
                                                                                options):
    argv = [token for part in [*root, ["gate"], ["--backend", "slurm"], *options, odd]
            for token in part]
    assert parse_fast(argv) is None


@pytest.mark.parametrize("argv", [
    ["-q", "gate", "--backend", "slurm", "--cpus", "4", "--mem", "8G", "--gpus", "1"],
    ["-q", "gate", "--backend", "slurm", "--cpus", "32", "--mem", "256G", "--gpus", "4",
     "--gpu-type", "a100", "--partition", "ml", "--workload", "train-7", "--kind", "job"],
    ["--config", "c.yaml", "--json", "gate", "--backend", "k8s", "--cpus", "2", "--json"],
    ["gate", "--backend=slurm", "--cpus=4", "-p", "cpu", "-w", "job-1", "--no-elastic"],
])
def test_the_lines_a_submit_wrapper_builds_take_the_fast_entry(argv):
    fast = parse_fast(argv)
    assert fast is not None
    assert fast_reading(*fast) == tuple({k: _plain(v) for k, v in reading.items()
                                         if k != "version"}
                                        for reading in click_reading(argv))


@pytest.mark.parametrize("argv", [
    ["gate", "--help"], ["--help"], ["gate"], ["gate", "--backend", "slurm", "--cpus", "0"],
    ["--version"], ["status"], ["gate", "--backend", "slurm", "-q"],
])
def test_lines_it_cannot_read_exactly_go_to_the_typer_tree(argv):
    assert parse_fast(argv) is None


def _option_names(command: click.Command) -> set[str]:
    return {name for param in command.params for name in param.opts}


def test_the_fast_entry_knows_every_option_of_the_root_and_the_gate():
    group = typer.main.get_command(app)
    assert isinstance(group, click.Group)
    root = set(gate_fast.ROOT_VALUES) | set(gate_fast.ROOT_FLAGS) | set(gate_fast.ROOT_COUNTS)
    assert _option_names(group) - {"--version"} == root
    gate = group.commands["gate"]
    assert _option_names(gate) == set(gate_fast.GATE_VALUES) | set(gate_fast.GATE_FLAGS)


def test_the_slurm_gate_runs_without_typer_or_click(tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {tmp_path / 'state.db'}\nspool: {tmp_path / 'spool'}\n"
                      "regions:\n  - name: r\n    launch: {image: i}\n"
                      "ranking: {id: r, scores: {}}\n"
                      f"slurm: {{sinfo: {tmp_path / 'no-sinfo'}}}\n")
    code = textwrap.dedent(f"""\
        import sys
        from scoctl.cli.app import main
        try:
            main(["--config", {str(config)!r}, "-q", "gate", "--backend", "slurm", "--json"])
        except SystemExit as exc:
            print("exit", exc.code)
        print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"typer", "click", "rich"}}))
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, check=False)
    lines = done.stdout.strip().splitlines()
    assert lines[-2:] == ["exit 0", "[]"], done.stderr
    assert '"verdict": "skipped"' in done.stdout


def test_a_gate_that_could_not_read_its_partition_leaves_no_sinfo_behind(tmp_path: Path) -> None:
    """The gate starts ``sinfo --json`` as soon as its config is read. When the partition
    cannot be read first (no partition configured or asked for, and ``sinfo -h -o %P``
    fails), nothing reads that sinfo: the gate kills it rather than leave it hung behind it
    (one per submitted job, with slurmctld stuck). The verdict is `skipped`, as before."""
    from tests.builders import slurm_config
    from tests.fixtures.slurm import wait_for

    pid_file = tmp_path / "sinfo.pid"
    sinfo = tmp_path / "sinfo"
    sinfo.write_text("#!/bin/sh\n"
                     f'if [ "$1" = --json ]; then echo $$ > {pid_file}; exec sleep 60; fi\n'
                     "echo 'sinfo: error: Unable to contact slurm controller' >&2; exit 1\n")
    sinfo.chmod(0o755)
    config = slurm_config(tmp_path, f"{{sinfo: {sinfo}, timeout: 30s}}")
    done = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(config), "-q", "gate",
                           "--backend", "slurm", "--cpus", "1", "--json"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert done.returncode == 0, done.stderr
    assert '"verdict": "skipped"' in done.stdout
    assert wait_for(pid_file.exists, timeout=10), "the gate never started sinfo --json"
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        return state == "Z"

    assert wait_for(gone, timeout=10), "the unread sinfo --json still runs"


@pytest.mark.parametrize(("backend", "cpus", "mem", "expected"), [
    ("k8s", "500m", "16Gi", (0.5, 16384)),  # a pod's requests, as Kubernetes writes them
    ("k8s", "2", "512Mi", (2, 512)),
    ("k8s", "0.25", "16G", (0.25, 15258)),  # 16 * 10**9 bytes, in whole MiB (rounded down)
    ("k8s", "1", "1073741824", (1, 1024)),  # a plain number is bytes
    ("slurm", "4", "16G", (4, 16384)),  # sbatch's units: binary G, a plain number is MB
    ("slurm", "4", "512", (4, 512)),
])
def test_each_backend_reads_cpus_and_memory_in_its_own_notation(backend, cpus, mem, expected):
    from scoctl.cli.gate_fast import request_size

    assert request_size(GateArgs(backend=backend, cpus=cpus, mem=mem)) == expected


@pytest.mark.parametrize(("backend", "cpus", "mem", "option"), [
    ("k8s", "0", "1Gi", "--cpus"), ("k8s", "lots", "1Gi", "--cpus"),
    ("k8s", "1", "16GB", "--mem"), ("slurm", "500m", "1G", "--cpus"),
    ("slurm", "0", "1G", "--cpus"), ("slurm", "1", "16Gi", "--mem"),
])
def test_a_size_foreign_to_the_backend_is_a_usage_error_naming_the_option(backend, cpus, mem,
                                                                          option):
    from scoctl.cli.gate_fast import request_size
    from scoctl.errors import UsageError

    with pytest.raises(UsageError, match=f"^{option}: "):
        request_size(GateArgs(backend=backend, cpus=cpus, mem=mem))
