"""The cost of rebalance's fresh plan (design: Rebalance) at Karpenter's scale.

The inputs of `karpenter_bench.py` as core values: 400 flavors (8 families x 5 generations x 10
sizes) in 5 availability zones, 2,000 pools (one generation committed, 25 correlation groups),
1,000 claims of 1 to 79 pods (40,000 pods, 12 shapes, nine in ten tolerate the reclaimable
taint) under contracts T1-T3. Timed, per run:

* plan — `planner.plan_all`, every workload (the plan step of a full pass), with half the
  workloads holding their plan already (so the fresh plan has units to give back);
* fresh — the same `plan_all` with `fresh=` (each workload that holds units also planned
  afresh in the same context, `planner.plan_fresh`; one that holds none has nothing to
  move), then `rebalance.triggers` per workload, less the plan time: what the rebalance adds
  to that pass;
* incremental — `plan_all` re-planning a tenth of the claims (the others keep their plans),
  without and with `fresh=` (the fresh plans of just those).

Prints the medians, and fresh as a share of plan (issue 25's aim: the extra planning adds at
most 20% to a pass; the pass also lists pods, records claims and commits a generation, which
`karpenter_bench.py` times). Usage: ``python bench/rebalance_bench.py [--runs 5]``. Not part of
the test command.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

from scoctl.core import rebalance
from scoctl.core.model import Claim, Contract, Flavor, Pool, Tier
from scoctl.core.planner import WorkloadPlan, plan_all

GI = 2**30
WORKLOADS = 1_000
PODS = 40_000
AZS = 5
FAMILIES = [("c", 2, 0), ("m", 4, 0), ("r", 8, 0), ("x", 16, 0), ("i", 4, 0), ("d", 8, 0),
            ("t", 2, 0), ("g", 8, 1)]
GENERATIONS = [5, 6, 7, 8, 9]
SIZES = [2, 4, 8, 16, 32, 48, 64, 96, 128, 192]
POD_SHAPES = [(250, 0.5, 0), (500, 1, 0), (1000, 2, 0), (1000, 4, 0), (2000, 4, 0),
              (2000, 8, 0), (4000, 8, 0), (4000, 16, 0), (8000, 32, 0), (16000, 64, 0),
              (4000, 32, 1), (8000, 64, 2)]
CONTRACTS = {
    "T1": Contract("T1", floor=0.30, pool_cap=0.15, group_cap=0.30, min_pools=8),
    "T2": Contract("T2", floor=0.10, pool_cap=0.25, group_cap=0.50, min_pools=4),
    "T3": Contract("T3", floor=0.0, pool_cap=0.50, group_cap=1.0, min_pools=2),
}


def inputs(rnd: random.Random) -> tuple[dict[str, Flavor], list[Pool], dict[str, float],
                                        list[Claim]]:
    flavors: dict[str, Flavor] = {}
    pools: list[Pool] = []
    scores: dict[str, float] = {}
    for family, ram_per_cpu, gpu_per_8 in FAMILIES:
        for gen in GENERATIONS:
            for vcpus in SIZES:
                name = f"{family}{gen}.{vcpus}x"
                gpus = max(1, vcpus // 8) * gpu_per_8 if gpu_per_8 else 0
                accel = {"nvidia.com/gpu": gpus} if gpus else {}
                alloc = {"cpu": vcpus * 1000 - 100, "memory": vcpus * ram_per_cpu * GI - GI,
                         **accel}
                flavors[name] = Flavor(name, vcpus, vcpus * ram_per_cpu * GI, accel, alloc)
                for az in range(1, AZS + 1):
                    tier: Tier = "committed" if gen == 5 else "reclaimable"
                    depth = rnd.randint(5, 20) if tier == "committed" else rnd.randint(20, 200)
                    pool = f"{name}.az{az}.{tier[:4]}"
                    pools.append(Pool(pool, "region-a", f"az{az}", name, f"az{az}-gen{gen}",
                                      tier, depth))
                    scores[pool] = round(rnd.uniform(0.3, 1.0), 3)
    counts = [rnd.randint(1, 79) for _ in range(WORKLOADS)]
    while sum(counts) != PODS:
        i = rnd.randrange(WORKLOADS)
        step = 1 if sum(counts) < PODS else -1
        if 1 <= counts[i] + step <= 79:
            counts[i] += step
    claims = []
    for w, count in enumerate(counts):
        cpu, mem, gpus = POD_SHAPES[rnd.randrange(len(POD_SHAPES))]
        pod = {"cpu": cpu, "memory": int(mem * GI), **({"nvidia.com/gpu": gpus} if gpus else {})}
        claims.append(Claim(f"wl-{w:04d}", rnd.choice(list(CONTRACTS)),
                            {k: v * count for k, v in pod.items()}, pod, count,
                            tolerates_reclaimable=rnd.random() < 0.9))
    return flavors, pools, scores, claims


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    flavors, pools, scores, claims = inputs(random.Random(25))
    first = plan_all(claims, CONTRACTS, pools, flavors, scores, {})
    current = {slug: plan.units() for i, (slug, plan) in enumerate(sorted(first.items()))
               if i % 2 == 0}
    plan_s, fresh_s = [], []
    found = 0
    for _ in range(args.runs):
        gc.collect()
        started = time.perf_counter()
        plans = plan_all(claims, CONTRACTS, pools, flavors, scores, current)
        plan_s.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        fresh: dict[str, WorkloadPlan] = {}
        plan_all(claims, CONTRACTS, pools, flavors, scores, current, fresh=fresh)
        found = sum(bool(rebalance.triggers(plans[slug], fresh[slug],
                                            CONTRACTS[plans[slug].contract], 0.1))
                    for slug in fresh)
        fresh_s.append(time.perf_counter() - started - plan_s[-1])
    plan_m, fresh_m = statistics.median(plan_s), statistics.median(fresh_s)
    print(f"{len(claims)} claims, {len(pools)} pools, {args.runs} runs (medians)")
    print(f"plan (plan_all):               {plan_m:.3f} s")
    print(f"fresh (fresh= + triggers):     {fresh_m:.3f} s  ({len(fresh)} planned afresh: "
          f"those holding units; {found} triggered)")
    print(f"plan + fresh:                  {plan_m + fresh_m:.3f} s  "
          f"(+{100 * fresh_m / plan_m:.0f}% of the plan step)")
    # an incremental pass (the controller's): a tenth of the claims changed; only those are
    # planned afresh (an exclusion that lapses re-plans the workloads it held back)
    # (every other one of them holds units, as in the full pass above)
    only = {c.workload for i, c in enumerate(sorted(claims, key=lambda c: c.workload))
            if i % 10 in (3, 4)}
    inc_s, inc_fresh_s = [], []
    for _ in range(args.runs):
        gc.collect()
        started = time.perf_counter()
        plan_all(claims, CONTRACTS, pools, flavors, scores, current, only=only,
                 previous=plans)
        inc_s.append(time.perf_counter() - started)
        gc.collect()
        started = time.perf_counter()
        both: dict[str, WorkloadPlan] = {}
        plan_all(claims, CONTRACTS, pools, flavors, scores, current, only=only,
                 previous=plans, fresh=both)
        inc_fresh_s.append(time.perf_counter() - started - inc_s[-1])
    inc_m, inc_fresh_m = statistics.median(inc_s), statistics.median(inc_fresh_s)
    print(f"incremental plan ({len(only)} changed): {inc_m:.3f} s; fresh of those "
          f"{inc_fresh_m:.3f} s (+{100 * inc_fresh_m / inc_m:.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
