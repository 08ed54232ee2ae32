"""scoctl's Kubernetes adapter, through a generated kubeconfig, against the emulator."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.cluster import Cluster
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core.demand import (
    deployment_quota_block,
    effective_request,
    events_quota_block,
    is_provisionable,
    max_allocatable,
    node_fits,
)
from scoctl.core.intake.k8s import K8sPolicy, K8sSnapshot, decide_k8s_intake
from scoctl.core.model import PodEvent
from scoctl.errors import ConfigError, PermanentError, TemporaryError
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s

GI = 2**30
UNSCHED = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: " \
          "2 No preemption victims found for incoming pod.."
QUOTA = ('pods "orders-5d8f7c9b4-x1" is forbidden: exceeded quota: compute, requested: '
         "requests.cpu=4, used: requests.cpu=8, limited: requests.cpu=8")


def seed_orders(emu: K8sEmulator, pods: int = 42) -> tuple[dict[str, Any], dict[str, Any]]:
    dep = emu.add(ke.make_deployment("orders", "shop", replicas=pods, cpu="4", memory="16Gi",
                                     managed=True, pod_labels={"sco/workload": "orders-daily"}))
    rs = emu.add(ke.make_replicaset(dep))
    emu.add_many(ke.pods_for(rs, pods, unschedulable=UNSCHED))
    return dep, rs


def test_the_adapter_satisfies_the_cluster_protocol(k8s_cluster: KubernetesCluster) -> None:
    cluster: Cluster = k8s_cluster
    assert cluster.nodes() == []


def test_config_comes_from_kubeconfig_env_or_fails_as_config_error(
    k8s_emulator: K8sEmulator, k8s_kubeconfig: Path, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(k8s_kubeconfig))
    with KubernetesCluster() as from_env:
        assert from_env.host == k8s_emulator.url
    with pytest.raises(ConfigError, match="kubeconfig"):
        KubernetesCluster(str(k8s_kubeconfig), context="no-such-context")
    broken = tmp_path / "broken"
    broken.write_text("clusters: [")
    with pytest.raises(ConfigError):
        KubernetesCluster(str(broken))


def test_nodes_become_plain_values(k8s_emulator: K8sEmulator,
                                   k8s_cluster: KubernetesCluster) -> None:
    k8s_emulator.add(ke.make_node("cpu-1", cpu="32", memory="128Gi"))
    k8s_emulator.add(ke.make_node("gpu-1", cpu="64", memory="512Gi", gpus=8, ready=False,
                                  unschedulable=True, provider_id="openstack:///abc",
                                  labels={"sco/pool": "a100.az1.spot"},
                                  taints=[{"key": "reclaimable", "value": "true",
                                           "effect": "NoSchedule"}]))
    cpu, gpu = k8s_cluster.nodes()
    assert cpu.ready and not cpu.unschedulable
    assert cpu.allocatable["cpu"] == 32_000 and cpu.allocatable["memory"] == 128 * GI
    assert (gpu.ready, gpu.unschedulable, gpu.provider_id) == (False, True, "openstack:///abc")
    assert gpu.labels["sco/pool"] == "a100.az1.spot"
    assert gpu.taints[0].key == "reclaimable" and gpu.taints[0].value == "true"
    nodes = k8s_cluster.nodes()
    assert max_allocatable(nodes, "nvidia.com/gpu") == 8
    assert max_allocatable(nodes, "amd.com/gpu") is None
    assert node_fits({"cpu": 48_000, "nvidia.com/gpu": 1}, nodes) == gpu
    assert node_fits({"cpu": 48_000, "nvidia.com/gpu": 9}, nodes) is None


def test_42_pending_pods_become_one_claim_of_168_vcpu_and_672gi(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    seed_orders(k8s_emulator)
    k8s_emulator.add(ke.make_pod("bound", "shop", node_name="n1", phase="Running",
                                 labels={"sco/workload": "orders-daily"}))
    k8s_cluster.page_size = 10  # four pages
    pending = k8s_cluster.pods(field_selector="status.phase=Pending,spec.nodeName=")
    assert len(pending) == 42
    assert all(is_provisionable(p) for p in pending)
    claims = decide_k8s_intake(K8sSnapshot(pods=tuple(pending)), K8sPolicy()).claims
    assert [c.workload for c in claims] == ["orders-daily"]
    claim = claims[0]
    assert claim.requests == {"cpu": 168_000, "memory": 672 * GI}
    assert claim.largest_pod == {"cpu": 4000, "memory": 16 * GI}
    assert (claim.pods, claim.kind) == (42, "deployment")
    assert sum(1 for r in k8s_emulator.requests if "/pods?" in r) == 5


def test_pods_keep_what_the_effective_request_needs(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    k8s_emulator.add(ke.make_pod(
        "app", "ml", containers=[ke.make_container("c1", cpu="2", memory="1G"),
                                 ke.make_container("c2", cpu="1", memory="1G")],
        init_containers=[ke.make_container("ic1", cpu="2", memory="1G"),
                         ke.make_container("ic2", cpu="2", memory="3G")],
        tolerations=[{"key": "reclaimable", "operator": "Exists"}],
        unschedulable=UNSCHED, labels={"app": "x"}))
    k8s_emulator.add(ke.make_pod("other", "ml", labels={"app": "y"}))
    (pod,) = k8s_cluster.pods("ml", label_selector="app=x")
    assert effective_request(pod) == {"cpu": 3000, "memory": 3 * 10**9}
    assert pod.tolerations[0].operator == "Exists"
    assert pod.condition("PodScheduled") is not None and is_provisionable(pod)


def test_watch_starts_with_a_resync_then_streams_changes(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("a", "ml", unschedulable=UNSCHED))

    def change() -> None:
        time.sleep(0.3)
        emu.add(ke.make_pod("b", "ml", unschedulable=UNSCHED))
        emu.bind_pod("ml", "a", "n1")

    thread = threading.Thread(target=change)
    thread.start()
    events: list[PodEvent] = list(k8s_cluster.watch_pods(None, 2))
    thread.join()
    assert events[0].type == "RESYNC" and [p.name for p in events[0].pods] == ["a"]
    assert [(e.type, e.pod.name if e.pod else None) for e in events[1:]] == [
        ("ADDED", "b"), ("MODIFIED", "a")]
    assert events[-1].resource_version == str(emu.resource_version)
    assert events[-1].pod is not None and events[-1].pod.node_name == "n1"


def test_watch_relists_after_410_and_goes_on(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("a", "ml", unschedulable=UNSCHED))
    stale = str(emu.resource_version)
    emu.add(ke.make_pod("b", "ml", unschedulable=UNSCHED))
    emu.compact()

    def later() -> None:
        time.sleep(0.4)
        emu.add(ke.make_pod("c", "ml", unschedulable=UNSCHED))

    thread = threading.Thread(target=later)
    thread.start()
    events = list(k8s_cluster.watch_pods(stale, 2, field_selector="spec.nodeName="))
    thread.join()
    assert events[0].type == "RESYNC"
    assert [p.name for p in events[0].pods] == ["a", "b"]
    assert [(e.type, e.pod.name) for e in events[1:] if e.pod] == [("ADDED", "c")]


def test_watch_survives_a_server_closed_stream_and_ends_on_time(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    start_rv = str(emu.resource_version)

    def close_and_add() -> None:
        time.sleep(0.3)
        emu.close_watches()
        time.sleep(0.2)
        emu.add(ke.make_pod("late", "ml"))

    thread = threading.Thread(target=close_and_add)
    thread.start()
    started = time.monotonic()
    events = list(k8s_cluster.watch_pods(start_rv, 2.5))
    took = time.monotonic() - started
    thread.join()
    assert [(e.type, e.pod.name) for e in events if e.pod] == [("ADDED", "late")]
    assert took < 5


def test_controllers_quotas_events_and_inference_services(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    dep, rs = seed_orders(emu, pods=1)
    emu.set_replica_failure("ReplicaSet", "shop", rs["metadata"]["name"], QUOTA)
    job = emu.add(ke.make_job("train", "shop", gpus=1))
    emu.add(ke.make_event(job, "FailedCreate", "Error creating: " + QUOTA))
    emu.add(ke.make_resource_quota("compute", "shop", {"requests.cpu": "8",
                                                       "requests.nvidia.com/gpu": "4",
                                                       "limits.memory": "64Gi", "pods": "20"},
                                   used={"requests.cpu": "8"}))
    isvc = emu.add(ke.make_inference_service("llm", "shop", managed=True))
    emu.add(ke.make_predictor_deployment(isvc))

    deployments = {d.name: d for d in k8s_cluster.deployments("shop")}
    assert set(deployments) == {"orders", "llm-predictor"}
    assert deployments["orders"].selector == "app=orders"
    assert deployments["orders"].labels["sco/managed"] == "true"
    replicasets = k8s_cluster.replicasets(label_selector="app=orders")
    assert deployment_quota_block(deployments["orders"], replicasets) == QUOTA
    assert deployment_quota_block(deployments["llm-predictor"], replicasets) is None
    emu.set_replica_failure("Deployment", "shop", "orders", QUOTA)
    (orders,) = k8s_cluster.deployments(label_selector="sco/managed=true")
    assert deployment_quota_block(orders) == QUOTA
    (train,) = k8s_cluster.jobs("shop")
    assert train.name == "train"
    events = k8s_cluster.events("shop", involved_kind="Job", involved_name="train")
    assert events_quota_block(events) == "Error creating: " + QUOTA
    assert k8s_cluster.events("shop", reason="Scheduled") == []
    (quota,) = k8s_cluster.resource_quotas()
    assert quota.hard == {"requests.cpu": 8000, "requests.nvidia.com/gpu": 4,
                          "limits.memory": 64 * GI, "pods": 20}
    assert quota.used == {"requests.cpu": 8000}
    (llm,) = k8s_cluster.inference_services()
    assert (llm.name, llm.namespace, llm.labels["sco/managed"]) == ("llm", "shop", "true")
    assert k8s_cluster.inference_services("elsewhere") == []


def test_delete_managed_refuses_what_scoctl_does_not_manage(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_deployment("theirs", "shop"))
    with pytest.raises(PermanentError, match="not labelled sco/managed=true"):
        k8s_cluster.delete_managed("Deployment", "shop", "theirs")
    assert emu.get("Deployment", "shop", "theirs")["metadata"]["name"] == "theirs"

    seed_orders(emu, pods=2)
    assert k8s_cluster.delete_managed("Deployment", "shop", "orders") is True
    assert emu.objects("ReplicaSet", "shop") == []
    assert emu.objects("Pod", "shop") == []  # background propagation
    assert k8s_cluster.delete_managed("Deployment", "shop", "orders") is False

    isvc = emu.add(ke.make_inference_service("llm", "shop", managed=True))
    emu.add(ke.make_predictor_deployment(isvc))
    assert k8s_cluster.delete_managed("InferenceService", "shop", "llm") is True
    assert [d["metadata"]["name"] for d in emu.objects("Deployment", "shop")] == ["theirs"]


def test_cordon_drain_and_delete_a_node(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_node("n1"))
    emu.add(ke.make_pod("app", "shop", node_name="n1", phase="Running"))
    emu.add(ke.make_pod("done", "shop", node_name="n1", phase="Succeeded"))
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": "fluentd", "uid": "ds-1"}}
    emu.add(ke.make_pod("fluentd-n1", "kube-system", node_name="n1", phase="Running",
                        owner=ds))
    emu.add(ke.make_pod("elsewhere", "shop", node_name="n2", phase="Running"))

    k8s_cluster.cordon("n1")
    assert k8s_cluster.nodes()[0].unschedulable is True
    assert sorted(p.name for p in k8s_cluster.pods_on_node("n1")) == [
        "app", "done", "fluentd-n1"]
    assert k8s_cluster.drain("n1", timeout=60) == ["shop/app"]  # and waits until it is gone
    assert sorted(p.name for p in k8s_cluster.pods_on_node("n1")) == ["done", "fluentd-n1"]
    assert any("/eviction" in r for r in emu.requests)
    k8s_cluster.uncordon("n1")
    assert k8s_cluster.nodes()[0].unschedulable is False
    assert k8s_cluster.delete_node("n1") is True
    assert k8s_cluster.delete_node("n1") is False
    assert k8s_cluster.evict("shop", "gone") is False
    with pytest.raises(PermanentError):
        k8s_cluster.cordon("n1")


def test_api_failures_map_to_temporary_and_permanent_errors(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster
) -> None:
    k8s_emulator.fail_next(1, 503, path_contains="/nodes")
    with pytest.raises(TemporaryError, match="503"):
        k8s_cluster.nodes()
    k8s_emulator.fail_next(1, 500, path_contains="/pods")
    with pytest.raises(TemporaryError, match="500"):
        k8s_cluster.pods()
    k8s_emulator.fail_next(1, 403, path_contains="/deployments")
    with pytest.raises(PermanentError, match="403"):
        k8s_cluster.deployments()
    k8s_emulator.fail_next(1, 429, retry_after=7, path_contains="/eviction")
    emu_pod = ke.make_pod("p", "shop", node_name="n1", phase="Running")
    k8s_emulator.add(emu_pod)
    with pytest.raises(TemporaryError) as refused:
        k8s_cluster.evict("shop", "p")
    assert refused.value.delay == 7
    with pytest.raises(PermanentError, match="400 unable to parse requirement"):
        k8s_cluster.pods(label_selector="app in broken)")
    assert [n.name for n in k8s_cluster.nodes()] == []


def test_an_unreachable_api_is_a_temporary_error(k8s_emulator: K8sEmulator,
                                                 k8s_kubeconfig: Path) -> None:
    cluster = KubernetesCluster(str(k8s_kubeconfig), connect_timeout=1, read_timeout=2)
    k8s_emulator.stop()
    try:
        with pytest.raises(TemporaryError):
            cluster.nodes()
    finally:
        cluster.close()
