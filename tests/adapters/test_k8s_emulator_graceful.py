"""Graceful pod deletion in the Kubernetes API emulator, as kube-apiserver and the kubelet do it,
driven by the real `kubernetes` client over HTTP. Each test names the upstream rule it follows
(kubernetes/kubernetes)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client, watch

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s

SCALE = 0.05  # the default 30 s grace period takes 1.5 s here


@pytest.fixture
def k8s_emulator() -> Iterator[K8sEmulator]:
    """The emulator with grace periods scaled down (the fixtures built on it follow)."""
    emulator = K8sEmulator(grace_scale=SCALE).start()
    try:
        yield emulator
    finally:
        emulator.stop()


def running_pod(emu: K8sEmulator, name: str, grace: int | None = None, **kw: Any) -> None:
    pod = ke.make_pod(name, node_name="n1", phase="Running", **kw)
    if grace is not None:
        pod["spec"]["terminationGracePeriodSeconds"] = grace
    emu.add(pod)


def evict(core: Any, name: str, grace: int | None = None) -> None:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": name, "namespace": "default"}}
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    core.create_namespaced_pod_eviction(name, "default", body)


def gone_within(emu: K8sEmulator, name: str, seconds: float) -> float:
    """Seconds until the pod is gone (fails after `seconds`)."""
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        if not [p for p in emu.objects("Pod", "default") if p["metadata"]["name"] == name]:
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"pod {name} still there after {seconds} s")


def test_pods_get_the_default_termination_grace_period_of_30_seconds(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec`: terminationGracePeriodSeconds
    defaults to v1.DefaultTerminationGracePeriodSeconds (30)."""
    running_pod(k8s_emulator, "p")
    pod = client.CoreV1Api(k8s_api).read_namespaced_pod("p", "default")
    assert pod.spec.termination_grace_period_seconds == 30


def test_an_eviction_leaves_the_pod_terminating_with_a_disruption_target_until_its_grace_ends(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/registry/core/pod/storage/eviction.go `EvictionREST.Create` →
    `addConditionAndDeletePod`: the condition DisruptionTarget=True (EvictionByEvictionAPI) is
    added, then the pod is deleted gracefully: staging/src/k8s.io/apiserver/pkg/registry/rest/
    delete.go `BeforeDelete` sets deletionTimestamp = now + grace and
    deletionGracePeriodSeconds; registry/generic/registry/store.go `Store.Delete` keeps the
    object (an update: MODIFIED) until the kubelet deletes it with grace 0 (DELETED)."""
    emu = k8s_emulator
    running_pod(emu, "p")
    core = client.CoreV1Api(k8s_api)
    rv = core.list_namespaced_pod("default").metadata.resource_version
    asked = datetime.now(UTC)
    evict(core, "p")

    pod = core.read_namespaced_pod("p", "default")
    assert pod.metadata.deletion_grace_period_seconds == 30
    assert abs((pod.metadata.deletion_timestamp - asked).total_seconds() - 30) <= 1.5
    target = [c for c in pod.status.conditions if c.type == "DisruptionTarget"]
    assert [(c.status, c.reason) for c in target] == [("True", "EvictionByEvictionAPI")]
    assert [p.metadata.name for p in core.list_namespaced_pod(
        "default", field_selector="spec.nodeName=n1").items] == ["p"]

    took = gone_within(emu, "p", 30 * SCALE + 2)
    assert took >= 30 * SCALE - 0.3  # not before its (scaled) grace period
    events = [(e["type"], e["object"].metadata.deletion_timestamp is not None)
              for e in watch.Watch().stream(core.list_namespaced_pod, "default",
                                            resource_version=rv, timeout_seconds=1)]
    assert events == [("MODIFIED", True), ("DELETED", True)]


def test_a_delete_uses_the_pods_own_grace_period_and_zero_deletes_at_once(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/registry/core/pod/strategy.go `podStrategy.CheckGracefulDelete`: the DeleteOptions'
    gracePeriodSeconds, else the pod's terminationGracePeriodSeconds; rest/delete.go
    `BeforeDelete` with a period of 0 is no graceful deletion: the object goes at once."""
    emu = k8s_emulator
    running_pod(emu, "slow", grace=4)
    running_pod(emu, "now")
    core = client.CoreV1Api(k8s_api)
    core.delete_namespaced_pod("slow", "default")
    pod = emu.get("Pod", "default", "slow")
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 4
    assert not any(c["type"] == "DisruptionTarget" for c in pod["status"].get("conditions", []))
    core.delete_namespaced_pod("now", "default", body={"gracePeriodSeconds": 0})
    assert [p["metadata"]["name"] for p in emu.objects("Pod")] == ["slow"]
    gone_within(emu, "slow", 4 * SCALE + 2)


def test_unbound_and_finished_pods_are_deleted_at_once(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/registry/core/pod/strategy.go `podStrategy.CheckGracefulDelete`: a pod not
    scheduled (no nodeName) or already Succeeded/Failed gets a grace period of 0."""
    emu = k8s_emulator
    emu.add(ke.make_pod("pending"))
    emu.add(ke.make_pod("done", node_name="n1", phase="Succeeded"))
    core = client.CoreV1Api(k8s_api)
    core.delete_namespaced_pod("pending", "default")
    evict(core, "done")
    assert emu.objects("Pod") == []


def test_a_second_delete_may_only_shorten_the_grace_period(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/rest/delete.go `BeforeDelete`: on an object
    being deleted, "we may only shorten the deletion grace period": a longer or no period
    leaves it as it is, a shorter one moves deletionTimestamp back by the difference."""
    emu = k8s_emulator
    running_pod(emu, "p", grace=200)
    core = client.CoreV1Api(k8s_api)
    core.delete_namespaced_pod("p", "default")
    first = emu.get("Pod", "default", "p")["metadata"]
    core.delete_namespaced_pod("p", "default", body={"gracePeriodSeconds": 300})
    core.delete_namespaced_pod("p", "default")
    again = emu.get("Pod", "default", "p")["metadata"]
    assert (again["deletionTimestamp"], again["deletionGracePeriodSeconds"]) == (
        first["deletionTimestamp"], 200)
    assert again["resourceVersion"] == first["resourceVersion"]
    core.delete_namespaced_pod("p", "default", body={"gracePeriodSeconds": 2})
    short = emu.get("Pod", "default", "p")["metadata"]
    assert short["deletionGracePeriodSeconds"] == 2
    moved = (datetime.fromisoformat(first["deletionTimestamp"])
             - datetime.fromisoformat(short["deletionTimestamp"])).total_seconds()
    assert moved == 198
    gone_within(emu, "p", 2 * SCALE + 2)


def test_evicting_a_terminating_pod_ignores_its_disruption_budget(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """pkg/registry/core/pod/storage/eviction.go `canIgnorePDB`: a pod with a deletionTimestamp
    (like a Pending, Succeeded or Failed one) is deleted without consulting its
    PodDisruptionBudget."""
    emu = k8s_emulator
    running_pod(emu, "p", grace=200, labels={"app": "web"})
    emu.add(ke.make_pdb("web", match_labels={"app": "web"}, min_available=1))
    core = client.CoreV1Api(k8s_api)
    core.delete_namespaced_pod("p", "default")
    evict(core, "p", grace=1)  # accepted: the budget is not asked, the grace period shortened
    assert emu.get("Pod", "default", "p")["metadata"]["deletionGracePeriodSeconds"] == 1


def test_an_update_neither_sets_nor_clears_a_deletion(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    """staging/src/k8s.io/apiserver/pkg/registry/rest/update.go `BeforeUpdate`: the
    deletionTimestamp and deletionGracePeriodSeconds of the stored object are kept whatever the
    update carries."""
    emu = k8s_emulator
    running_pod(emu, "p", grace=200)
    core = client.CoreV1Api(k8s_api)
    core.delete_namespaced_pod("p", "default")
    stamp = emu.get("Pod", "default", "p")["metadata"]["deletionTimestamp"]
    pod = core.read_namespaced_pod("p", "default").to_dict(serialize=True)
    pod["metadata"].pop("deletionTimestamp")
    pod["metadata"].pop("deletionGracePeriodSeconds")
    pod["metadata"]["labels"] = {"x": "1"}
    kept = core.replace_namespaced_pod("p", "default", pod).metadata
    assert kept.labels == {"x": "1"} and kept.deletion_grace_period_seconds == 200
    assert kept.deletion_timestamp == datetime.fromisoformat(stamp)


def test_the_grace_scale_may_not_be_zero() -> None:
    """Not upstream: the simulated region's speed-up. A zero scale would hide what graceful
    deletion is there to show; gracePeriodSeconds=0 is the way to delete at once."""
    with pytest.raises(ValueError, match="above 0"):
        K8sEmulator(grace_scale=0)
