"""A capacity buffer joins its workload's claim in the watch pass (design: Buffers), against the
Kubernetes emulator through the real client."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.cli.views import claim_json
from scoctl.config.schema import Config, load_config
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.plan import run_plan
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


def test_a_tiered_buffer_is_a_part_of_the_stored_claim_and_a_tier_without_pools_says_why(
        tmp_path: Path, k8s_emulator: K8sEmulator, k8s_kubeconfig: Path,
        k8s_cluster: KubernetesCluster, wstore: Store) -> None:
    # design: Buffers: the buffer is part of the claim (source buffer), planned in its tier's pools;
    # a committed pool beside the reclaimable one (whose taint these pods do not tolerate)
    def tiered(tier: str) -> Config:
        path = buffered(tmp_path, k8s_kubeconfig,
                        f"{{workload: orders-daily, replicas: 3, tier: {tier}}}")
        path.write_text(path.read_text().replace("pools:\n", COMMITTED_POOL, 1)
                        .replace("scores: {", "scores: {c4.2xlarge.az1.comm: 0.5, ", 1))
        return load_config(path)

    nodes(k8s_emulator)
    orders(k8s_emulator, 2)
    committed = tiered("committed")
    once(committed, wstore, k8s_cluster)
    claim = wstore.claim("orders-daily")
    assert claim is not None and claim.pods == 2
    pods, buffer = claim.parts
    assert (pods.source, pods.pods, buffer.source, buffer.pods) == ("pods", 2, "buffer", 3)
    assert buffer.ineligible == {"c4.2xlarge.az1.spot": "tier committed (the pool is "
                                                        "reclaimable)"}
    shown = claim_json(claim)["parts"]
    assert [(p["part"], p["source"]) for p in shown] == [("orders-daily/1", "pods"),
                                                         ("orders-daily/buffer", "buffer")]
    assert shown[1]["chunks"] == 3 and shown[1]["requests"] == {"cpu": 12, "memory": 48 * GI}
    plan = run_plan(committed, wstore, wstore.clock).plans["orders-daily"]
    assert plan.feasible and not plan.degraded and set(plan.units()) == {"c4.2xlarge.az1.comm"}
    # a reclaimable buffer has no pool these pods may use: planned nowhere, and said why
    reclaimable = tiered("reclaimable")
    assert once(reclaimable, wstore, k8s_cluster).changed == ["orders-daily"]  # a new version
    stored = wstore.claim("orders-daily")
    assert stored is not None and stored.parts[-1].ineligible == {
        "c4.2xlarge.az1.comm": "tier reclaimable (the pool is committed)"}
    nowhere = run_plan(reclaimable, wstore, wstore.clock,
                       explain=["orders-daily"]).plans["orders-daily"]
    assert nowhere.feasible and nowhere.degraded
    assert nowhere.units() == {"c4.2xlarge.az1.comm": 1}, nowhere.units()  # the pods' unit
    (why,) = [r for r in nowhere.reasons if "orders-daily/buffer" in r]
    assert "the buffer's tier reclaimable (the pool is committed) rules it out" in why, why
    assert "orders-daily/buffer: 3 chunks" in why


COMMITTED_POOL = """pools:
  - {name: c4.2xlarge.az1.comm, region: region-a, az: az1, flavor: c4.2xlarge, group: row-a,
     tier: committed, depth: 10}
"""
