"""Planning at Karpenter's scale: 40,000 pending pods to a committed plan generation.

Karpenter's published scheduling benchmark places 40,151 pods onto 400 instance types in 59.1 s.
This one seeds the Kubernetes emulator (in this process) with 40,000 pending, unschedulable pods
of mixed shapes — CPU-only and GPU pods, 250m to 16 vCPU — owned by the ReplicaSets of 1,000
Deployments (1 to 79 pods each, labelled with their workload and contract tier; nine in ten
tolerate the reclaimable taint, the rest may only use committed pools; one Deployment in
five places its pods, design: Constraints: a zone nodeSelector, a required
``node.kubernetes.io/instance-type In [...]`` affinity, a zone spread with DoNotSchedule or a
preferred instance-type term, in turn; ``--no-constraints`` leaves them out), and writes a
config of 400 flavors (8 families x 5 generations x 10 sizes) in 5 availability zones: 2,000
pools (one generation committed, the rest reclaimable, 25 correlation groups) with a score each.

Timed, end to end, from the pods to a committed generation:

* watch — `scoctl.stages.watch.run_pass`: list the pods through the official client, decide
  1,000 claims, record them in a fresh SQLite state;
* plan — `scoctl.stages.plan.run_plan`: read the claims, plan every workload over the 2,000
  pools under its contract, plan afresh each workload that holds units (the fresh plan
  rebalance compares with, design: Rebalance: `run_plan` computes it in `planner.plan_all` and
  decides the rebalances before it returns), commit one generation.

Between the two, untimed, every other workload (`--held`, a fraction) is given its plan's
units as ready instances in the state (the plan a first, untimed pass commits), so that the
plan stage plans those workloads afresh too: a workload that holds no unit has nothing to move
and gets no fresh plan. Runs `--runs` times (fresh state each) and prints the medians (and the
CPU time of this process, which also serves the emulated API, with the share of the
emulator's request threads apart: a real API server runs elsewhere), the total as a ratio to
Karpenter's 59.1 s, the aim of issue 16 (at most 2 s), and the plan stage's time to its
committed generation per run with its p50 and p99 against issue 29's aim (1.0 s, p99 1.2 s)
and the load average. Loading the config (once per process in a controller) is timed apart.
``--dump FILE`` writes the last run's committed plans and rebalance decisions as JSON;
``--check FILE`` compares them with such a file (exit 1 when they differ): the same inputs
give the same plans before and after an optimisation.
Usage: ``python bench/karpenter_bench.py [--runs 5] [--no-constraints] [--held 0.5]
[--dump FILE | --check FILE]``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import SystemClock
from scoctl.config.schema import Config, load_config
from scoctl.core.model import InstanceRecord
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_auth import shipped_rbac
from scoctl.stages.plan import PlanResult, run_plan
from scoctl.stages.watch import run_pass
from scoctl.state import Store, open_store

KARPENTER_S = 59.1
AIM_S = 2.0
PLAN_AIM_S, PLAN_P99_AIM_S = 1.0, 1.2  # issue 29: the plan stage to its committed generation
PODS = 40_000
WORKLOADS = 1_000
AZS = 5
# family, GiB of memory per vCPU, GPUs per 8 vCPUs
FAMILIES = [("c", 2, 0), ("m", 4, 0), ("r", 8, 0), ("x", 16, 0), ("i", 4, 0), ("d", 8, 0),
            ("t", 2, 0), ("g", 8, 1)]
GENERATIONS = [5, 6, 7, 8, 9]
SIZES = [2, 4, 8, 16, 32, 48, 64, 96, 128, 192]  # vCPUs
POD_SHAPES = [("250m", "512Mi", 0), ("500m", "1Gi", 0), ("1", "2Gi", 0), ("1", "4Gi", 0),
              ("2", "4Gi", 0), ("2", "8Gi", 0), ("4", "8Gi", 0), ("4", "16Gi", 0),
              ("8", "32Gi", 0), ("16", "64Gi", 0), ("4", "32Gi", 1), ("8", "64Gi", 2)]
RECLAIMABLE_TOLERATION = {"key": "reclaimable", "operator": "Equal", "value": "true",
                          "effect": "NoSchedule"}
UNSCHEDULABLE = ("0/100 nodes are available: 100 Insufficient cpu. preemption: 0/100 nodes are "
                 "available: 100 No preemption victims found for incoming pod..")
ZONE, INSTANCE_TYPE = "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"


class ServedCpu:
    """The CPU time the emulator's request threads spend serving (they share this process, so
    the end-to-end figure includes the emulated API server's work; this tells it apart)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._lock = threading.Lock()
        dispatch = ke._Handler._dispatch
        served = self

        def timed(handler: Any, method: str) -> None:
            started = time.thread_time()
            try:
                dispatch(handler, method)
            finally:
                with served._lock:
                    served.seconds += time.thread_time() - started

        ke._Handler._dispatch = timed  # type: ignore[method-assign]


def pod_counts(rnd: random.Random) -> list[int]:
    """1,000 counts of 1 to 79 pods that add up to exactly 40,000."""
    counts = [rnd.randint(1, 79) for _ in range(WORKLOADS)]
    while sum(counts) != PODS:
        i = rnd.randrange(WORKLOADS)
        step = 1 if sum(counts) < PODS else -1
        if 1 <= counts[i] + step <= 79:
            counts[i] += step
    return counts


def placement(w: int, name: str, gpus: int) -> dict[str, Any]:
    """The scheduling constraints (design: Constraints) of workload `w`'s pods, as `make_deployment`
    takes them: one workload in five has some, in turn a zone nodeSelector, a required
    instance-type ``In`` (three generations of three large sizes of one family, the committed
    one included, so every pod shape fits), a zone spread with DoNotSchedule, a preferred
    instance-type term. Chosen by index, not drawn: the shapes stay those of
    ``--no-constraints``."""
    if w % 5 != 2:
        return {}
    family = "g" if gpus else FAMILIES[w % 7][0]  # GPU pods need the GPU family
    types = [f"{family}{gen}.{size}x" for gen in (5, 6, 7) for size in (64, 128, 192)]
    term = {"matchExpressions": [{"key": INSTANCE_TYPE, "operator": "In", "values": types}]}
    kind = (w // 5) % 4
    if kind == 0:
        return {"node_selector": {ZONE: f"az{w % AZS + 1}"}}
    if kind == 1:
        return {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}}
    if kind == 2:
        return {"topology_spread_constraints": [{
            "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"sco/workload": name}}}]}
    return {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": term}]}}}


def seed(emulator: ke.K8sEmulator, rnd: random.Random, *, constraints: bool) -> None:
    """1,000 Deployments of mixed shapes (a fifth with placement, when `constraints`), their
    ReplicaSets and 40,000 pending pods."""
    for w, count in enumerate(pod_counts(rnd)):
        cpu, memory, gpus = POD_SHAPES[rnd.randrange(len(POD_SHAPES))]
        name = f"wl-{w:04d}"
        template = ke.make_deployment(
            name, "batch", replicas=count, cpu=cpu, memory=memory, gpus=gpus,
            pod_labels={"sco/workload": name, "sco/contract": rnd.choice(["T1", "T2", "T3"])},
            **(placement(w, name, gpus) if constraints else {}))
        if rnd.random() < 0.9:  # most may run on reclaimable capacity; the rest committed only
            template["spec"]["template"]["spec"]["tolerations"] = [RECLAIMABLE_TOLERATION]
        deployment = emulator.add(template)
        replicaset = emulator.add(ke.make_replicaset(deployment))
        pods = ke.pods_for(replicaset, count, unschedulable=UNSCHEDULABLE)
        emulator.add(pods[0])  # validated once; the rest share its shape
        emulator.add_many(pods[1:], validate_obj=False, copy_obj=False)


def write_config(directory: Path, kubeconfig: Path, rnd: random.Random) -> Path:
    """400 flavors in 5 AZs: 2,000 pools with scores; contracts T1-T3."""
    flavors, pools, scores = [], [], []
    for family, ram_per_cpu, gpu_per_8 in FAMILIES:
        for gen in GENERATIONS:
            for vcpus in SIZES:
                flavor = f"{family}{gen}.{vcpus}x"
                gpus = max(1, vcpus // 8) * gpu_per_8 if gpu_per_8 else 0
                extra = f", accelerators: {{nvidia.com/gpu: {gpus}}}" if gpus else ""
                flavors.append(f"  - {{name: {flavor}, vcpus: {vcpus}, "
                               f"ram: {vcpus * ram_per_cpu}Gi{extra}}}")
                for az in range(1, AZS + 1):
                    tier = "committed" if gen == 5 else "reclaimable"
                    depth = rnd.randint(5, 20) if tier == "committed" else rnd.randint(20, 200)
                    pool = f"{flavor}.az{az}.{tier[:4]}"
                    pools.append(f"  - {{name: {pool}, region: region-a, az: az{az}, "
                                 f"flavor: {flavor}, group: az{az}-gen{gen}, tier: {tier}, "
                                 f"depth: {depth}}}")
                    scores.append(f"    {pool}: {rnd.uniform(0.3, 1.0):.3f}")
    path = directory / "config.yaml"
    path.write_text("\n".join([
        f"state: {directory}/state.db",
        f"spool: {directory}/spool",
        "regions: [{name: region-a, launch: {image: ubuntu-24.04, networks: [net-a]}}]",
        "node_reserve: {cpu: 100m, memory: 1Gi}",
        "flavors:", *flavors,
        "pools:", *pools,
        "contracts:",
        "  T1: {floor: 0.30, pool_cap: 0.15, group_cap: 0.30, min_pools: 8}",
        "  T2: {floor: 0.10, pool_cap: 0.25, group_cap: 0.50, min_pools: 4}",
        "  T3: {floor: 0.0, pool_cap: 0.50, group_cap: 1.0, min_pools: 2}",
        "ranking:", "  id: r-karpenter", "  scores:", *scores,
        f"kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}",
        f"bootstrap: {{api_endpoint: '127.0.0.1:6443', ca_cert_hash: 'sha256:{'ab' * 32}'}}",
    ]) + "\n", encoding="utf-8")
    return path


def hold(store: Store, plans: Mapping[str, Mapping[str, int]]) -> int:
    """Give each workload of `plans` its units (pool -> units) as ready instances; returns
    how many."""
    stamp = store.now()
    n = 0
    with store.transaction():
        for slug, units in sorted(plans.items()):
            for pool, count in sorted(units.items()):
                for _ in range(count):
                    n += 1
                    name = f"sco-{slug.replace('/', '-')}-{n:05d}"
                    store.upsert_instance(InstanceRecord(
                        id=f"srv-{n:05d}", name=name, region="region-a", workload=slug,
                        pool=pool, generation=1, launch_id=None, status=InstanceStatus.READY,
                        created=stamp, updated=stamp, active_at=stamp, ready_at=stamp,
                        node_name=name))
    return n


def outcome(store: Store, planned: PlanResult) -> dict[str, Any]:
    """What `--dump` writes and `--check` compares: every committed plan (its rows, reasons
    and flags) and each fresh-planned workload's rebalance decision."""
    plans = {slug: {"claim_version": r.claim_version, "contract": r.contract,
                    "feasible": r.feasible, "degraded": r.degraded, "reasons": list(r.reasons),
                    "pools": [[u.pool, u.units] for u in r.pools]}
             for slug, r in sorted(store.plans().items())}
    decided = {slug: None if d.pending is None else {
        "trigger": d.pending.trigger.value, "planned": d.planned,
        "moves": [m.server_id for m in d.pending.moves],
        "into": dict(sorted((d.into or {}).items()))}
        for slug, d in sorted(planned.rebalances.items())}
    return {"plans": plans, "rebalances": decided}


def pct(values: list[float], q: float) -> float:
    """The `q` quantile of `values`, nearest rank (of 5 runs, p99 is the slowest)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def one_run(config: Config, path: Path, cluster: KubernetesCluster, served: ServedCpu,
            held: Mapping[str, Mapping[str, int]]) -> tuple[dict[str, float], Any]:
    """Watch (timed), the held units recorded (untimed), plan (timed), in a fresh state."""
    with open_store(path, create=True) as store:
        t0, cpu = time.perf_counter(), time.process_time()
        api = served.seconds
        watched = run_pass(config, store, SystemClock(), sources=["k8s"], cluster=cluster)
        t1 = time.perf_counter()
        cpu = time.process_time() - cpu
        instances = hold(store, held)
        t2, cpu2 = time.perf_counter(), time.process_time()
        planned = run_plan(config, store, SystemClock())
        t3, cpu = time.perf_counter(), cpu + time.process_time() - cpu2
        return ({"watch": t1 - t0, "plan": t3 - t2, "total": t1 - t0 + t3 - t2, "cpu": cpu,
                 "plan_cpu": time.process_time() - cpu2, "api_cpu": served.seconds - api},
                (watched, planned, store.plans(), instances, outcome(store, planned)))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the medians and the ratio to Karpenter's 59.1 s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--constraints", action=argparse.BooleanOptionalAction, default=True,
                        help="a fifth of the Deployments place their pods (design: Constraints)")
    parser.add_argument("--held", type=float, default=0.5,
                        help="the fraction of workloads that hold their plan's units")
    parser.add_argument("--dump", type=Path, help="write the last run's plans as JSON")
    parser.add_argument("--check", type=Path, help="compare the last run's plans with a dump")
    args = parser.parse_args(argv)
    rnd = random.Random(16)
    served = ServedCpu()
    emulator = ke.K8sEmulator().start()
    emulator.add_many(shipped_rbac())  # scoctl's role (configs/kubernetes/rbac.yaml)
    runs: list[dict[str, float]] = []
    load_before = os.getloadavg()
    try:
        seed(emulator, rnd, constraints=args.constraints)
        # The emulator's own objects (every pod as a dict) live in this process only because the
        # API server is emulated here: keep the cyclic collector off them, as it would be off
        # a real API server's, so that what is timed is scoctl's work.
        gc.collect()
        gc.freeze()
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(emulator.kubeconfig(), encoding="utf-8")
            path = write_config(Path(tmp), kubeconfig, rnd)
            started = time.perf_counter()
            config = load_config(path)
            config_s = time.perf_counter() - started
            with KubernetesCluster(str(kubeconfig)) as cluster:
                # untimed: the plan the held workloads hold (every other one, by slug)
                _, (_, _, first, _, _) = one_run(config, Path(tmp) / "state-first.db",
                                                  cluster, served, {})
                slugs = sorted(first)
                step = round(1 / args.held) if args.held > 0 else 0
                held = {slug: {u.pool: u.units for u in first[slug].pools}
                        for i, slug in enumerate(slugs) if step and i % step == 0}
                for run in range(args.runs):
                    timed, last = one_run(config, Path(tmp) / f"state-{run}.db", cluster,
                                          served, held)
                    runs.append(timed)
    finally:
        emulator.stop()
    load_after = os.getloadavg()

    watched, planned, plans, instances, result = last
    pods = watched.sources["k8s"].pending
    if watched.claims_written != WORKLOADS or not planned.committed or len(plans) != WORKLOADS:
        print(f"error: {watched.claims_written} claims, {len(plans)} plans committed "
              f"(expected {WORKLOADS})", file=sys.stderr)
        return 1
    units = sum(u.units for p in plans.values() for u in p.pools)
    feasible = sum(p.feasible for p in plans.values())
    median = {name: statistics.median(r[name] for r in runs) for name in runs[0]}
    print(f"{pods} pending pods, {WORKLOADS} workloads, {len(config.flavors)} flavors x {AZS} "
          f"AZs = {len(config.pools)} pools (medians of {args.runs} runs); constraints "
          f"{'on' if args.constraints else 'off'}: "
          f"{sum(1 for w in range(WORKLOADS) if args.constraints and w % 5 == 2)} workloads "
          f"place their pods")
    print(f"config load (once per process): {config_s:.3f} s")
    print(f"watch (pods -> claims committed)   {median['watch']:7.3f} s")
    print(f"plan  (claims -> generation {planned.generation})    {median['plan']:7.3f} s  "
          f"({units} units, {feasible}/{WORKLOADS} feasible; {len(held)} workloads hold "
          f"{instances} units, {len(planned.rebalances)} planned afresh, "
          f"{sum(d.pending is not None for d in planned.rebalances.values())} with a "
          f"rebalance trigger)")
    total = median["total"]
    each = ", ".join(f"{r['total']:.2f}" for r in runs)
    print(f"end to end {total:.3f} s (runs: {each}); CPU {median['cpu']:.3f} s, of which the "
          f"emulated API server's request threads {median['api_cpu']:.3f} s")
    print(f"ratio to Karpenter's {KARPENTER_S} s: {total / KARPENTER_S:.3f} "
          f"({KARPENTER_S / total:.0f}x faster); aim <= {AIM_S} s: "
          f"{'met' if total <= AIM_S else 'NOT met'}")
    plan_s = [r["plan"] for r in runs]
    p50, p99 = statistics.median(plan_s), pct(plan_s, 0.99)
    met = p50 <= PLAN_AIM_S and p99 <= PLAN_P99_AIM_S
    plan_cpu = ", ".join(f"{r['plan_cpu']:.3f}" for r in runs)
    print(f"committed generation (plan stage, fresh plans included), per run: "
          f"{', '.join(f'{t:.3f}' for t in plan_s)} s (CPU {plan_cpu} s)")
    print(f"  p50 {p50:.3f} s, p99 {p99:.3f} s; aim <= {PLAN_AIM_S} s, p99 <= "
          f"{PLAN_P99_AIM_S} s: {'met' if met else 'NOT met'}; load average "
          f"{' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after ({os.cpu_count()} CPUs)")
    print(json.dumps({"pods": pods, "workloads": WORKLOADS, "pools": len(config.pools),
                      "constraints": args.constraints, "held": len(held),
                      "fresh": len(planned.rebalances),
                      **{f"{k}_s": round(v, 3) for k, v in median.items()},
                      "plan_p50_s": round(p50, 3), "plan_p99_s": round(p99, 3),
                      "ratio_to_karpenter": round(total / KARPENTER_S, 4)}))
    if args.dump:
        args.dump.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n",
                             encoding="utf-8")
    if args.check:
        expected = json.loads(args.check.read_text(encoding="utf-8"))
        differ = sorted(slug for part in ("plans", "rebalances")
                        for slug in expected[part].keys() | result[part].keys()
                        if expected[part].get(slug) != result[part].get(slug))
        if differ:
            print(f"check: {len(differ)} plans or rebalances differ from {args.check}: "
                  f"{', '.join(differ[:10])}", file=sys.stderr)
            return 1
        print(f"check: the {len(result['plans'])} committed plans and "
              f"{len(result['rebalances'])} rebalance decisions equal {args.check}'s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
