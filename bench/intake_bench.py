"""Benchmark: Kubernetes demand intake of many pending pods.

Seeds the Kubernetes emulator in-process with N pending, unschedulable pods (40,000 by default,
spread over 40 workloads of Deployments), then times each phase of intake through scoctl's real
adapter (the official client over HTTP, through a generated kubeconfig):

* list — `KubernetesCluster.pending_pods()` (paged list, raw JSON -> PodInfo);
* normalise — `is_provisionable` + `normalise` into one claim per workload;
* claims written — the watch stage's pass over the listed pods (`scoctl.stages.watch.run_pass`
  with the pods handed in: the other reads, the pure decision, one transaction of `put_claim`
  and status tokens into a fresh SQLite state);
* watch --once — the same pass end to end, listing the pods itself.

Usage: ``python bench/intake_bench.py [--pods 40000] [--workloads 40] [--page-size 2000]``.
Not part of the test command.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import SystemClock
from scoctl.config.schema import load_config
from scoctl.core.demand import is_provisionable, normalise
from scoctl.core.quantity import format_resources
from scoctl.sim import k8s_emulator as ke
from scoctl.stages.watch import run_pass
from scoctl.state import open_store

UNSCHEDULABLE = ("0/100 nodes are available: 100 Insufficient cpu. preemption: 0/100 nodes are "
                 "available: 100 No preemption victims found for incoming pod..")


def seed(emulator: ke.K8sEmulator, pods: int, workloads: int) -> None:
    """N pending pods owned by ReplicaSets of `workloads` Deployments."""
    per, extra = divmod(pods, workloads)
    for w in range(workloads):
        count = per + (1 if w < extra else 0)
        dep = emulator.add(ke.make_deployment(
            f"orders-{w:03d}", "shop", replicas=count, cpu="4", memory="16Gi",
            pod_labels={"sco/workload": f"orders-{w:03d}"}))
        rs = emulator.add(ke.make_replicaset(dep))
        pods = ke.pods_for(rs, count, unschedulable=UNSCHEDULABLE)
        emulator.add(pods[0])  # validated once; the rest share its shape
        emulator.add_many(pods[1:], validate_obj=False, copy_obj=False)


def write_config(directory: Path, kubeconfig: Path) -> Path:
    """A minimal config whose Kubernetes source is the emulator."""
    path = directory / "config.yaml"
    path.write_text(f"""
state: {directory}/state.db
spool: {directory}/spool
regions: [{{name: region-a, launch: {{image: ubuntu-24.04, networks: [net-a]}}}}]
flavors: [{{name: c4.2xlarge, vcpus: 32, ram: 128Gi}}]
pools: [{{name: c4.2xlarge.az1.spot, region: region-a, az: az1, flavor: c4.2xlarge,
         group: row-a, tier: reclaimable, depth: 40}}]
ranking: {{id: r-1, scores: {{c4.2xlarge.az1.spot: 0.9}}}}
kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}
""", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print seconds per phase and pods/s."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument("--page-size", type=int, default=2000)
    args = parser.parse_args(argv)

    emulator = ke.K8sEmulator().start()
    try:
        started = time.perf_counter()
        seed(emulator, args.pods, args.workloads)
        seeded = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = Path(tmp) / "kubeconfig"
            kubeconfig.write_text(emulator.kubeconfig(), encoding="utf-8")
            config = load_config(write_config(Path(tmp), kubeconfig))
            with KubernetesCluster(str(kubeconfig), page_size=args.page_size) as cluster:
                emulator.add(ke.make_node("n1", cpu="16", memory="64Gi"))
                t0 = time.perf_counter()
                pending = cluster.pending_pods()
                t1 = time.perf_counter()
                claims = normalise(p for p in pending if is_provisionable(p))
                t2 = time.perf_counter()
                with open_store(Path(tmp) / "state.db", create=True) as store:
                    written = run_pass(config, store, SystemClock(), sources=["k8s"],
                                       cluster=cluster, pending_pods=pending)
                    t3 = time.perf_counter()
                    stored = store.claims()
                with open_store(Path(tmp) / "fresh.db", create=True) as store:
                    t4 = time.perf_counter()
                    full = run_pass(config, store, SystemClock(), sources=["k8s"],
                                    cluster=cluster)
                    t5 = time.perf_counter()
    finally:
        emulator.stop()

    total_pods = sum(c.pods for c in claims.values())
    if total_pods != args.pods:
        print(f"error: {total_pods} pods in claims, expected {args.pods}", file=sys.stderr)
        return 1
    if len(stored) != args.workloads or sum(c.pods for c in stored) != args.pods:
        print(f"error: {len(stored)} claims stored, expected {args.workloads}", file=sys.stderr)
        return 1
    if full.claims_written != args.workloads:
        print("error: the full pass wrote the wrong number of claims", file=sys.stderr)
        return 1
    list_s, norm_s, write_s, once_s = t1 - t0, t2 - t1, t3 - t2, t5 - t4
    first = next(iter(claims.values()))
    print(f"seed (in-process, not timed as intake): {seeded:.2f} s")
    print(f"pods: {len(pending)}  workloads: {len(claims)}  page size: {args.page_size}")
    print(f"list       {list_s:7.3f} s  {len(pending) / list_s:10.0f} pods/s")
    print(f"normalise  {norm_s:7.3f} s  {len(pending) / norm_s:10.0f} pods/s")
    print(f"intake     {list_s + norm_s:7.3f} s  {len(pending) / (list_s + norm_s):10.0f} pods/s")
    print(f"claims written {write_s:7.3f} s  ({written.claims_written} claims, "
          f"{written.tokens} tokens, one transaction)")
    print(f"watch --once {once_s:7.3f} s  (list + decide + record, {full.claims_written} claims)")
    print(f"claim of {next(iter(claims))}: {first.pods} pods, {format_resources(first.requests)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
