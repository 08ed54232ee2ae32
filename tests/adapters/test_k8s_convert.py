"""The Kubernetes adapter's conversion of raw API objects: pods of one template share their
container, condition and owner values, which equal those built for each pod alone."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from scoctl.adapters.kube_convert import pod_info
from scoctl.core.model import Container, OwnerRef, PodInfo
from scoctl.sim import k8s_emulator as ke


def _pods(count: int) -> list[dict[str, object]]:
    deployment = ke.make_deployment("orders", "shop", replicas=count, cpu="4", memory="16Gi")
    deployment["metadata"]["uid"] = "uid-orders"
    replicaset = ke.make_replicaset(deployment)
    replicaset["metadata"]["uid"] = "uid-orders-rs"
    return ke.pods_for(replicaset, count, unschedulable="0/3 nodes are available.")


def test_pods_of_one_template_share_equal_values():
    first, second = (pod_info(raw) for raw in _pods(2))
    assert first.containers is second.containers
    assert first.conditions is second.conditions
    assert first.owners is second.owners
    assert first.containers == (Container("main", {"cpu": 4000, "memory": 16 * 2**30}),)
    assert first.owners == (OwnerRef("ReplicaSet", "orders-5d8f7c9b4", "uid-orders-rs",
                                     "apps/v1", True),)
    assert first.name != second.name


def test_a_container_value_that_cannot_be_hashed_is_converted_unshared():
    raw = copy.deepcopy(_pods(1)[0])
    raw["spec"]["containers"][0]["restartPolicy"] = {"odd": "value"}  # type: ignore[index]
    pod = pod_info(raw)
    assert pod.containers[0].restart_policy == {"odd": "value"}
    assert pod_info(raw).containers == pod.containers


def test_a_pods_creation_timestamp_is_read_and_an_unreadable_one_is_unknown():
    raw = copy.deepcopy(_pods(1)[0])
    raw["metadata"]["creationTimestamp"] = "2026-01-01T00:00:30Z"  # type: ignore[index]
    assert pod_info(raw).created == 1767225630.0
    raw["metadata"]["creationTimestamp"] = "yesterday"  # type: ignore[index]
    assert pod_info(raw).created is None
    del raw["metadata"]["creationTimestamp"]  # type: ignore[attr-defined]
    assert pod_info(raw).created is None


def test_a_converted_pod_has_every_field_and_equals_one_built_by_its_class():
    [raw] = _pods(1)
    pod = pod_info(raw)
    assert set(vars(pod)) == {f.name for f in dataclasses.fields(PodInfo)}
    assert pod == PodInfo(**{f.name: getattr(pod, f.name) for f in dataclasses.fields(PodInfo)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        pod.name = "other"  # type: ignore[misc]


def test_pods_that_differ_only_in_what_scoctl_does_not_read_share_their_values():
    first, second = _pods(2)
    for container in second["spec"]["containers"]:  # each pod's own API token mount
        container["volumeMounts"] = [{"name": "kube-api-access-x7k2p", "mountPath": "/var"}]
    a, b = pod_info(first), pod_info(second)
    assert a.containers is b.containers and a.owners is b.owners
    second["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert pod_info(second).containers[0].requests["cpu"] == 2000  # a read field: its own


def test_a_required_pod_anti_affinity_over_the_hostname_keeps_the_pod_alone():
    """core/v1 PodAntiAffinity `requiredDuringSchedulingIgnoredDuringExecution` terms with
    `topologyKey: kubernetes.io/hostname` (upstream's InterPodAffinity filter): one per node."""
    raw = copy.deepcopy(_pods(1)[0])
    term = {"labelSelector": {"matchLabels": {"app": "orders"}},
            "topologyKey": "kubernetes.io/hostname"}
    raw["spec"]["affinity"] = {  # type: ignore[index]
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    placement = pod_info(raw).placement
    assert placement is not None and placement.alone
    term["topologyKey"] = "topology.kubernetes.io/zone"
    zonal = pod_info(copy.deepcopy(raw)).placement
    assert zonal is None or not zonal.alone
