"""Start-up and gate latency: `python -c pass`, `scoctl --help`, and the Slurm gate against
`sinfo` alone on a real Slurm cluster started for the run (scripts/slurm-start.sh).

    .venv/bin/python bench/startup_bench.py [--runs 20] [--no-slurm]

Prints medians (ms) and a JSON line. Not part of the test command.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCOCTL = Path(sys.executable).parent / "scoctl"


def median_ms(argv: list[str], runs: int, env: dict[str, str] | None = None,
              ok: tuple[int, ...] = (0,)) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append((time.perf_counter() - started) * 1000)
        if done.returncode not in ok:
            raise SystemExit(f"{argv} exited {done.returncode}: {done.stderr.decode()[-400:]}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--no-slurm", action="store_true")
    args = parser.parse_args()
    result = {
        "python -c pass": median_ms([sys.executable, "-c", "pass"], args.runs),
        "scoctl --help": median_ms([str(SCOCTL), "--help"], args.runs),
    }
    if not args.no_slurm:
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)  # munged and slurmd run as other users
            env = {**os.environ, "SLURM_DIR": f"{tmp}/slurm", "PORT_BASE": "7817"}
            subprocess.run([str(ROOT / "scripts/slurm-start.sh")], env=env, check=True,
                           capture_output=True)
            try:
                env["SLURM_CONF"] = f"{tmp}/slurm/etc/slurm.conf"
                config = Path(tmp) / "config.yaml"
                config.write_text(
                    f"state: {tmp}/state.db\nregions:\n  - name: r\n    launch: {{image: i}}\n"
                    "ranking: {id: r, scores: {}}\n")
                result["sinfo --json (partition ml)"] = median_ms(
                    ["sinfo", "--json", "-p", "ml"], args.runs, env)
                result["sinfo -N -o (format string)"] = median_ms(
                    ["sinfo", "-h", "-N", "-o", "%N %c %m %G %P %T"], args.runs, env)
                result["scoctl gate --backend slurm"] = median_ms(
                    [str(SCOCTL), "--config", str(config), "-q", "gate", "--backend", "slurm",
                     "--cpus", "4", "--mem", "8G", "--gpus", "1", "--no-elastic"],
                    args.runs, env)
                result["scoctl gate --backend slurm --workload"] = median_ms(
                    [str(SCOCTL), "--config", str(config), "-q", "gate", "--backend", "slurm",
                     "--cpus", "4", "--mem", "8G", "--gpus", "1", "--no-elastic",
                     "--workload", "bench-job"], args.runs, env)
            finally:
                subprocess.run([str(ROOT / "scripts/slurm-stop.sh")], env=env, check=False,
                               capture_output=True)
    width = max(len(k) for k in result)
    for name, ms in result.items():
        print(f"{name:<{width}}  {ms:8.1f} ms (median of {args.runs})")
    print(json.dumps({k: round(v, 1) for k, v in result.items()}))


if __name__ == "__main__":
    main()
