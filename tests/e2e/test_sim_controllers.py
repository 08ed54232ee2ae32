"""The node agent's controllers against both emulators in this process, through their control
APIs (the agent's own `SimApi` over HTTP), with the agent's clock injected: PodGC replaces the
pods of a removed node only after its quarantine, and a Node whose kubelet stopped turns
Ready=Unknown after the grace period. Each test names the upstream rule it follows
(kubernetes/kubernetes)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scoctl.sim import agent
from scoctl.sim.k8s_auth import ADMIN
from scoctl.sim.k8s_emulator import (
    K8sEmulator,
    make_deployment,
    make_node,
    make_replicaset,
    pods_for,
)
from scoctl.sim.nova_emulator import NovaEmulator

pytestmark = [pytest.mark.k8s, pytest.mark.nova]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def emulators() -> Iterator[tuple[K8sEmulator, NovaEmulator]]:
    k8s, nova = K8sEmulator().start(), NovaEmulator().start()
    try:
        yield k8s, nova
    finally:
        k8s.stop()
        nova.stop()


def make_agent(k8s: K8sEmulator, nova: NovaEmulator, clock: Clock) -> agent.Agent:
    settings: dict[str, Any] = {"k8s_url": k8s.url, "nova_url": nova.url,
                                "podgc_quarantine": 40.0, "node_monitor_grace": 40.0}
    return agent.Agent(settings, agent.SimApi(k8s.url, nova.url, k8s_ca=k8s.client_context()),
                       clock=clock)


def test_podgc_replaces_the_pods_of_a_removed_node_only_after_its_quarantine(
        emulators: tuple[K8sEmulator, NovaEmulator], tmp_path: Path) -> None:
    """pkg/controller/podgc/gc_controller.go `gcOrphaned`: the pods bound to a deleted Node
    stay until the node has been missing for `quarantineTime`, then are marked Failed
    (DisruptionTarget=DeletionByPodGC) and deleted; their ReplicaSet replaces them
    (pkg/controller/replicaset/replica_set.go `manageReplicas`)."""
    k8s, nova = emulators
    clock = Clock()
    dep = k8s.add(make_deployment("web", "shop", replicas=2))
    rs = k8s.add(make_replicaset(dep))
    k8s.add(make_node("n1"))
    k8s.add(make_node("doomed"))
    for pod, node in zip(pods_for(rs, 2), ("n1", "doomed"), strict=True):
        k8s.add(pod)
        k8s.bind_pod("shop", pod["metadata"]["name"], node)
    orphan = pods_for(rs, 2)[1]["metadata"]["name"]
    worker = make_agent(k8s, nova, clock)
    try:
        k8s.delete("Node", None, "doomed")  # the cloud took it
        worker.step()
        clock.now += 39
        worker.step()
        assert k8s.get("Pod", "shop", orphan)["spec"]["nodeName"] == "doomed"  # still there
        rv = k8s.resource_version
        clock.now += 1
        worker.step()
        pods = k8s.objects("Pod", "shop")
        assert orphan not in [p["metadata"]["name"] for p in pods]
        assert len(pods) == 2  # replaced, and the new one scheduled on the node left
        assert sorted(p["spec"].get("nodeName") for p in pods) == ["n1", "n1"]
        from kubernetes import client, config, watch

        path = tmp_path / "kubeconfig"
        path.write_text(k8s.kubeconfig(user=ADMIN), encoding="utf-8")  # the test's own look
        core = client.CoreV1Api(config.new_client_from_config(str(path)))
        seen = [(e["type"], e["object"]) for e in watch.Watch().stream(
            core.list_namespaced_pod, "shop", resource_version=str(rv), timeout_seconds=1)
            if e["object"].metadata.name == orphan]
        assert [t for t, _ in seen] == ["MODIFIED", "DELETED"]
        failed = seen[0][1].status
        assert failed.phase == "Failed"
        assert (failed.conditions[-1].type, failed.conditions[-1].reason) == (
            "DisruptionTarget", "DeletionByPodGC")
    finally:
        worker.api.close()


def test_a_node_not_heard_from_turns_unknown_after_the_grace_period(
        emulators: tuple[K8sEmulator, NovaEmulator]) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `tryUpdateNodeHealth`: the
    kubelet of a stopped Node (``scoctl sim fail-node``) posts nothing, so after the grace
    period its Ready condition is Unknown, and the taint pass then adds
    ``node.kubernetes.io/unreachable``; the other Node keeps reporting and stays Ready."""
    k8s, nova = emulators
    clock = Clock()
    k8s.add(make_node("n1"))
    stopped = make_node("n2")
    stopped["metadata"].setdefault("annotations", {})[agent.KUBELET_ANNOTATION] = (
        agent.KUBELET_STOPPED)
    k8s.add(stopped)
    worker = make_agent(k8s, nova, clock)
    try:
        worker.step()
        clock.now += 39
        worker.step()
        assert agent.is_ready(k8s.get("Node", None, "n2"))
        clock.now += 1
        worker.step()
        node = k8s.get("Node", None, "n2")
        [ready] = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert (ready["status"], ready["reason"]) == ("Unknown", "NodeStatusUnknown")
        assert ("node.kubernetes.io/unreachable", "NoSchedule") in [
            (t["key"], t["effect"]) for t in node["spec"]["taints"]]
        assert agent.is_ready(k8s.get("Node", None, "n1"))
        clock.now += 100
        worker.step()  # a failed node is never made Ready again
        assert not agent.is_ready(k8s.get("Node", None, "n2"))
    finally:
        worker.api.close()
