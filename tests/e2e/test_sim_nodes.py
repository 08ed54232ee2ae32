"""Kubelet heartbeats and node Leases, the scheduler's and the node lifecycle controller's
Events, and NoExecute taint eviction, on the Kubernetes emulator with the node agent (in this
process) running them; read with the real `kubernetes` client. Each test names the upstream
code it follows (kubernetes/kubernetes)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scoctl.sim import agent
from scoctl.sim.k8s_emulator import make_node, make_pod
from tests.e2e.test_sim_workloads import Region

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

GRACE = 0.4  # node-monitor grace: Leases renewed every 0.1 s, the status reported every 3 s


@pytest.fixture
def region(tmp_path: Path) -> Iterator[Region]:
    r = Region(tmp_path, node_monitor_grace=GRACE)
    try:
        yield r
    finally:
        r.close()


def events(region: Region, namespace: str, reason: str) -> list[Any]:
    return [e for e in region.core.list_namespaced_event(namespace).items if e.reason == reason]


def test_a_node_gets_a_lease_renewed_and_a_heartbeat_with_addresses(region: Region) -> None:
    """pkg/kubelet/nodelease (`newLease`: ``kube-node-lease/<node>``, held by and owned by the
    Node, renewed every leaseDuration/4) and pkg/kubelet/kubelet_node_status.go
    `setNodeStatus` (conditions' ``lastHeartbeatTime``, addresses InternalIP and Hostname,
    nodeInfo.kubeletVersion)."""
    region.k8s.add(make_node("n1"))
    region.worker.step()
    lease = region.coordination.read_namespaced_lease("n1", "kube-node-lease")
    assert lease.spec.holder_identity == "n1"
    assert lease.metadata.owner_references[0].kind == "Node"
    first = lease.spec.renew_time
    node = region.core.read_node("n1")
    assert {a.type for a in node.status.addresses} == {"InternalIP", "Hostname"}
    assert node.status.node_info.kubelet_version.startswith("v1.")
    assert all(c.last_heartbeat_time is not None for c in node.status.conditions)
    time.sleep(0.15)
    region.worker.step()
    assert region.coordination.read_namespaced_lease(
        "n1", "kube-node-lease").spec.renew_time > first


def test_the_scheduler_records_scheduled_and_failed_scheduling_events(region: Region) -> None:
    """pkg/scheduler/schedule_one.go: ``Scheduled`` (``Successfully assigned <ns>/<pod> to
    <node>``) for a bound pod, ``FailedScheduling`` (Warning, the FitError text the
    PodScheduled condition carries) for one no node fits."""
    region.k8s.add(make_node("n1", cpu="4", memory="16Gi"))
    region.k8s.add(make_pod("fits", "shop", cpu="1"))
    region.k8s.add(make_pod("huge", "shop", cpu="64"))
    region.worker.step()
    [scheduled] = events(region, "shop", "Scheduled")
    assert (scheduled.type, scheduled.message) == ("Normal",
                                                   "Successfully assigned shop/fits to n1")
    [failed] = events(region, "shop", "FailedScheduling")
    condition = next(c for c in region.core.read_namespaced_pod("huge", "shop").status.conditions
                     if c.type == "PodScheduled")
    assert (failed.type, failed.involved_object.name) == ("Warning", "huge")
    assert failed.message == condition.message and "Insufficient cpu" in failed.message
    region.worker.step()  # nothing changed: no second FailedScheduling
    assert len(events(region, "shop", "FailedScheduling")) == 1


def test_a_node_whose_kubelet_stopped_gets_a_node_not_ready_event(region: Region) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `tryUpdateNodeHealth` then
    `RecordNodeStatusChange(…, "NodeNotReady")`: ``Node <name> status is now:
    NodeNotReady``."""
    region.k8s.add(make_node("n1"))
    region.worker.step()
    region.k8s.update("Node", None, "n1", {"metadata": {"annotations": {
        agent.KUBELET_ANNOTATION: agent.KUBELET_STOPPED}}})
    region.settle(lambda: bool(events(region, "default", "NodeNotReady")))
    [event] = events(region, "default", "NodeNotReady")
    assert event.message == "Node n1 status is now: NodeNotReady"
    assert event.involved_object.kind == "Node"


def test_a_noexecute_taint_evicts_the_pods_that_do_not_tolerate_it(region: Region) -> None:
    """pkg/controller/tainteviction/taint_eviction.go `processPodOnNode` and
    `getMinTolerationTime`: a pod not tolerating a NoExecute taint is deleted now (after the
    ``DisruptionTarget=True/DeletionByTaintManager`` condition), one tolerating it for 1 s once
    that is over, one tolerating it for ever stays."""
    region.k8s.add(make_node("n1", cpu="8", memory="32Gi"))
    taint = {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}
    ever = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}
    region.k8s.add(make_pod("plain", "shop"))
    region.k8s.add(make_pod("for-ever", "shop", tolerations=[ever]))
    region.k8s.add(make_pod("for-a-second", "shop",
                            tolerations=[{**ever, "tolerationSeconds": 1}]))
    region.worker.step()
    assert all(p["spec"].get("nodeName") == "n1" for p in region.pods())
    region.k8s.update("Node", None, "n1", {"spec": {"taints": [taint]}})
    region.worker.step()
    plain = region.k8s.get("Pod", "shop", "plain")
    assert plain["metadata"]["deletionTimestamp"]
    assert plain["status"]["conditions"][-1]["reason"] == "DeletionByTaintManager"
    assert not region.k8s.get("Pod", "shop", "for-a-second")["metadata"].get(
        "deletionTimestamp")
    region.settle(lambda: region.k8s.get("Pod", "shop", "for-a-second")["metadata"].get(
        "deletionTimestamp") is not None)
    assert not region.k8s.get("Pod", "shop", "for-ever")["metadata"].get("deletionTimestamp")
    assert events(region, "shop", "TaintManagerEviction")
