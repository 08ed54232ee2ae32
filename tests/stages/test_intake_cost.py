"""Intake cost follows demand, not the fleet (design: Controller), counted at the Kubernetes
emulator:
one watch pass over 2,000 scoctl nodes makes one pod list (not one per node), and a controller
whose watches have synced lists no pods and no nodes at all in its passes."""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from pathlib import Path

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import SystemClock
from scoctl.config.schema import Config, load_config
from scoctl.core import controller as decide
from scoctl.runner.controller import Controller
from scoctl.services.informer import Informer
from scoctl.sim import k8s_emulator as ke
from scoctl.stages.watch import run_pass
from scoctl.state import open_store
from tests.builders import BOOTSTRAP

pytestmark = pytest.mark.k8s

NODES = 2000
PENDING = 10


def seed(emulator: ke.K8sEmulator) -> None:
    """2,000 Ready scoctl nodes, each running one pod of `orders`, and 10 pending pods."""
    nodes = [ke.make_node(f"sco-{i:04d}", labels={"sco/managed": "true",
                                                  "sco/workload": "orders"})
             for i in range(NODES)]
    emulator.add(nodes[0])
    emulator.add_many(nodes[1:], validate_obj=False, copy_obj=False)
    bound = [ke.make_pod(f"orders-{i:04d}", "shop", cpu="1", memory="1Gi",
                         labels={"sco/workload": "orders"}, node_name=f"sco-{i:04d}",
                         phase="Running") for i in range(NODES)]
    emulator.add(bound[0])
    emulator.add_many(bound[1:], validate_obj=False, copy_obj=False)
    for i in range(PENDING):
        emulator.add(ke.make_pod(f"orders-new-{i}", "shop", cpu="1", memory="1Gi",
                                 labels={"sco/workload": "orders"},
                                 unschedulable="0/2000 nodes are available"))


def config_for(tmp_path: Path, kubeconfig: Path) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path}/state.db
spool: {tmp_path}/spool
budget_dir: {tmp_path}/budget
regions: [{{name: region-a, launch: {{image: img, networks: [net-a]}}}}]
flavors: [{{name: c4.xlarge, vcpus: 16, ram: 64Gi}}]
pools: [{{name: c4.xlarge.az1.spot, region: region-a, az: az1, flavor: c4.xlarge,
         group: row-a, tier: reclaimable, depth: 4000}}]
ranking: {{id: r-1, scores: {{c4.xlarge.az1.spot: 0.9}}}}
kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}
{BOOTSTRAP}""", encoding="utf-8")
    return load_config(path)


def lists(emulator: ke.K8sEmulator, path: str) -> list[str]:
    """GET requests that list (not watch) `path`, first pages and continued ones."""
    return [r for r in emulator.requests
            if r.startswith(f"GET {path}") and "watch=true" not in r
            and r[len(f"GET {path}"):][:1] in ("", "?")]


def test_one_watch_pass_over_2000_scoctl_nodes_makes_one_pod_list(
    k8s_emulator: ke.K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
) -> None:
    seed(k8s_emulator)
    config = config_for(tmp_path, tmp_path / "kubeconfig")
    k8s_emulator.requests.clear()
    with open_store(tmp_path / "state.db", create=True) as store:
        result = run_pass(config, store, SystemClock(), sources=["k8s"], cluster=k8s_cluster)
        claim = store.claim("orders")
    pods = lists(k8s_emulator, "/api/v1/pods")
    firsts = [r for r in pods if "continue=" not in r]
    assert len(firsts) == 1, firsts[:5]  # one list, not one per scoctl node
    assert len(pods) == math.ceil((NODES + PENDING) / k8s_cluster.page_size)  # its pages
    assert not any("spec.nodeName%3Dsco-" in r or "spec.nodeName=sco-" in r
                   for r in k8s_emulator.requests)
    assert len(lists(k8s_emulator, "/api/v1/nodes")) == 1
    assert result.errors == []
    # the claim is still the whole demand: the pods on scoctl nodes and the pending ones
    assert claim is not None and claim.pods == NODES + PENDING


def test_a_synced_controller_lists_no_pods_and_no_nodes_in_its_passes(
    k8s_emulator: ke.K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
) -> None:
    seed(k8s_emulator)
    config = config_for(tmp_path, tmp_path / "kubeconfig")
    clock = SystemClock()
    with open_store(tmp_path / "state.db", create=True) as store:
        controller = Controller(config, store, clock, sources=("k8s",), cluster=k8s_cluster,
                                scheduler=None, lock=nullcontext,
                                clouds={"region-a": FakeCloud()})
        controller.informer = Informer(k8s_cluster, (), timeout=5.0).start()
        try:
            deadline = time.monotonic() + 60
            while not (controller.follower.synced and controller.informer.nodes_synced):
                assert time.monotonic() < deadline, "the watches never synced"
                controller._take(controller.informer.drain(0.2))
            k8s_emulator.requests.clear()
            for _ in range(3):  # intake, plan + acquire, reconcile: everything due at once
                controller.schedule = decide.start(clock.monotonic())
                controller._pass()
        finally:
            controller.informer.stop()
        claim = store.claim("orders")
        steps = {s.name for s in controller.steps.last.values()}
    assert steps == {"watch", "plan", "acquire", "reconcile", "notice"}
    assert lists(k8s_emulator, "/api/v1/pods") == []
    assert lists(k8s_emulator, "/api/v1/nodes") == []
    assert claim is not None and claim.pods == NODES + PENDING
