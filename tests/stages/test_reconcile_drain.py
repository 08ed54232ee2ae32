"""A scale-down's drain waits for its evicted pods to terminate before the server goes (issue 30:
on a real cluster an evicted pod stays Terminating for up to its grace period). The real
`kubernetes` client against the emulator with graceful deletion, the real openstacksdk against
the Nova emulator."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.sim.k8s_emulator import K8sEmulator, make_pod
from tests.stages.test_reconcile import World, emulator_cloud, make_config, world  # noqa: F401

pytestmark = pytest.mark.k8s

GRACE = 20  # the late pod's terminationGracePeriodSeconds
SCALE = 0.1  # … taking 2 s in the emulator


class PodLandsBeforeDrain(KubernetesCluster):
    """The real adapter, plus a pod bound to the node after the idle re-check and before the
    drain (a pod created with its nodeName set skips the scheduler, and so the cordon), so the
    drain has a pod to evict; `gone` records when the emulator last held it."""

    def __init__(self, kubeconfig: Path, k8s: K8sEmulator) -> None:
        super().__init__(str(kubeconfig), "scoctl-sim")
        self.k8s = k8s
        self.gone: float | None = None
        self.pods_at_node_delete: list[str] | None = None

    def drain(self, node: str, *, timeout: float) -> list[str]:
        pod = make_pod("late", node_name=node, phase="Running")
        pod["spec"]["terminationGracePeriodSeconds"] = GRACE
        self.k8s.add(pod)
        threading.Thread(target=self._watch_gone, daemon=True).start()
        return super().drain(node, timeout=timeout)

    def _watch_gone(self) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if not [p for p in self.k8s.objects("Pod") if p["metadata"]["name"] == "late"]:
                self.gone = time.time()
                return
            time.sleep(0.005)

    def delete_node(self, node: str) -> bool:
        self.pods_at_node_delete = [p["metadata"]["name"] for p in self.k8s.objects("Pod")
                                    if p["spec"].get("nodeName") == node]
        return super().delete_node(node)


def surplus_unit(at: World, kubeconfig: Path) -> tuple[Any, PodLandsBeforeDrain]:
    """One Ready, idle unit the plan does not hold, idle past the timeout."""
    at.k8s.grace_scale = SCALE
    [server] = at.launch(1)
    at.settle()
    at.register(server)
    at.reconcile()
    at.clock.advance(700)
    at.cluster.close()
    at.cluster = cluster = PodLandsBeforeDrain(kubeconfig, at.k8s)
    return server, cluster


def test_a_scale_down_deletes_the_server_only_after_its_evicted_pods_are_gone(
    world: World, k8s_kubeconfig: Path,  # noqa: F811 - the fixture
) -> None:
    server, cluster = surplus_unit(world, k8s_kubeconfig)
    assert world.nova is not None
    started = time.time()
    result = world.reconcile()
    assert result.problems == ()
    assert result.regions[0].scaled_down == (server.name,)
    late = world.k8s.requests
    assert any("/pods/late/eviction" in r for r in late)
    assert cluster.gone is not None and cluster.pods_at_node_delete == []
    [deleted_at] = [t for t, method, path, _ in world.nova.timed_calls()
                    if method == "DELETE" and path.endswith(server.id)]
    # the pod was Terminating for its grace period (scaled), and the server outlived it
    assert cluster.gone - started >= GRACE * SCALE - 0.2
    assert cluster.gone <= deleted_at
    assert deleted_at - cluster.gone < 1.0  # polled, not slept through
    assert world.status(server.id) in ("deleting", "deleted")


def test_pods_still_terminating_when_the_drain_times_out_keep_the_server(
    world: World, k8s_kubeconfig: Path, tmp_path: Path,  # noqa: F811 - the fixture
) -> None:
    world.config = make_config(tmp_path, timeouts="{drain: 1s}")
    server, cluster = surplus_unit(world, k8s_kubeconfig)
    world.k8s.grace_scale = 1.0  # the late pod takes its full 20 s
    result = world.reconcile()
    assert result.problems == ()  # the API answered: no Kubernetes outage
    [event] = [e for e in world.store.events() if e.token == "DRAIN_TIMED_OUT"]
    assert (event.level, event.detail["server"], event.detail["pods"]) == (
        "warning", server.id, ["default/late"])
    assert 1 <= event.detail["waited_seconds"] < 3  # timeouts.drain, not the 20 s grace period
    assert result.regions[0].scaled_down == ()
    assert world.status(server.id) == "draining"  # the next pass carries it on
    assert cluster.pods_at_node_delete is None  # neither the Node nor the server deleted
    assert world.cloud.server(server.id).status == "ACTIVE"  # type: ignore[union-attr]

    world.k8s.delete("Pod", "default", "late")  # its containers stopped at last
    world.cluster.close()
    world.cluster = KubernetesCluster(str(k8s_kubeconfig), "scoctl-sim")
    again = world.reconcile()
    assert again.problems == () and again.regions[0].scaled_down == (server.name,)
    assert world.status(server.id) in ("deleting", "deleted")
