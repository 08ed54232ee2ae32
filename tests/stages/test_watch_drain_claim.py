"""`scoctl watch` through the real Kubernetes client against the emulator while a unit is
drained (issue 49 item 8): the claim keeps its version through an eviction.

An eviction (the Eviction API, ``eviction.go`` ``addConditionAndDeletePod``) leaves the pod
Terminating (``deletionTimestamp``) a moment before its ReplicaSet has made the replacement
(``replica_set.go`` ``manageReplicas`` counts only pods not being deleted, so it makes one),
which is pending, then Unschedulable or bound. Intake read each of those moments as a change:
one pod fewer, then one more — two claim versions per eviction, the plan flapping. Here every
moment is one claim, one version; a scale-down's Terminating pods do shrink it.
"""

from __future__ import annotations

from typing import Any

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import Config
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.state import Store
from tests.stages.test_watch_k8s import config, nodes, once, orders, wstore  # noqa: F401

RS = "orders-daily-5d8f7c9b4"


def claim_of(store: Store) -> tuple[int, int]:
    claim = store.claim("orders-daily")
    assert claim is not None
    return claim.version, claim.pods


def set_replicas(emu: K8sEmulator, replicas: int) -> None:
    def change(rs: dict[str, Any]) -> None:
        rs["spec"]["replicas"] = replicas
    emu.update("ReplicaSet", "shop", RS, change)


def test_an_eviction_and_its_replacement_leave_the_claim_as_it_was(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,  # noqa: F811
        wstore: Store) -> None:  # noqa: F811
    nodes(k8s_emulator)
    _, rs = orders(k8s_emulator, 10)
    for i in range(10):  # running on scoctl's units; sco-2 is the one being drained
        k8s_emulator.bind_pod("shop", f"{RS}-{i:05d}", f"sco-{2 if i >= 7 else i % 2}")
    once(config, wstore, k8s_cluster)
    assert claim_of(wstore) == (1, 10)

    for i in (7, 8, 9):
        assert k8s_cluster.evict("shop", f"{RS}-{i:05d}")  # Terminating, grace running
        once(config, wstore, k8s_cluster)
        assert claim_of(wstore) == (1, 10), f"eviction of pod {i}"
        [fresh] = ke.pods_for(rs, 1, start=10 + i)  # the ReplicaSet's replacement
        k8s_emulator.add(fresh)
        once(config, wstore, k8s_cluster)
        assert claim_of(wstore) == (1, 10), f"replacement of pod {i}"
        k8s_emulator.set_pod_unschedulable("shop", fresh["metadata"]["name"])
        once(config, wstore, k8s_cluster)
        assert claim_of(wstore) == (1, 10), f"replacement of pod {i} unschedulable"
        k8s_emulator.bind_pod("shop", fresh["metadata"]["name"], f"sco-{i % 2}")
        once(config, wstore, k8s_cluster)
        assert claim_of(wstore) == (1, 10), f"replacement of pod {i} bound"

    set_replicas(k8s_emulator, 6)  # a scale-down: its Terminating pods are no demand
    for i in range(4):
        k8s_emulator.delete("Pod", "shop", f"{RS}-{i:05d}")
    once(config, wstore, k8s_cluster)
    assert claim_of(wstore)[1] == 6
