"""A scale-down's drain under a PodDisruptionBudget: a 429 is a budget holding pods, never an
outage. The drain tries a refused eviction again while it waits (not before the refusal's
Retry-After), and what is still refused at the end keeps the server (`DRAIN_BLOCKED`). The real
`kubernetes` client against the emulator, whose disruption controller writes the budgets'
status, the real openstacksdk against the Nova emulator."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.errors import TemporaryError
from scoctl.sim.k8s_emulator import K8sEmulator, make_node, make_pdb, make_pod
from tests.stages.test_reconcile import World, emulator_cloud, world  # noqa: F401

pytestmark = pytest.mark.k8s

READY = [{"type": "Ready", "status": "True"}]


def ready_pod(name: str, node: str, *, ready: bool = True) -> dict[str, Any]:
    pod = make_pod(name, labels={"app": "late"}, node_name=node, phase="Running")
    pod["spec"]["terminationGracePeriodSeconds"] = 1
    if ready:
        pod["status"]["conditions"] = READY
    return pod


class BudgetedPodBeforeDrain(KubernetesCluster):
    """The real adapter, plus a Ready pod under a PodDisruptionBudget bound to the node after
    the idle re-check and before the drain (created with its nodeName: no scheduler, no
    cordon), so that the drain has a budgeted pod to evict."""

    def __init__(self, kubeconfig: Path, k8s: K8sEmulator, pdb: dict[str, Any] | None) -> None:
        super().__init__(str(kubeconfig), "scoctl-sim")
        self.k8s = k8s
        self.pdb = pdb
        self.outcomes: list[str] = []  # each eviction's: "evicted", or the refusal

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        try:
            done = super().evict(namespace, name, uid)
        except TemporaryError as exc:
            self.outcomes.append(f"{exc} (retry after {exc.delay})")
            raise
        self.outcomes.append("evicted")
        return done

    def drain(self, node: str, *, timeout: float) -> list[str]:
        self.k8s.add(ready_pod("late", node))
        if self.pdb is not None:
            self.k8s.add(self.pdb)
        return super().drain(node, timeout=timeout)


def surplus_unit(at: World, kubeconfig: Path, pdb: dict[str, Any] | None) -> Any:
    """One Ready, idle unit the plan does not hold, idle past the timeout."""
    at.k8s.grace_scale = 0.1
    [server] = at.launch(1)
    at.settle()
    at.register(server)
    at.reconcile()
    at.clock.advance(700)
    at.cluster.close()
    at.cluster = BudgetedPodBeforeDrain(kubeconfig, at.k8s, pdb)
    return server


def evictions_of(k8s: K8sEmulator, pod: str) -> int:
    return sum(1 for r in k8s.requests if f"/pods/{pod}/eviction" in r)


def test_a_budget_still_being_processed_keeps_the_server_and_is_no_problem(
    world: World, k8s_kubeconfig: Path,  # noqa: F811 - the fixture
) -> None:
    world.k8s.disruption_delay = None  # the controller never gets to the new budget
    server = surplus_unit(world, k8s_kubeconfig,
                          make_pdb("late", match_labels={"app": "late"}, min_available=0))
    started = time.monotonic()
    result = world.reconcile()
    assert result.problems == ()  # the API answered: a budget, not an outage
    assert time.monotonic() - started < 8  # a few seconds of slack, not timeouts.drain
    [event] = [e for e in world.store.events() if e.token == "DRAIN_BLOCKED"]
    assert (event.detail["server"], event.detail["pods"], event.detail["retry_after"]) == (
        server.id, ["default/late"], 10.0)
    assert evictions_of(world.k8s, "late") == 1  # not again before its Retry-After (10 s)
    assert result.regions[0].scaled_down == ()
    assert world.status(server.id) == "draining"
    assert world.cloud.server(server.id).status == "ACTIVE"  # type: ignore[union-attr]
    assert world.k8s.get("Pod", "default", "late")["metadata"].get("deletionTimestamp") is None


def test_an_eviction_the_budget_refuses_is_tried_again_within_the_drain(
    world: World, k8s_kubeconfig: Path,  # noqa: F811 - the fixture
) -> None:
    world.k8s.add(make_node("elsewhere"))
    world.k8s.add(ready_pod("buddy", "elsewhere", ready=False))
    world.k8s.add(make_pdb("late", match_labels={"app": "late"}, min_available=1))
    world.k8s.sync_disruption()  # no longer "still being processed" (the controller's lag)
    server = surplus_unit(world, k8s_kubeconfig, None)
    cluster = world.cluster
    assert isinstance(cluster, BudgetedPodBeforeDrain)

    def buddy_ready() -> None:  # the other replica turns Ready once the drain was refused
        deadline = time.monotonic() + 30
        while not cluster.outcomes and time.monotonic() < deadline:
            time.sleep(0.01)
        world.k8s.update("Pod", "default", "buddy",
                         lambda pod: pod["status"].update({"conditions": READY}))

    threading.Thread(target=buddy_ready, daemon=True).start()
    result = world.reconcile()
    assert result.problems == ()
    assert "disruption budget. (retry after None)" in cluster.outcomes[0]  # 1 of 1 healthy
    blocked = [e.detail for e in world.store.events() if e.token == "DRAIN_BLOCKED"]
    assert cluster.outcomes[-1] == "evicted", (cluster.outcomes, blocked)  # tried again
    assert result.regions[0].scaled_down == (server.name,)
    assert [p["metadata"]["name"] for p in world.k8s.objects("Pod")] == ["buddy"]
    assert world.status(server.id) in ("deleting", "deleted")
