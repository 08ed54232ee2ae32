"""Day-2 decisions at scale (issue 29 item 3): one reconcile decision (`core.reconcile.decide`)
over 2,000 ready units and 40,000 running pods, deciding consolidation (a plan that holds a
tenth fewer units), expiry (`expire_after` passed for some units), drift (a changed image for
one workload), repair (NotReady Nodes past `repair_after`) and the budgets — the pure decision
a controller's reconcile pass makes, without Nova or Kubernetes I/O.

    python bench/day2_bench.py [--units 2000] [--pods 40000] [--workloads 20] [--runs 5]

Prints the median and the slowest of the runs, the decision's size (disruptions started,
scale-downs, updates, events) and the aim (1 s).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from scoctl.clock import rfc3339
from scoctl.core.model import Container, InstanceRecord, NodeInfo, OwnerRef, PodInfo, ServerInfo
from scoctl.core.model.disruption import Budget, DisruptionSettings, Units
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.reconcile import DriftView, Policy, Snapshot, decide
from scoctl.core.spec import LaunchSpec, hash_of

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
GIB = 2**30
ALLOC = {"cpu": 16000, "memory": 64 * GIB, "pods": 110}
REGION = "region-a"


def ago(seconds: float) -> str:
    return rfc3339(NOW - timedelta(seconds=seconds))


def world(units: int, pods: int, workloads: int) -> tuple[Snapshot, Policy]:
    pools = [f"pool-{i:02d}" for i in range(40)]
    old = LaunchSpec(flavor="m1.xlarge", image="golden-2026-11")
    new = LaunchSpec(flavor="m1.xlarge", image="golden-2026-12")
    servers, instances, nodes = [], [], []
    on_node: dict[str, tuple[PodInfo, ...]] = {}
    targets: dict[str, dict[str, int]] = {}
    specs: dict[tuple[str, str], LaunchSpec] = {}
    templates: dict[str, tuple[tuple[Container, ...], tuple[OwnerRef, ...]]] = {}
    per_unit = -(-pods // (units - units // 10))  # one unit in ten runs nothing
    for i in range(units):
        workload, pool = f"w{i % workloads:03d}", pools[i % len(pools)]
        sid, name = f"srv-{i:05d}", f"sco-{workload}-{i:05d}"
        spec = old if workload == "w000" else new  # w000 drifted: its image changed
        specs[(workload, pool)] = new
        tags = frozenset({"sco:managed", f"sco:workload={workload}", f"sco:pool={pool}",
                          "sco:gen=7", "sco:launch=l-000000000001"})
        servers.append(ServerInfo(id=sid, name=name, status="ACTIVE", tags=tags))
        created = 3600 * 24 * (40 if i % 50 == 0 else 3)  # one in 50 past expire_after
        instances.append(InstanceRecord(
            id=sid, name=name, region=REGION, workload=workload, pool=pool, generation=7,
            launch_id="l-000000000001", status=InstanceStatus.READY, created=ago(created),
            updated=ago(60), active_at=ago(created - 60), ready_at=ago(created - 120),
            node_name=name, spec_hash=hash_of(spec), labels=""))
        nodes.append(NodeInfo(name=name, labels={"sco/managed": "true", "sco/workload": workload,
                                                 "sco/pool": pool},
                              allocatable=ALLOC, ready=i % 200 != 0,  # one in 200 NotReady
                              provider_id=f"openstack:///{sid}"))
        # one container and owners value per pod template, as the adapter builds them
        containers, owners = templates.setdefault(workload, (
            (Container("c", {"cpu": 500, "memory": GIB}),),
            (OwnerRef("ReplicaSet", f"{workload}-rs", controller=True),)))
        on_node[name] = tuple(
            PodInfo(name=f"{name}-p{k}", namespace="default", node_name=name, phase="Running",
                    containers=containers, owners=owners)
            for k in range(per_unit if i % 10 else 0))  # one in ten empty
        plan = targets.setdefault(workload, {})
        plan[pool] = plan.get(pool, 0) + (0 if i % 10 == 0 else 1)  # the plan shrank
    budgets = (Budget(Units.share(10)),)
    settings = DisruptionSettings(budgets=budgets, expire_after=30 * 24 * 3600.0,
                                  repair_after=600.0)
    policy = Policy(launch_timeout=300.0, launch_settle=30.0, registration_timeout=900.0,
                    idle_timeout=600.0, negative_cache=180.0, orphan_grace=1800.0,
                    gc_orphans=False, budgets=budgets, workload_budgets={},
                    disruption=settings)
    instances = [replace(i, unhealthy_since=ago(1200)) if not n.ready else i
                 for n, i in zip(nodes, instances, strict=True)]
    snapshot = Snapshot(
        region=REGION, servers=tuple(servers), instances=tuple(instances), k8s_nodes=tuple(nodes),
        busy_pods={name: len(p) for name, p in on_node.items() if p}, pods=on_node,
        tiers=dict.fromkeys(pools, "reclaimable"), targets=targets,
        pools=frozenset(pools), drift=DriftView(specs=specs))
    return snapshot, policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=2000)
    parser.add_argument("--pods", type=int, default=40000)
    parser.add_argument("--workloads", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    built = time.perf_counter()
    snapshot, policy = world(args.units, args.pods, args.workloads)
    built = time.perf_counter() - built
    times = []
    decision = None
    for _ in range(args.runs):
        started = time.perf_counter()
        decision = decide(snapshot, policy, NOW)
        times.append(time.perf_counter() - started)
    assert decision is not None
    started_events = [e for e in decision.events if e.token == "DISRUPTION_STARTED"]
    reasons: dict[str, int] = {}
    for event in started_events:
        reasons[str(event.detail["reason"])] = reasons.get(str(event.detail["reason"]), 0) + 1
    print(f"{args.units} units, {sum(len(p) for p in snapshot.pods.values())} pods, "
          f"{args.workloads} workloads (snapshot built in {built:.2f}s)")
    print(f"decide: median {statistics.median(times):.3f}s  slowest {max(times):.3f}s  "
          f"(aim 1.0s)")
    print(f"decision: {len(started_events)} disruptions started {dict(sorted(reasons.items()))}, "
          f"{len(decision.scale_downs)} scale-downs, {len(decision.updates)} updates, "
          f"{len(decision.events)} events")


if __name__ == "__main__":
    main()
