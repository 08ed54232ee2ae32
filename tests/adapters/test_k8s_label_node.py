"""Meta drift's Node label patch (design: Drift), through the real client against the emulator.

The client sends a dict body to PATCH as a strategic merge patch (kubernetes-client's
``ApiClient.select_header_content_type``); for ``metadata.labels``, a map, apimachinery's
``strategicpatch.StrategicMergePatch`` merges key by key — as ``kubectl label --overwrite``:
the labels named are set, the others stay.
"""

from __future__ import annotations

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.errors import PermanentError
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s


def test_label_node_sets_the_labels_it_names_and_keeps_the_others(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    node = ke.make_node("n1")
    node["metadata"].setdefault("labels", {}).update({"sco/managed": "true", "team": "old"})
    k8s_emulator.add(node)
    k8s_cluster.label_node("n1", {"team": "checkout", "tier": "gold"})
    [seen] = k8s_cluster.nodes()
    assert seen.labels["team"] == "checkout" and seen.labels["tier"] == "gold"
    assert seen.labels["sco/managed"] == "true"
    assert "PATCH /api/v1/nodes/n1" in k8s_emulator.requests  # one patch, no replace
    assert not any(r.startswith("PUT ") for r in k8s_emulator.requests)


def test_label_node_on_a_node_gone_is_a_permanent_error(
        k8s_cluster: KubernetesCluster) -> None:
    with pytest.raises(PermanentError):
        k8s_cluster.label_node("gone", {"team": "x"})


def test_label_node_removes_the_labels_given_as_none(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    # a strategic merge patch's null deletes the key (apimachinery); the others stay
    node = ke.make_node("n2")
    node["metadata"].setdefault("labels", {}).update({"team": "old", "tier": "gold"})
    k8s_emulator.add(node)
    k8s_cluster.label_node("n2", {"tier": None, "team": "checkout"})
    [seen] = k8s_cluster.nodes()
    assert "tier" not in seen.labels and seen.labels["team"] == "checkout"
