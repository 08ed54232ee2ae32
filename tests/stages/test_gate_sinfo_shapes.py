"""`scoctl gate --backend slurm` over node shapes a real cluster seldom has: `--mem` units at the
exact boundary, GRES spellings (socket suffixes, several entries, ``(null)``, ``no_consume``,
`slurm.gres_map`), partition lists, and the imports of the Slurm path.

`sinfo` is a small shell program printing a fixed node table (its ``--json`` fails, so the
format-string path is read, as on clusters without the JSON plugin). The real CLI runs in a
subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.builders import slurm_config

# name|CPUs|MB|GRES|partition|state|features|reason (scoctl.adapters.slurm.NODE_FORMAT)
NODES = """\
small|4|4096|(null)|cpu*|idle|(null)|none
typed|32|512000|gpu:a100:4(S:0-1),mps:400|ml|idle|(null)|none
mixed|16|128000|gpu:a100:2(IDX:0-1),gpu:v100:2(S:1)|ml|mixed|(null)|none
untyped|24|600000|gpu:2|ml|idle~|(null)|none
flagged|8|64000|gpu:h100:1,bandwidth:lustre:no_consume:4G|ml|idle|(null)|none
mapped|8|64000|shard:6|shards|idle|(null)|none
"""

SINFO = """\
#!/bin/sh
case "$*" in
  *--json*) echo "sinfo: unrecognized option '--json'" >&2; exit 1 ;;
  *-N*) cat "$(dirname "$0")/nodes.txt" ;;
  *%P*) printf 'cpu*\\nml\\nshards\\n' ;;
  *) exit 2 ;;
esac
"""


def write_config(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "nodes.txt").write_text(NODES, encoding="utf-8")
    sinfo = bin_dir / "sinfo"
    sinfo.write_text(SINFO, encoding="utf-8")
    sinfo.chmod(0o755)
    path = slurm_config(tmp_path, f"{{sinfo: {sinfo}, timeout: 5s, gpu_partition: ml, "
                        "gres_map: {gpu: nvidia.com/gpu, shard: nvidia.com/gpu}}")
    return path


@pytest.fixture
def gate(cli, tmp_path):
    config = write_config(tmp_path)

    def run(*args: str):
        return cli("--config", str(config), "gate", "--backend", "slurm", "--no-elastic",
                   "--json", *args)
    return run


@pytest.mark.parametrize(("mem", "fits"), [
    ("4096", True),       # a plain number is MB
    ("4097", False),
    ("4G", True),         # binary: 1G = 1024M
    ("4g", True),
    ("4096M", True),
    ("4194304K", True),   # 4096 MB exactly
    ("4194305K", False),  # rounded up to 4097 MB
    ("0.00390625T", True),
    ("0.004T", False),    # 4194.304 MB
])
def test_mem_is_in_sbatch_units_at_the_exact_boundary(gate, mem, fits):
    # partition cpu has one node, `small`, with RealMemory 4096 MB
    result = gate("--cpus", "1", "--mem", mem)
    assert result.code == (0 if fits else 3), result.stderr
    body = result.json()
    assert body["verdict"] == ("fits" if fits else "over_capacity")
    assert body["partition"] == "cpu"  # the default partition: sinfo marks it *
    assert body["node"]["name"] == "small"


def test_a_mem_that_is_no_size_is_a_usage_error(gate):
    result = gate("--cpus", "1", "--mem", "4X")
    assert result.code == 2
    assert "--mem" in result.stderr


@pytest.mark.parametrize(("args", "node"), [
    # the socket suffix does not hide the count; mps beside the GPUs is not a GPU
    (["--cpus", "32", "--gpus", "4", "--gpu-type", "a100"], "typed"),
    # several typed entries on one node: 2 + 2 untyped-request GPUs, 2 of type v100
    (["--cpus", "16", "--gpus", "4"], "mixed"),
    (["--cpus", "1", "--gpus", "2", "--gpu-type", "v100"], "mixed"),
    # untyped GPUs hold an untyped request (and the powered-down node counts)
    (["--cpus", "24", "--mem", "550000", "--gpus", "2"], "untyped"),
    # a no_consume GRES beside the GPU does not make the node unreadable
    (["--cpus", "8", "--gpus", "1", "--gpu-type", "h100"], "flagged"),
    # slurm.gres_map: shard counts as a GPU, in its own partition
    (["--cpus", "8", "--gpus", "6", "--partition", "shards"], "mapped"),
])
def test_gres_spellings_count_the_gpus_the_request_asks_for(gate, args, node):
    result = gate(*args)
    assert result.code == 0, result.stderr
    body = result.json()
    assert (body["verdict"], body["node"]["name"]) == ("fits", node)


@pytest.mark.parametrize(("args", "word"), [
    (["--cpus", "1", "--gpus", "3", "--gpu-type", "v100"], "v100 GPUs"),
    (["--cpus", "1", "--gpus", "1", "--gpu-type", "t4"], "t4 GPUs"),  # untyped never match
    (["--cpus", "32", "--gpus", "2", "--gpu-type", "v100"], "at once"),
    (["--cpus", "1", "--gpus", "7", "--partition", "shards"], "GPUs"),
])
def test_gres_that_no_node_has_is_over_capacity(gate, args, word):
    result = gate(*args)
    assert result.code == 3, result.stderr
    assert word in result.json()["reason"]


def test_a_partition_list_judges_the_nodes_of_every_partition(gate):
    result = gate("--cpus", "16", "--mem", "100G", "--partition", "cpu,ml")
    assert result.code == 0, result.stderr
    assert result.json()["node"]["name"] == "mixed"


def test_the_slurm_gate_imports_neither_kubernetes_nor_openstack(tmp_path):
    config = write_config(tmp_path)
    code = textwrap.dedent(f"""\
        import sys
        from scoctl.cli.app import main
        try:
            main(["--config", {str(config)!r}, "gate", "--backend", "slurm", "--cpus", "4",
                  "--gpus", "2", "--workload", "train-7", "--json"])
        except SystemExit as exc:
            print("exit", exc.code)
        print(sorted({{m.split(".")[0] for m in sys.modules}} & {{"kubernetes", "openstack",
                                                                  "httpx"}}))
        """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, check=False)
    lines = done.stdout.strip().splitlines()
    assert lines[-2:] == ["exit 0", "[]"], done.stderr
    assert '"status": "pending"' in done.stdout


def test_a_state_the_user_cannot_write_keeps_the_verdict_and_spools_the_event(cli, tmp_path):
    """A submit wrapper runs as the submitting user, who may not write the state: the gate
    still answers over_capacity (exit 3), and the event goes to the spool for `watch`."""
    from scoctl.clock import FixedClock
    from scoctl.config.schema import load_config
    from scoctl.stages.watch import run_pass
    from scoctl.state import open_store

    config = write_config(tmp_path)
    (tmp_path / "blocker").write_text("a file where the state's folder should be")
    text = config.read_text().replace(f"state: {tmp_path / 'state.db'}",
                                      f"state: {tmp_path / 'blocker' / 'state.db'}")
    config.write_text(text)
    result = cli("--config", str(config), "gate", "--backend", "slurm", "--no-elastic", "--json",
                 "--cpus", "500", "--workload", "train-7")
    assert result.code == 3, result.stderr
    body = result.json()
    assert body["verdict"] == "over_capacity" and body["workload"] is None
    assert "not recorded" in result.stderr
    (spooled,) = (tmp_path / "spool").glob("*.json")
    assert body["spooled"] == str(spooled)

    fits = cli("--config", str(config), "gate", "--backend", "slurm", "--no-elastic",
               "--cpus", "1", "--workload", "train-8")
    assert fits.code == 0, fits.stderr  # nothing to spool for a fit

    loaded = load_config(config)
    with open_store(tmp_path / "state.db", clock=FixedClock(), create=True) as store:
        run_pass(loaded, store, store.clock, sources=[])
        row = store.latest_workload("train-7")
        events = store.events(workload="train-7")
    assert row is not None and (row.kind, row.source) == ("job", "slurm")
    assert [e.token for e in events] == ["CAPACITY_EXCEEDED"]
    assert events[0].detail["request"]["cpus"] == 500
    assert events[0].level == "error"  # the level the gate writes when it records directly
