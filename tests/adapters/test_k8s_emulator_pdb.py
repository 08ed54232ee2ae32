"""The Kubernetes emulator's Eviction API with PodDisruptionBudgets, through the real client:
scoctl's adapter (`evict`) and the official `PolicyV1Api`."""

from __future__ import annotations

from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.errors import ApiError, TemporaryError
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator, budget_of

pytestmark = pytest.mark.k8s


def running_pods(emu: K8sEmulator, replicas: int = 3) -> tuple[dict[str, Any], list[str]]:
    dep = emu.add(ke.make_deployment("web", "shop", replicas=replicas))
    rs = emu.add(ke.make_replicaset(dep))
    emu.add(ke.make_node("n1"))
    names = []
    for pod in ke.pods_for(rs, replicas):
        emu.add(pod)
        emu.bind_pod("shop", pod["metadata"]["name"], "n1")
        names.append(pod["metadata"]["name"])
    return rs, names


def test_max_unavailable_1_allows_one_eviction_until_the_pod_is_back(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, k8s_api: Any) -> None:
    from kubernetes import client

    rs, names = running_pods(k8s_emulator)
    client.PolicyV1Api(k8s_api).create_namespaced_pod_disruption_budget(
        "shop", ke.make_pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1))
    assert k8s_cluster.evict("shop", names[0]) is True
    with pytest.raises(TemporaryError, match="disruption budget"):
        k8s_cluster.evict("shop", names[1])
    # the ReplicaSet's new pod is pending: still no room; once Ready, one more may go
    [fresh] = ke.pods_for(rs, 1, start=7)
    k8s_emulator.add(fresh)
    with pytest.raises(TemporaryError):
        k8s_cluster.evict("shop", names[1])
    k8s_emulator.bind_pod("shop", fresh["metadata"]["name"], "n1")
    assert k8s_cluster.evict("shop", names[1]) is True
    listed = client.PolicyV1Api(k8s_api).list_namespaced_pod_disruption_budget("shop")
    assert [b.spec.max_unavailable for b in listed.items] == [1]


def test_min_available_and_percentages_and_unready_pods(k8s_emulator: K8sEmulator,
                                                       k8s_cluster: KubernetesCluster) -> None:
    rs, names = running_pods(k8s_emulator, replicas=4)
    k8s_emulator.add(ke.make_pdb("web", "shop", match_labels={"app": "web"},
                                 min_available="50%"))  # 2 of 4 must stay
    assert k8s_cluster.evict("shop", names[0]) and k8s_cluster.evict("shop", names[1])
    with pytest.raises(TemporaryError):
        k8s_cluster.evict("shop", names[2])
    [pending] = ke.pods_for(rs, 1, start=9)
    k8s_emulator.add(pending)  # not Ready: it may go while the budget is met
    assert k8s_cluster.evict("shop", pending["metadata"]["name"]) is True


def test_a_pod_under_two_budgets_cannot_be_evicted(k8s_emulator: K8sEmulator,
                                                   k8s_cluster: KubernetesCluster) -> None:
    _, names = running_pods(k8s_emulator)
    for name in ("a", "b"):
        k8s_emulator.add(ke.make_pdb(name, "shop", match_labels={"app": "web"},
                                     max_unavailable=3))
    with pytest.raises(ApiError, match="more than one PodDisruptionBudget"):
        k8s_cluster.evict("shop", names[0])
    assert k8s_emulator.get("Pod", "shop", names[0])


def test_a_budget_counts_the_owners_replicas_not_the_pods_left() -> None:
    pdb = ke.make_pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1)
    owner = [{"uid": "rs-1", "controller": True, "kind": "ReplicaSet", "name": "rs",
              "apiVersion": "apps/v1"}]
    ready = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    pods = [{"metadata": {"name": f"p{i}", "labels": {"app": "web"}, "ownerReferences": owner},
             "status": ready} for i in range(2)]  # one of three already gone
    budget = budget_of(pdb, pods, {"rs-1": 3})
    assert (budget.expected, budget.desired, budget.healthy, budget.allowed) == (3, 2, 2, 0)
    bad = ke.make_pdb("x", "shop", match_labels={}, max_unavailable=1, min_available=1)
    with pytest.raises(ke.StatusError):
        ke.validate(ke.resource_type("PodDisruptionBudget"), bad)
