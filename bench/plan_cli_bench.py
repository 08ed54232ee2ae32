"""`scoctl --json plan --claims FILE --dry-run` as users run it: the whole process and its output.

    .venv/bin/python bench/plan_cli_bench.py [--workloads 10000] [--pools 2000] [--runs 3]

Writes the fleet of bench/plan_bench.py (fixed seed) as a YAML config and a JSON claims file in
a temporary directory, then times, interleaved round by round so that the machine's load hits
every line alike, the whole ``scoctl`` process with stdout to a file:

* ``scoctl --json plan --claims F --dry-run`` — compact JSON, no blast radius (the default);
* the same with ``--blast`` — every workload's blast radius (opt-in);
* the same with ``--blast --pretty`` — indented JSON (what a terminal gets), as ``plan --json``
  printed before issue 29;

and, as the baseline of the same run, the planner alone in this process (`plan_all` over the
same claims, no config, state or output). Prints each median, its output size, its ratio to the
2.5 s aim of issue 29 and to the planner alone, then one JSON line (milliseconds). scoctl's
bytecode is compiled first, as an installed package has it. Not part of the test command.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan_bench import CONTRACTS, FLAVOR_SHAPES, GI, flavors, fleet  # noqa: E402

from scoctl.core.planner import plan_all  # noqa: E402

SCOCTL = Path(sys.executable).parent / "scoctl"
AIM_S = 2.5  # issue 29: 10,000 workloads x 2,000 pools through the CLI


def write_inputs(tmp: Path, n_pools: int, n_workloads: int) -> tuple[Path, Path]:
    """The config (YAML) and the claims file (JSON) of the bench fleet."""
    pools, scores, claims = fleet(n_pools, n_workloads)
    lines = [f"state: {tmp}/state.db", f"spool: {tmp}/spool", "regions:",
             "  - {name: region-a, launch: {image: img}}", "flavors:"]
    lines += [f"  - {{name: {name}, vcpus: {vcpus}, ram: {ram}Gi}}"
              for name, vcpus, ram in FLAVOR_SHAPES]
    lines += ["node_reserve: {cpu: 100m, memory: 1Gi}", "pools:"]
    lines += [f"  - {{name: {p.name}, region: {p.region}, az: {p.az}, flavor: {p.flavor}, "
              f"group: {p.group}, tier: {p.tier}, depth: {p.depth}}}" for p in pools]
    lines.append("contracts:")
    lines += [f"  {c.name}: {{floor: {c.floor}, pool_cap: {c.pool_cap}, group_cap: "
              f"{c.group_cap}, min_pools: {c.min_pools}}}" for c in CONTRACTS.values()]
    lines += ["ranking:", "  id: r-bench", "  scores:"]
    lines += [f"    {name}: {score}" for name, score in scores.items()]
    config = tmp / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    body = {"claims": [{
        "workload": c.workload, "contract": c.contract, "pods": c.pods,
        "requests": {"cpu": c.requests["cpu"] // 1000, "memory": f"{c.requests['memory'] // GI}Gi"},
        "largest_pod": {"cpu": c.largest_pod["cpu"] // 1000,
                        "memory": f"{c.largest_pod['memory'] // GI}Gi"}} for c in claims]}
    path = tmp / "claims.json"
    path.write_text(json.dumps(body))
    return config, path


def planner_alone_ms(n_pools: int, n_workloads: int) -> float:
    """`plan_all` over the bench fleet in this process (the decision, nothing around it)."""
    pools, scores, claims = fleet(n_pools, n_workloads)
    flavor_map = flavors()
    started = time.perf_counter()
    plan_all(claims, CONTRACTS, pools, flavor_map, scores, {})
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=10_000)
    parser.add_argument("--pools", type=int, default=2_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    import scoctl

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(scoctl.__file__).parent)],
                   check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if k != "SCOCTL_CONFIG"}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        config, claims = write_inputs(tmp, args.pools, args.workloads)
        base = [str(SCOCTL), "--config", str(config), "--json", "plan", "--claims", str(claims),
                "--dry-run"]
        lines = {"plan --json": base, "plan --json --blast": [*base, "--blast"],
                 "plan --json --blast --pretty": [*base, "--blast", "--pretty"]}
        times: dict[str, list[float]] = {line: [] for line in lines}
        sizes: dict[str, int] = {}
        planner: list[float] = []
        out = tmp / "out.json"
        for _ in range(args.runs):
            for line, argv in lines.items():
                with out.open("wb") as sink:
                    started = time.perf_counter()
                    done = subprocess.run(argv, env=env, stdout=sink, stderr=subprocess.PIPE,
                                          check=False)
                    times[line].append((time.perf_counter() - started) * 1000)
                if done.returncode != 0:
                    raise SystemExit(f"{line} exited {done.returncode}: "
                                     f"{done.stderr.decode()[-400:]}")
                sizes[line] = out.stat().st_size
                if len(json.loads(out.read_bytes())["workloads"]) != args.workloads:
                    raise SystemExit(f"{line}: not every workload in the output")
            planner.append(planner_alone_ms(args.pools, args.workloads))
    alone = statistics.median(planner)
    print(f"plan through the CLI: {args.workloads} workloads, {args.pools} pools "
          f"(median of {args.runs}, load {os.getloadavg()[0]:.2f})")
    print(f"  {'baseline: the planner alone (plan_all)':<44} {alone:8.0f} ms")
    result: dict[str, float] = {"workloads": args.workloads, "pools": args.pools,
                                "planner_alone_ms": round(alone, 1)}
    for line in lines:
        ms = statistics.median(times[line])
        aim = (f", aim <= {AIM_S:g} s: {'met' if ms <= AIM_S * 1000 else 'NOT met'}"
               if line == "plan --json" else "")
        print(f"  {'scoctl ' + line:<44} {ms:8.0f} ms  {sizes[line] / 1e6:6.1f} MB  "
              f"{ms / alone:4.2f}x the planner alone{aim}")
        key = line.replace("plan ", "plan").replace(" --", "_").replace("--", "_")
        result[f"{key}_ms"] = round(ms, 1)
        result[f"{key}_bytes"] = sizes[line]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
