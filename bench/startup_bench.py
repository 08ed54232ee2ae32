"""Start-up: ``scoctl --help`` and every ``scoctl COMMAND --help`` against a bare ``import typer``.

    .venv/bin/python bench/startup_bench.py [--runs 15]

The commands are read from ``scoctl --help`` (and each group's own --help), so a new command is
measured without editing this file. Runs are interleaved round by round, so the machine's load
hits every command alike. Prints each median and its ratio to ``python -c "import typer"`` (the
aim of issue 16: at most 1.3x for every one), the same ratio in CPU time (less sensitive to the
load of a shared machine), then one JSON line. scoctl's bytecode is compiled first, as an
installed package has it. The Slurm gate has its own benchmark (gate_bench.py). Not part of the
test command.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

SCOCTL = Path(sys.executable).parent / "scoctl"
AIM = 1.3


def listed_commands(argv: list[str]) -> list[str]:
    """The command names in the ``Commands:`` section of ``argv --help``."""
    out = subprocess.run([*argv, "--help"], capture_output=True, text=True, check=True).stdout
    names, inside = [], False
    for line in out.splitlines():
        if line.strip() == "Commands:":
            inside = True
        elif inside and line.startswith("  ") and line.strip():
            if not line.startswith("   "):
                names.append(line.split()[0])
        elif inside and line.strip():
            inside = False
    return names


def help_lines() -> dict[str, list[str]]:
    """Every --help line to time: the root, each command, and each command of a group."""
    lines = {"scoctl --help": [str(SCOCTL), "--help"]}
    for name in listed_commands([str(SCOCTL)]):
        lines[f"scoctl {name} --help"] = [str(SCOCTL), name, "--help"]
        for sub in listed_commands([str(SCOCTL), name]):
            lines[f"scoctl {name} {sub} --help"] = [str(SCOCTL), name, sub, "--help"]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    import scoctl

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(scoctl.__file__).parent)],
                   check=True, capture_output=True)
    commands = {"python -c 'import typer'": [sys.executable, "-c", "import typer"],
                **help_lines()}
    times: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, argv in commands.items():
            started, used = time.perf_counter(), _children_cpu()
            subprocess.run(argv, capture_output=True, check=True)
            times[name].append((time.perf_counter() - started) * 1000)
            cpu[name].append((_children_cpu() - used) * 1000)
    medians = {name: statistics.median(values) for name, values in times.items()}
    cpu_medians = {name: statistics.median(values) for name, values in cpu.items()}
    base = medians.pop("python -c 'import typer'")
    base_cpu = cpu_medians.pop("python -c 'import typer'")
    width = max(len(name) for name in medians)
    print(f"{'python -c import typer':<{width}}  {base:7.1f} ms (median of {args.runs}; CPU "
          f"{base_cpu:.1f} ms)")
    for name, ms in medians.items():
        print(f"{name:<{width}}  {ms:7.1f} ms  {ms / base:5.2f}x   CPU "
              f"{cpu_medians[name] / base_cpu:5.2f}x")
    worst = max(medians, key=lambda name: medians[name])
    ratio = medians[worst] / base
    worst_cpu = max(cpu_medians.values()) / base_cpu
    print(f"slowest: {worst} at {ratio:.2f}x a bare import typer "
          f"(aim <= {AIM}x: {'met' if ratio <= AIM else 'NOT met'}); "
          f"scoctl --help at {medians['scoctl --help'] / base:.2f}x; in CPU time the slowest "
          f"is {worst_cpu:.2f}x")
    print(json.dumps({"import_typer_ms": round(base, 1),
                      **{name: round(ms / base, 3) for name, ms in medians.items()}}))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
