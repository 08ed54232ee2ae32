"""A capacity buffer joins its workload's claim in the watch pass (DESIGN §20), against the
Kubernetes emulator through the real client."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import load_config
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.state import Store
from tests.stages.test_watch_k8s import GI, nodes, once, orders, write_config, wstore

pytestmark = pytest.mark.k8s
__all__ = ["wstore"]  # the fixture, imported for its tests here


def buffered(tmp_path: Path, kubeconfig: Path, buffer: str) -> Path:
    path = write_config(tmp_path, kubeconfig)
    path.write_text(path.read_text() + f"buffers:\n  - {buffer}\n")
    return path


def test_the_buffer_is_part_of_the_claim_stays_at_zero_pods_and_leaves_outside_its_window(
        tmp_path: Path, k8s_emulator: K8sEmulator, k8s_kubeconfig: Path,
        k8s_cluster: KubernetesCluster, wstore: Store) -> None:
    nodes(k8s_emulator)
    orders(k8s_emulator, 2)
    config = load_config(buffered(tmp_path, k8s_kubeconfig,
                                  "{workload: orders-daily, replicas: 3}"))
    first = once(config, wstore, k8s_cluster)
    claim = wstore.claim("orders-daily")
    assert claim is not None and first.changed == ["orders-daily"]
    # 2 pods of 4 vCPU / 16 GiB and 3 chunks of the largest pod; the pod count is the pods'
    assert claim.requests == {"cpu": 5 * 4000, "memory": 5 * 16 * GI} and claim.pods == 2

    for i in range(2):
        k8s_emulator.delete("Pod", "shop", f"orders-daily-5d8f7c9b4-{i:05d}")
    once(config, wstore, k8s_cluster)
    claim = wstore.claim("orders-daily")
    assert claim is not None and claim.pods == 0
    assert claim.requests == {"cpu": 3 * 4000, "memory": 3 * 16 * GI}  # the buffer alone
    assert claim.largest_pod == {"cpu": 4000, "memory": 16 * GI}

    # a reloaded config with a window: a minute from midnight on 1 January in UTC (the test
    # clock's now), so the buffer stays while it is open and is 0 once it has closed
    windowed = load_config(buffered(tmp_path, k8s_kubeconfig,
                                    "{workload: orders-daily, replicas: 3, "
                                    "schedule: '0 0 1 1 *', duration: 1m}"))
    assert once(windowed, wstore, k8s_cluster).changed == []
    wstore.clock.advance(61)  # type: ignore[attr-defined]
    assert once(windowed, wstore, k8s_cluster).changed == ["orders-daily"]
    claim = wstore.claim("orders-daily")
    assert claim is not None and (claim.requests, claim.pods) == ({}, 0)
