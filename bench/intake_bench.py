"""Benchmark: Kubernetes demand intake of many pending pods.

Seeds the Kubernetes emulator in-process with N pending, unschedulable pods (40,000 by default,
spread over 40 workloads of Deployments), then times each phase of intake through scoctl's real
adapter (the official client over HTTP, through a generated kubeconfig):

* list — `KubernetesCluster.pending_pods()` (paged list, raw JSON -> PodInfo);
* normalise — `is_provisionable` + `normalise` into one claim per workload.

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
from scoctl.core.demand import is_provisionable, normalise
from scoctl.core.quantity import format_resources
from scoctl.sim import k8s_emulator as ke

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
            with KubernetesCluster(str(kubeconfig), page_size=args.page_size) as cluster:
                t0 = time.perf_counter()
                pending = cluster.pending_pods()
                t1 = time.perf_counter()
                claims = normalise(p for p in pending if is_provisionable(p))
                t2 = time.perf_counter()
    finally:
        emulator.stop()

    total_pods = sum(c.pods for c in claims.values())
    if total_pods != args.pods:
        print(f"error: {total_pods} pods in claims, expected {args.pods}", file=sys.stderr)
        return 1
    list_s, norm_s = t1 - t0, t2 - t1
    first = next(iter(claims.values()))
    print(f"seed (in-process, not timed as intake): {seeded:.2f} s")
    print(f"pods: {len(pending)}  workloads: {len(claims)}  page size: {args.page_size}")
    print(f"list       {list_s:7.3f} s  {len(pending) / list_s:10.0f} pods/s")
    print(f"normalise  {norm_s:7.3f} s  {len(pending) / norm_s:10.0f} pods/s")
    print(f"intake     {list_s + norm_s:7.3f} s  {len(pending) / (list_s + norm_s):10.0f} pods/s")
    print(f"claim of {next(iter(claims))}: {first.pods} pods, {format_resources(first.requests)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
