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

The emulator runs in its own process by default (``--emulator process``), as a real API server
does, driven through its ``/_sim/`` control API; ``--emulator thread`` runs it in the bench's
process, where its serving and watch fan-out share the controller's GIL (the bench's setting
before issue 29's last sitting). ``--no-per-node`` skips timing the per-node listing.

Usage: ``python bench/fleet_intake_bench.py [--pods 40000] [--nodes 2000] [--bursts 7]
[--emulator process|thread] [--no-per-node]``. Not part of the test command.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import httpx
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
CHUNK = 2_000  # objects per /_sim/add request while seeding


class RemoteEmulator:
    """`ke.K8sEmulator` in a process of its own (``python -m scoctl.sim.k8s_emulator``), with
    the few test-side calls this bench makes sent over its ``/_sim/`` control API."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.ca = ""  # the PEM of the CA the process's HTTPS certificate is signed by
        self.http = httpx.Client(timeout=300)
        self.cleared = 0  # requests logged before the last clear_requests (older emulators)

    def start(self) -> RemoteEmulator:
        ready = self.directory / "emulator.json"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "scoctl.sim.k8s_emulator", "--port", "0",
             "--ready-file", str(ready)], stdout=subprocess.DEVNULL, env=dict(os.environ))
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the emulator process did not get ready")
            time.sleep(0.05)
        info = json.loads(ready.read_text(encoding="utf-8"))
        self.url, self.ca = info["url"], info.get("ca") or ""
        if self.ca:
            self.http.close()
            self.http = httpx.Client(timeout=300, verify=ssl.create_default_context(
                cadata=self.ca))
        return self

    def control(self, op: str, body: Mapping[str, Any] | None = None) -> Any:
        response = self.http.post(f"{self.url}/_sim/{op}", json=dict(body or {}))
        response.raise_for_status()
        return response.json()

    def add(self, obj: Mapping[str, Any], **_flags: bool) -> dict[str, Any]:
        """Create `obj`; the object as sent, with the uid and resourceVersion it got."""
        (ref,) = self.control("add", {"objects": [obj]})["added"]
        meta = {**obj["metadata"], "uid": ref["uid"], "resourceVersion": ref["resourceVersion"]}
        return {**obj, "metadata": meta}

    def add_many(self, objs: Iterable[Mapping[str, Any]], **_flags: bool) -> int:
        batch = list(objs)
        for i in range(0, len(batch), CHUNK):
            self.control("add", {"objects": batch[i:i + CHUNK]})
        return len(batch)

    @property
    def requests(self) -> list[str]:
        logged = list(self.http.get(f"{self.url}/_sim/requests").json()["requests"])
        return logged[self.cleared:]

    def clear_requests(self) -> None:
        try:
            self.control("clear-requests")
        except httpx.HTTPStatusError:  # an emulator before clear-requests: count from here
            self.cleared = 0
            self.cleared = len(self.requests)

    def kubeconfig(self) -> str:
        cluster = {"server": self.url}
        if self.ca:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca.encode()).decode()
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "scoctl-sim",
            "clusters": [{"name": "scoctl-sim", "cluster": cluster}],
            "users": [{"name": "scoctl-sim", "user": {"token": ke.SCOCTL_TOKEN}}],
            "contexts": [{"name": "scoctl-sim", "context": {
                "cluster": "scoctl-sim", "user": "scoctl-sim", "namespace": "default"}}]})

    def stop(self) -> None:
        self.http.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # by its PID
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


Emulator = ke.K8sEmulator | RemoteEmulator


def clear_requests(emulator: Emulator) -> None:
    if isinstance(emulator, RemoteEmulator):
        emulator.clear_requests()
    else:
        emulator.requests.clear()


def seed(emulator: Emulator, pods: int, nodes: int, workloads: int = 40) -> None:
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


def pod_lists(emulator: Emulator) -> tuple[int, int]:
    """(pod lists, node lists) among the recorded requests (watches and later pages aside)."""
    gets = [r for r in emulator.requests if "watch=true" not in r and "continue=" not in r]
    return (sum(1 for r in gets if r.startswith(("GET /api/v1/pods?", "GET /api/v1/pods "))),
            sum(1 for r in gets if r.startswith(("GET /api/v1/nodes?", "GET /api/v1/nodes "))))


def bench_watch(emulator: Emulator, cluster: KubernetesCluster, config: Config,
                directory: Path, nodes: int, per_node: bool = True) -> float:
    clear_requests(emulator)
    with open_store(directory / "watch.db", create=True) as store:
        t0 = time.perf_counter()
        result = run_pass(config, store, SystemClock(), sources=["k8s"], cluster=cluster)
        seconds = time.perf_counter() - t0
    lists = pod_lists(emulator)
    print(f"watch pass: {seconds:.2f} s, {lists[0]} pod list(s), {lists[1]} node list(s), "
          f"{result.claims_written} claims", end="")
    if not per_node:
        print()
        return seconds
    t0 = time.perf_counter()
    for i in range(nodes):
        cluster.pods_on_node(f"sco-{i:04d}")
    listing = time.perf_counter() - t0
    print(f"; the per-node listing it replaced: {nodes} lists in {listing:.2f} s more (pass + "
          f"per-node {seconds + listing:.2f} s: {(seconds + listing) / seconds:.1f}× this pass)")
    return seconds


def bench_controller(emulator: Emulator, cluster: KubernetesCluster, config: Config,
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
        clear_requests(emulator)
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
    parser.add_argument("--emulator", choices=("process", "thread"), default="process")
    parser.add_argument("--no-per-node", dest="per_node", action="store_false")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        emulator: Emulator = (RemoteEmulator(directory) if args.emulator == "process"
                              else ke.K8sEmulator()).start()
        try:
            emulator.add_many(shipped_rbac())  # scoctl's role (configs/kubernetes/rbac.yaml)
            t0 = time.perf_counter()
            seed(emulator, args.pods, args.nodes)
            print(f"seeded {args.pods} pending pods and {args.nodes} scoctl nodes in "
                  f"{time.perf_counter() - t0:.1f} s (emulator: {args.emulator})")
            kubeconfig = directory / "kubeconfig"
            kubeconfig.write_text(emulator.kubeconfig(), encoding="utf-8")
            config = write_config(directory, kubeconfig)
            with KubernetesCluster(str(kubeconfig), "scoctl-sim") as cluster:
                bench_watch(emulator, cluster, config, directory, args.nodes, args.per_node)
                bench_controller(emulator, cluster, config, directory, args.bursts)
        finally:
            emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
