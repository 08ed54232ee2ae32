"""Benchmark: intake at fleet scale — 40,000 pending pods and 2,000 scoctl nodes.

Seeds the Kubernetes emulator in-process (40 Deployments' worth of pending pods, 2,000 Ready
nodes labelled ``sco/managed=true`` each running one pod) and times, through scoctl's real
adapter (the official client over HTTP):

* watch pass — one `stages.watch.run_pass` that lists what it reads, with the pod and node
  list requests it made, against the baseline of the per-node listing it replaced (one
  ``spec.nodeName=`` list per scoctl node, timed here over the same 2,000 nodes);
* controller — `runner.controller.Controller` (its Nova is an in-memory fake): how long its
  watches take to sync, the requests of its passes once synced, and `--bursts` demand changes
  (200 new pods of a new Deployment each, a few seconds apart) → committed plan, with the
  batch window at its default 1 s: p50 / p99 from the pods' creation, and after the window
  closed (the watch step that took them in plus the plan stage of that pass), and how many
  pod buckets each such intake read afresh and reused (issue 29 item 1).

Usage: ``python bench/fleet_intake_bench.py [--pods 40000] [--nodes 2000] [--bursts 7]``.
Not part of the test command.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

from intake_bench import seed as seed_pending  # noqa: E402  (bench/ is the script's path)

from scoctl.adapters.fakes import FakeCloud
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import SystemClock
from scoctl.config.schema import Config, load_config
from scoctl.runner.compose import PassReport
from scoctl.runner.controller import Controller
from scoctl.runner.signals import Signals
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_auth import shipped_rbac
from scoctl.stages.watch import run_pass
from scoctl.state import open_store

UNSCHEDULABLE = "0/2000 nodes are available: 2000 Insufficient cpu."


def seed(emulator: ke.K8sEmulator, pods: int, nodes: int, workloads: int = 40) -> None:
    node_objs = [ke.make_node(f"sco-{i:04d}", labels={"sco/managed": "true"})
                 for i in range(nodes)]
    emulator.add(node_objs[0])
    emulator.add_many(node_objs[1:], validate_obj=False, copy_obj=False)
    bound = [ke.make_pod(f"running-{i:04d}", "shop", cpu="1", memory="1Gi",
                         labels={"sco/workload": "orders-000"}, node_name=f"sco-{i:04d}",
                         phase="Running") for i in range(nodes)]
    emulator.add(bound[0])
    emulator.add_many(bound[1:], validate_obj=False, copy_obj=False)
    seed_pending(emulator, pods, workloads)


def write_config(directory: Path, kubeconfig: Path) -> Config:
    path = directory / "config.yaml"
    path.write_text(f"""
state: {directory}/state.db
spool: {directory}/spool
budget_dir: {directory}/budget
regions: [{{name: region-a, launch: {{image: img, networks: [net-a]}}}}]
flavors: [{{name: c4.2xlarge, vcpus: 32, ram: 128Gi}}]
pools: [{{name: c4.2xlarge.az1.spot, region: region-a, az: az1, flavor: c4.2xlarge,
         group: row-a, tier: reclaimable, depth: 100000}}]
ranking: {{id: r-1, scores: {{c4.2xlarge.az1.spot: 0.9}}}}
kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}
bootstrap: {{api_endpoint: '127.0.0.1:6443', ca_cert_hash: 'sha256:{"ab" * 32}'}}
""", encoding="utf-8")
    return load_config(path)


def pod_lists(emulator: ke.K8sEmulator) -> tuple[int, int]:
    """(pod lists, node lists) among the recorded requests (watches and later pages aside)."""
    gets = [r for r in emulator.requests if "watch=true" not in r and "continue=" not in r]
    return (sum(1 for r in gets if r.startswith(("GET /api/v1/pods?", "GET /api/v1/pods "))),
            sum(1 for r in gets if r.startswith(("GET /api/v1/nodes?", "GET /api/v1/nodes "))))


def bench_watch(emulator: ke.K8sEmulator, cluster: KubernetesCluster, config: Config,
                directory: Path, nodes: int) -> float:
    emulator.requests.clear()
    with open_store(directory / "watch.db", create=True) as store:
        t0 = time.perf_counter()
        result = run_pass(config, store, SystemClock(), sources=["k8s"], cluster=cluster)
        seconds = time.perf_counter() - t0
    lists = pod_lists(emulator)
    t0 = time.perf_counter()
    for i in range(nodes):
        cluster.pods_on_node(f"sco-{i:04d}")
    per_node = time.perf_counter() - t0
    print(f"watch pass: {seconds:.2f} s, {lists[0]} pod list(s), {lists[1]} node list(s), "
          f"{result.claims_written} claims; the per-node listing it replaced: {nodes} lists "
          f"in {per_node:.2f} s more (pass + per-node {seconds + per_node:.2f} s: "
          f"{(seconds + per_node) / seconds:.1f}× this pass)")
    return seconds


def bench_controller(emulator: ke.K8sEmulator, cluster: KubernetesCluster, config: Config,
                     directory: Path, bursts: int) -> list[float]:
    clock = SystemClock()
    signals = Signals()
    reports: list[PassReport] = []
    with open_store(directory / "controller.db", create=True) as store:
        controller = Controller(
            config.__class__(**{**config.__dict__, "state": directory / "controller.db"}),
            store, clock, sources=("k8s",), cluster=cluster, scheduler=None, lock=nullcontext,
            clouds={"region-a": FakeCloud()}, on_pass=reports.append)
        thread = threading.Thread(target=controller.run, args=(signals,), daemon=True)
        t0 = time.perf_counter()
        thread.start()
        while not (controller.follower.synced and controller.informer
                   and controller.informer.nodes_synced and controller.passes >= 2):
            time.sleep(0.01)
        synced = time.perf_counter() - t0
        time.sleep(2.0)
        emulator.requests.clear()
        passes = controller.passes
        time.sleep(6.0)  # steady state: a periodic intake and a reconcile or more
        lists = pod_lists(emulator)
        steady = controller.passes - passes
        decided: list[float] = []
        after: list[float] = []  # intake step + plan stage of the pass that committed it
        reused: list[tuple[int, int]] = []
        for n in range(bursts):
            name = f"burst-{n}"
            dep = emulator.add(ke.make_deployment(name, "shop", replicas=200, cpu="2",
                                                  memory="8Gi", pod_labels={"sco/workload": name}))
            rs = emulator.add(ke.make_replicaset(dep))
            mark = len(reports)
            t0 = time.perf_counter()
            emulator.add_many(ke.pods_for(rs, 200, unschedulable=UNSCHEDULABLE))
            while name not in store.plans(only={name}, units=False):
                time.sleep(0.005)
            decided.append(time.perf_counter() - t0)
            while len(reports) == mark:
                time.sleep(0.005)
            memo = getattr(controller.follower, "memo", None)  # None: a release before it
            if memo is not None:
                reused.append((memo.read, memo.reused))
            steps = [st for r in reports[mark:] for st in r.steps]
            watch = next((st.seconds for st in steps if st.name == "watch"
                          and name in st.detail.get("changed", ())), None)
            plan = next((st.seconds for st in steps if st.name == "plan"), 0.0)
            if watch is not None:
                after.append(watch + plan)
            time.sleep(3.0)  # settled: the next burst starts from a quiet controller
        signals.stop.append("SIGTERM")
        thread.join(timeout=30)
    print(f"controller: watches synced and first passes done in {synced:.2f} s; "
          f"{steady} steady passes made {lists[0]} pod and {lists[1]} node lists")
    window = config.intake.batch_idle
    print(f"200 new pods among {len(controller.follower.pods)} cached, {bursts} times: "
          f"committed plan after the pods p50 {pct(decided, 50):.2f} s, p99 "
          f"{pct(decided, 99):.2f} s (aim 1.3 s; batch window {window:g} s); after the window "
          f"closes (the pass's watch step + plan stage) p50 {pct(after, 50):.3f} s, p99 "
          f"{pct(after, 99):.3f} s (aim 0.3 s); buckets read afresh / reused per intake "
          f"{reused}")
    return decided


def pct(values: list[float], q: int) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=40_000)
    parser.add_argument("--nodes", type=int, default=2_000)
    parser.add_argument("--bursts", type=int, default=7)
    args = parser.parse_args(argv)
    emulator = ke.K8sEmulator().start()
    emulator.add_many(shipped_rbac())  # scoctl's role (configs/kubernetes/rbac.yaml)
    try:
        t0 = time.perf_counter()
        seed(emulator, args.pods, args.nodes)
        print(f"seeded {args.pods} pending pods and {args.nodes} scoctl nodes in "
              f"{time.perf_counter() - t0:.1f} s")
        with tempfile.TemporaryDirectory() as tmp:
            directory = Path(tmp)
            kubeconfig = directory / "kubeconfig"
            kubeconfig.write_text(emulator.kubeconfig(), encoding="utf-8")
            config = write_config(directory, kubeconfig)
            with KubernetesCluster(str(kubeconfig), "scoctl-sim") as cluster:
                bench_watch(emulator, cluster, config, directory, args.nodes)
                bench_controller(emulator, cluster, config, directory, args.bursts)
    finally:
        emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
