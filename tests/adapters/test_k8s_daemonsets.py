"""DaemonSets read through the real kubernetes client from the emulator (design: Constraints): each
one's pod template as a pod — the node selector, required affinity, tolerations and requests
the DaemonSet controller's `NodeShouldRunDaemonPod` (`pkg/controller/daemon/
daemon_controller.go`) matches against a node — and the overhead intake derives from them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import load_config
from scoctl.core.demand import effective_request
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.watch import read_k8s
from tests.builders import nova_config

pytestmark = pytest.mark.k8s

GI = 2**30


def daemonset(name: str, cpu: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system"},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{
                                      "name": name, "image": "busybox",
                                      "resources": {"requests": {"cpu": cpu,
                                                                 "memory": "128Mi"}}}],
                                      **spec}}}}


def test_daemonsets_are_read_as_their_pod_template_and_only_while_pods_wait(
        tmp_path: Path, k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    k8s_emulator.add(daemonset("logs", "200m", tolerations=[{"operator": "Exists"}]))
    k8s_emulator.add(daemonset("gpu", "100m", nodeSelector={"sco/pool": "gpu.a"}))
    found = {d.name: d for d in k8s_cluster.daemonsets()}
    assert set(found) == {"logs", "gpu"}
    assert effective_request(found["logs"].pod) == {"cpu": 200, "memory": 128 * 2**20}
    assert found["logs"].pod.tolerations[0].operator == "Exists"
    placement = found["gpu"].pod.placement
    assert placement is not None and placement.node_selector == (("sco/pool", "gpu.a"),)

    config = load_config(nova_config(tmp_path, "unused"))
    assert read_k8s(k8s_cluster, config).daemonsets == ()  # no pod waits: not read
    k8s_emulator.add(ke.make_pod("web-0", "default", cpu="100m", unschedulable="0/1 nodes",
                                 labels={"sco/workload": "web"}))
    snap = read_k8s(k8s_cluster, config)
    assert {d.name for d in snap.daemonsets} == {"logs", "gpu"}
