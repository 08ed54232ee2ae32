"""slurm/sbatch-gate reads sbatch's options as sbatch does.

The wrapper runs for real (bash), with ``SBATCH`` and ``SCOCTL`` pointing at a small recording
program: each call appends its name and argv as one JSON line, so the tests see exactly what the
gate was asked and what sbatch was given. No Slurm, no scoctl, a few milliseconds a case.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[2] / "slurm" / "sbatch-gate"

RECORDER = """\
#!/usr/bin/env python3
import json, os, sys
name = os.path.basename(sys.argv[0])
with open(os.environ["RECORD"], "a") as out:
    out.write(json.dumps([name, sys.argv[1:]]) + "\\n")
if name == "sbatch":
    print("4242;cluster")
elif name == "scoctl" and sys.argv[2:3] == ["gate"]:
    sys.exit(int(os.environ.get("GATE_RC", "0")))
"""


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    """A directory holding `sbatch` and `scoctl`, both the recording program."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("sbatch", "scoctl"):
        path = bin_dir / name
        path.write_text(RECORDER, encoding="utf-8")
        path.chmod(0o755)
    return bin_dir


def wrap(fakes: Path, tmp_path: Path, *argv: str, gate_rc: int = 0,
         ) -> tuple[subprocess.CompletedProcess[str], list[tuple[str, list[str]]]]:
    record = tmp_path / "calls.jsonl"
    record.unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "RECORD": str(record), "GATE_RC": str(gate_rc),
           "SBATCH": str(fakes / "sbatch"), "SCOCTL": str(fakes / "scoctl")}
    done = subprocess.run([str(WRAPPER), *argv], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=30)
    calls = [tuple(json.loads(line)) for line in record.read_text().splitlines()] \
        if record.exists() else []
    return done, calls  # type: ignore[return-value]


def gate_args(calls: list[tuple[str, list[str]]]) -> dict[str, str]:
    """The options the gate was called with, as a dict (``--cpus`` → ``"4"``)."""
    (argv,) = [a for name, a in calls if name == "scoctl" and a[1:2] == ["gate"]]
    assert argv[:4] == ["-q", "gate", "--backend", "slurm"]
    rest = argv[4:]
    return dict(zip(rest[::2], rest[1::2], strict=True))


def sbatch_args(calls: list[tuple[str, list[str]]]) -> list[str]:
    (argv,) = [a for name, a in calls if name == "sbatch"]
    return argv


def script(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "job.sh"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.mark.parametrize(("argv", "expected"), [
    # separate values: -t 10, --time 10, -o FILE must not be taken for the script
    (["-t", "10", "--time", "10", "-o", "out.txt", "-c", "4", "--mem", "8G"],
     {"--cpus": "4", "--mem": "8G", "--gpus": "0"}),
    # attached values
    (["-c4", "--mem=512M", "--gres=gpu:a100:2", "-pml"],
     {"--cpus": "4", "--mem": "512M", "--gpus": "2", "--gpu-type": "a100",
      "--partition": "ml"}),
    (["--cpus-per-task=16", "--partition", "cpu", "--gpus-per-node=h100:8"],
     {"--cpus": "16", "--mem": "0", "--gpus": "8", "--gpu-type": "h100", "--partition": "cpu"}),
    # GRES spellings: untyped, typed without a count (one GPU), other GRES beside the GPUs
    (["--gres=gpu:3"], {"--cpus": "1", "--mem": "0", "--gpus": "3"}),
    (["--gres", "gpu:a100"], {"--cpus": "1", "--mem": "0", "--gpus": "1", "--gpu-type": "a100"}),
    (["--gres=mps:100,gpu:2"], {"--cpus": "1", "--mem": "0", "--gpus": "2"}),
    (["-G", "2"], {"--cpus": "1", "--mem": "0", "--gpus": "2"}),
    # --mem-per-cpu is per CPU: times the CPUs, in its own unit
    (["--mem-per-cpu=2G", "-c", "8"], {"--cpus": "8", "--mem": "16G", "--gpus": "0"}),
    # options that never take a value must not swallow the next word
    (["-k", "-H", "--exclusive", "--requeue", "-c", "2"],
     {"--cpus": "2", "--mem": "0", "--gpus": "0"}),
])
def test_options_reach_the_gate_and_sbatch_unchanged(fakes, tmp_path, argv, expected):
    job = script(tmp_path, "#!/bin/sh\ntrue\n")
    done, calls = wrap(fakes, tmp_path, *argv, str(job), "arg1", "--arg2")
    assert done.returncode == 0, done.stderr
    assert gate_args(calls) == expected
    assert sbatch_args(calls) == ["--parsable", *argv, str(job), "arg1", "--arg2"]
    assert done.stdout == "Submitted batch job 4242\n"


def test_sbatch_lines_are_read_up_to_the_first_command_and_the_command_line_wins(
        fakes, tmp_path):
    job = script(tmp_path, """\
        #!/bin/bash

        #SBATCH -c 8 --mem-per-cpu=1G   # eight CPUs
        #SBATCH --gres=gpu:a100:4
        # a comment between directives
        #SBATCH --partition=ml
        #SBATCH -J train-7
        echo start
        #SBATCH --cpus-per-task=99
        """)
    done, calls = wrap(fakes, tmp_path, str(job))
    assert done.returncode == 0, done.stderr
    assert gate_args(calls) == {"--cpus": "8", "--mem": "8G", "--gpus": "4",
                                "--gpu-type": "a100", "--partition": "ml",
                                "--workload": "train-7", "--kind": "job"}
    assert sbatch_args(calls) == ["--parsable", str(job)]

    done, calls = wrap(fakes, tmp_path, "--requeue", "-k", str(job))  # -k takes no value
    assert gate_args(calls)["--cpus"] == "8"
    assert sbatch_args(calls) == ["--parsable", "--requeue", "-k", str(job)]

    done, calls = wrap(fakes, tmp_path, "-c", "2", "--mem=4G", "--gres=gpu:1", str(job))
    assert gate_args(calls)["--cpus"] == "2"
    assert gate_args(calls)["--mem"] == "4G"  # --mem replaces the script's --mem-per-cpu
    assert (gate_args(calls)["--gpus"], gate_args(calls).get("--gpu-type")) == ("1", None)


def test_sco_workload_is_taken_out_and_recorded_with_the_job_id(fakes, tmp_path):
    job = script(tmp_path, "#!/bin/sh\n#SBATCH -J from-name\ntrue\n")
    done, calls = wrap(fakes, tmp_path, "--sco-workload", "train-7", "-t", "5", str(job))
    assert done.returncode == 0, done.stderr
    assert gate_args(calls)["--workload"] == "train-7"
    assert sbatch_args(calls) == ["--parsable", "-t", "5", str(job)]
    emits = [a for name, a in calls if name == "scoctl" and a[1:2] == ["emit"]]
    assert emits == [["-q", "emit", "SLURM_JOB_SUBMITTED", "--workload", "train-7",
                      "--job-id", "4242", "--hook"]]

    done, calls = wrap(fakes, tmp_path, "--sco-workload=train-8", "--parsable", str(job))
    assert gate_args(calls)["--workload"] == "train-8"
    assert done.stdout == "4242;cluster\n"  # asked for --parsable: sbatch's own output


def test_over_capacity_submits_nothing_and_records_the_failure(fakes, tmp_path):
    job = script(tmp_path, "#!/bin/sh\ntrue\n")
    done, calls = wrap(fakes, tmp_path, "--sco-workload", "train-7", "-c", "500", str(job),
                       gate_rc=3)
    assert done.returncode == 3
    assert [name for name, _ in calls] == ["scoctl", "scoctl"]  # gate, emit; no sbatch
    assert calls[1][1][:3] == ["-q", "emit", "SLURM_JOB_SUBMISSION_FAILED"]


@pytest.mark.parametrize("gate_rc", [1, 2])
def test_a_failing_gate_fails_open(fakes, tmp_path, gate_rc):
    done, calls = wrap(fakes, tmp_path, "-J", "etl", "--wrap", "true", gate_rc=gate_rc)
    assert done.returncode == 0
    assert "fail open" in done.stderr
    assert sbatch_args(calls) == ["--parsable", "-J", "etl", "--wrap", "true"]
