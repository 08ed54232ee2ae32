"""Benchmark: intake of pending pods with mixed scheduling constraints (design: Constraints).

Builds N pending, unschedulable pod objects (40,000 by default) as the API returns them, over
40 Deployments whose templates mix a zone nodeSelector, a required instance-type affinity
(``In``), a ``NotIn`` / ``Exists`` term, a zone spread with DoNotSchedule, a preferred term and
none, and times, in process:

* convert — `adapters.kube_convert.pod_info` of every raw object (placement parsed, shared per
  template);
* decide — `core.intake.k8s.decide_k8s_intake` against 24 pools (three zones, four flavors,
  both tiers): claims with their ineligible pools, the never-satisfiable check.

Each run pauses the cyclic collector, as the watch pass does. The HTTP list itself is
`bench/intake_bench.py`'s. Medians of `--runs` runs are printed.
Usage: ``python bench/intake_constraints_bench.py [--pods 40000] [--runs 5]``. Not part of the
test command.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

from scoctl.adapters.kube_convert import pod_info
from scoctl.bulk import collector_paused
from scoctl.core.intake.common import Capacity
from scoctl.core.intake.k8s import K8sPolicy, K8sSnapshot, decide_k8s_intake
from scoctl.core.model import Flavor, NodeInfo, Pool

GI = 2**30
ZONES = ("az1", "az2", "az3")
FLAVORS = tuple(Flavor(f"m5.{n}xlarge", 4 * n, 16 * n * GI) for n in (1, 2, 4, 8))


def _placement(i: int) -> dict[str, Any]:
    zone = ZONES[i % 3]
    expr = {"key": "node.kubernetes.io/instance-type", "operator": "In",
            "values": [FLAVORS[i % 4].name, FLAVORS[(i + 1) % 4].name]}
    kinds: list[dict[str, Any]] = [
        {},
        {"nodeSelector": {"topology.kubernetes.io/zone": zone}},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}},
        {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": [zone]},
                {"key": "sco/group", "operator": "Exists"}]}]}}}},
        {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey":
                                        "topology.kubernetes.io/zone",
                                        "whenUnsatisfiable": "DoNotSchedule"}]},
        {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 50, "preference": {"matchExpressions": [expr]}}]}}},
    ]
    return kinds[i % len(kinds)]


def raw_pods(count: int, workloads: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        w = i % workloads
        out.append({
            "metadata": {"name": f"w{w}-{i}", "namespace": "bench", "uid": f"u{i}",
                         "labels": {"sco/workload": f"w{w}", "pod-template-hash": "abc"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"w{w}-abc",
                                              "controller": True}]},
            "spec": {"containers": [{"name": "main", "resources": {
                "requests": {"cpu": "2", "memory": "4Gi"}}}], **_placement(w)},
            "status": {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/3 nodes are available"}]},
        })
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--workloads", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    pools = tuple(Pool(f"{f.name}.{z}.{t[:4]}", "region-a", z, f.name, f"row-{z}", t, 50)
                  for z in ZONES for f in FLAVORS for t in ("committed", "reclaimable"))
    policy = K8sPolicy(capacity=Capacity(pools=pools, flavors=FLAVORS))
    nodes = (NodeInfo("n0", allocatable={"cpu": 16000, "memory": 64 * GI}, ready=True),)
    raws = raw_pods(args.pods, args.workloads)
    convert, decide = [], []
    for _ in range(args.runs):
        gc.collect()
        with collector_paused():  # as the watch pass runs (`stages.watch.run_pass`)
            started = time.perf_counter()
            pods = tuple(pod_info(raw) for raw in raws)
            converted = time.perf_counter()
            decision = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=nodes), policy)
            done = time.perf_counter()
        convert.append(converted - started)
        decide.append(done - converted)
    constrained = sum(1 for c in decision.claims if c.ineligible)
    total = statistics.median(convert) + statistics.median(decide)
    print(f"{args.pods} pods, {args.workloads} workloads, {len(pools)} pools: "
          f"{len(decision.claims)} claims ({constrained} with ineligible pools), "
          f"{len(decision.tokens)} tokens")
    print(f"convert {statistics.median(convert):.3f}s  decide {statistics.median(decide):.3f}s"
          f"  total {total:.3f}s  (aim 1.5s: {total / 1.5:.2f}x)")


if __name__ == "__main__":
    main()
