"""An eviction carries the uid of the pod it means (`Cluster.evict(namespace, name, uid)`), so
a pod recreated under the same name is never evicted instead; the emulator answers as the
apiserver does, with the real `kubernetes` client over HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s


def replaced(emu: K8sEmulator, core: Any) -> tuple[str, str]:
    """Pod shop/p created, deleted at once and created again under the same name: the first
    pod's uid and the second's."""
    emu.add(ke.make_pod("p", "shop", node_name="n1", phase="Running"))
    first = core.read_namespaced_pod("p", "shop").metadata.uid
    core.delete_namespaced_pod("p", "shop", grace_period_seconds=0)
    emu.add(ke.make_pod("p", "shop", node_name="n1", phase="Running"))
    second = core.read_namespaced_pod("p", "shop").metadata.uid
    assert first != second
    return first, second


def test_an_eviction_whose_uid_precondition_fails_is_409_and_evicts_nothing(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/registry/core/pod/storage/eviction.go `EvictionREST.Create` hands the Eviction's
    deleteOptions to `r.store.Delete`; registry/generic/registry/store.go checks their
    preconditions (`Preconditions.Check`): a uid that is not the object's is 409 Conflict
    ("Precondition failed: UID in precondition: …"), and the pod stays."""
    core = client.CoreV1Api(k8s_api)
    first, second = replaced(k8s_emulator, core)
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": "p", "namespace": "shop"},
            "deleteOptions": {"preconditions": {"uid": first}}}
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod_eviction("p", "shop", body)
    assert refused.value.status == 409
    assert "Precondition failed: UID in precondition" in refused.value.body
    pod = core.read_namespaced_pod("p", "shop")
    assert pod.metadata.uid == second and pod.metadata.deletion_timestamp is None
    body["deleteOptions"] = {"preconditions": {"uid": second}}  # the right uid: evicted
    core.create_namespaced_pod_eviction("p", "shop", body)
    assert core.read_namespaced_pod("p", "shop").metadata.deletion_timestamp is not None


def test_scoctl_never_evicts_a_pod_recreated_under_the_name_it_meant(
    k8s_emulator: K8sEmulator, k8s_api: Any, k8s_cluster: KubernetesCluster
) -> None:
    """The adapter sends ``deleteOptions.preconditions.uid``: the pod it read is gone
    (False), the new one under its name runs on."""
    core = client.CoreV1Api(k8s_api)
    first, second = replaced(k8s_emulator, core)
    assert k8s_cluster.evict("shop", "p", first) is False
    pod = core.read_namespaced_pod("p", "shop")
    assert pod.metadata.uid == second and pod.metadata.deletion_timestamp is None
    [request] = [r for r in k8s_emulator.requests if "/eviction" in r]
    assert k8s_cluster.evict("shop", "p", second) is True
    assert core.read_namespaced_pod("p", "shop").metadata.deletion_timestamp is not None
