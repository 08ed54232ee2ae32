"""The node lifecycle controller's taints in the Kubernetes API emulator, driven by the real
`kubernetes` client over HTTP. Each test names the upstream rule it follows
(kubernetes/kubernetes)."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client, watch

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s

RECLAIMABLE = {"key": "reclaimable", "value": "true", "effect": "NoSchedule"}


def taints(node: Any) -> list[tuple[str, str]]:
    return [(t.key, t.effect) for t in node.spec.taints or []]


def test_a_cordoned_node_is_tainted_unschedulable_until_it_is_uncordoned(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `doNoScheduleTaintingPass`:
    ``if node.Spec.Unschedulable`` the controller adds UnschedulableTaintTemplate
    (``node.kubernetes.io/unschedulable:NoSchedule``, k8s.io/api/core/v1/well_known_taints.go)
    and takes it away once the node is schedulable again, leaving other taints alone; it is the
    controller's own update, after the cordon."""
    k8s_emulator.add(ke.make_node("n1", taints=[RECLAIMABLE]))
    core = client.CoreV1Api(k8s_api)
    rv = core.list_node().metadata.resource_version
    answer = core.patch_node("n1", {"spec": {"unschedulable": True}})
    assert taints(answer) == [("reclaimable", "NoSchedule")]  # the cordon's own write
    assert taints(core.read_node("n1")) == [
        ("reclaimable", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")]
    core.patch_node("n1", {"spec": {"unschedulable": False}})
    assert taints(core.read_node("n1")) == [("reclaimable", "NoSchedule")]
    seen = [(e["type"], taints(e["object"])) for e in watch.Watch().stream(
        core.list_node, resource_version=rv, timeout_seconds=1)]
    assert [t for t, _ in seen] == ["MODIFIED"] * 4
    assert [len(t) for _, t in seen] == [1, 2, 2, 1]


def test_a_not_ready_node_is_tainted_not_ready_and_an_unknown_one_unreachable(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go: `doNoScheduleTaintingPass`
    maps the Ready condition through nodeConditionToTaintKeyStatusMap (False →
    ``node.kubernetes.io/not-ready``, Unknown → ``node.kubernetes.io/unreachable``, NoSchedule)
    and `doNoExecuteTaintingPass` adds the same key with NoExecute (NotReadyTaintTemplate,
    UnreachableTaintTemplate, with timeAdded); a Ready node has neither."""
    emu = k8s_emulator
    emu.add(ke.make_node("n1", ready=False, taints=[RECLAIMABLE]))
    core = client.CoreV1Api(k8s_api)
    node = core.read_node("n1")
    assert taints(node) == [("reclaimable", "NoSchedule"),
                            ("node.kubernetes.io/not-ready", "NoSchedule"),
                            ("node.kubernetes.io/not-ready", "NoExecute")]
    assert node.spec.taints[2].time_added is not None
    emu.set_node_ready("n1")
    assert taints(core.read_node("n1")) == [("reclaimable", "NoSchedule")]

    def unknown(obj: dict[str, Any]) -> None:
        [ready] = obj["status"]["conditions"]
        ready.update(status="Unknown", reason="NodeStatusUnknown",
                     message="Kubelet stopped posting node status.")
    emu.update("Node", None, "n1", unknown)
    assert taints(core.read_node("n1")) == [("reclaimable", "NoSchedule"),
                                            ("node.kubernetes.io/unreachable", "NoSchedule"),
                                            ("node.kubernetes.io/unreachable", "NoExecute")]
