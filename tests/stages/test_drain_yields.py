"""A drain yields to new demand: its wait ends as soon as the caller's `until` answers True
(the controller's `demand_waiting`), so that a PodDisruptionBudget holding a scale-down never
holds the launch the new demand waits for. The unit stays draining and the next pass waits on.
The real `kubernetes` client against the emulator (a 429 from the budget, a pod Terminating
for its grace period, as the API server does), the real openstacksdk against Nova's emulator."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.fakes import FakeCloud
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import SystemClock
from scoctl.core import controller as decide
from scoctl.errors import EvictionRefused, StillTerminating
from scoctl.runner.compose import Pass
from scoctl.runner.controller import INTAKE_OWED, Controller
from scoctl.runner.signals import Signals
from scoctl.services.informer import Informer
from scoctl.sim.k8s_emulator import K8sEmulator, make_node, make_pdb, make_pod
from scoctl.state import open_store
from tests.stages.test_intake_cost import config_for
from tests.stages.test_reconcile import World, emulator_cloud, world  # noqa: F401
from tests.stages.test_reconcile_drain_budget import (
    BudgetedPodBeforeDrain,
    evictions_of,
    ready_pod,
    surplus_unit,
)

pytestmark = pytest.mark.k8s


class Asked:
    """An `until` that answers `answer`, counting the questions."""

    def __init__(self, answer: bool) -> None:
        self.answer = answer
        self.times = 0

    def __call__(self) -> bool:
        self.times += 1
        return self.answer


class HurriedBudgetedPod(BudgetedPodBeforeDrain):
    """`BudgetedPodBeforeDrain`, its drain taking the caller's `until` on."""

    def drain(self, node: str, *, timeout: float,
              until: Callable[[], bool] | None = None) -> list[str]:
        self.k8s.add(ready_pod("late", node))
        return KubernetesCluster.drain(self, node, timeout=timeout, until=until)


def hurried_unit(at: World, kubeconfig: Path) -> Any:
    server = surplus_unit(at, kubeconfig, None)
    at.cluster.close()
    at.cluster = HurriedBudgetedPod(kubeconfig, at.k8s, None)
    return server


def budgeted_node(k8s: K8sEmulator, *, grace: int = 1, healthy_elsewhere: bool = False
                  ) -> None:
    """Node `n1` running pod `late` (Ready) under a budget of minAvailable 1."""
    k8s.add(make_node("n1"))
    pod = ready_pod("late", "n1")
    pod["spec"]["terminationGracePeriodSeconds"] = grace
    k8s.add(pod)
    if healthy_elsewhere:
        k8s.add(make_node("n2"))
        k8s.add(ready_pod("buddy", "n2"))
    k8s.add(make_pdb("late", match_labels={"app": "late"}, min_available=1))
    k8s.sync_disruption()


def test_a_refused_eviction_is_sent_once_and_the_wait_ends_when_until_says_so(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster,
) -> None:
    budgeted_node(k8s_emulator)  # 1 of 1 healthy: every eviction is refused
    until = Asked(True)
    with pytest.raises(EvictionRefused) as raised:
        k8s_cluster.drain("n1", timeout=60, until=until)
    assert raised.value.pods == ("default/late",)
    assert until.times == 1  # asked after the first poll, and the answer ended the wait
    assert evictions_of(k8s_emulator, "late") == 1  # no retry once the caller hurries


def test_an_until_that_never_hurries_leaves_the_drain_as_it_was(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster,
) -> None:
    budgeted_node(k8s_emulator)
    until = Asked(False)
    with pytest.raises(EvictionRefused):
        k8s_cluster.drain("n1", timeout=60, until=until)
    assert until.times >= 2  # asked at each poll
    assert evictions_of(k8s_emulator, "late") >= 2  # tried again within the drain's slack


def test_pods_still_in_their_grace_period_end_a_hurried_wait_cut_short(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster,
) -> None:
    budgeted_node(k8s_emulator, grace=30, healthy_elsewhere=True)  # 2 healthy: one may go
    with pytest.raises(StillTerminating) as raised:
        k8s_cluster.drain("n1", timeout=60, until=Asked(True))
    assert raised.value.pods == ("default/late",)
    assert raised.value.cut_short
    pod = k8s_emulator.get("Pod", "default", "late")
    assert pod["metadata"].get("deletionTimestamp") is not None  # evicted, in its grace period


def test_a_reconcile_in_a_hurry_leaves_the_blocked_unit_draining_without_retrying(
    world: World, k8s_kubeconfig: Path,  # noqa: F811 - the fixture
) -> None:
    world.k8s.add(make_node("elsewhere"))
    world.k8s.add(ready_pod("buddy", "elsewhere", ready=False))
    world.k8s.add(make_pdb("late", match_labels={"app": "late"}, min_available=1))
    world.k8s.sync_disruption()
    server = hurried_unit(world, k8s_kubeconfig)
    hurry = Asked(True)
    result = world.reconcile(hurry=hurry)
    assert result.problems == ()
    assert hurry.times >= 1
    [event] = [e for e in world.store.events() if e.token == "DRAIN_BLOCKED"]
    assert event.detail["pods"] == ["default/late"]
    assert evictions_of(world.k8s, "late") == 1
    assert result.regions[0].scaled_down == ()
    assert world.status(server.id) == "draining"
    assert world.cloud.server(server.id).status == "ACTIVE"  # type: ignore[union-attr]


def test_a_reconcile_in_a_hurry_writes_no_timeout_for_pods_within_their_grace(
    world: World, k8s_kubeconfig: Path,  # noqa: F811 - the fixture
) -> None:
    server = hurried_unit(world, k8s_kubeconfig)
    world.k8s.grace_scale = 1.0  # the late pod's 1 s grace outlasts the hurried wait
    result = world.reconcile(hurry=Asked(True))
    assert result.problems == ()
    tokens = [e.token for e in world.store.events()]
    assert "DRAIN_TIMED_OUT" not in tokens and "DRAIN_BLOCKED" not in tokens
    assert result.regions[0].scaled_down == ()
    assert world.status(server.id) == "draining"
    world.k8s.grace_scale = 0.1
    deadline = time.monotonic() + 30
    while world.k8s.objects("Pod"):  # its grace period ends, the API deletes it
        assert time.monotonic() < deadline, "the evicted pod never went"
        time.sleep(0.05)
    again = world.reconcile()  # the next pass waits on and finishes the scale-down
    assert again.regions[0].scaled_down == (server.name,)


def pending(name: str) -> dict[str, Any]:
    return make_pod(name, "shop", cpu="1", memory="1Gi", labels={"sco/workload": "orders"},
                    unschedulable="0/1 nodes are available")


@contextmanager
def synced_controller(cluster: KubernetesCluster, tmp_path: Path,
                      reports: list[Any] | None = None) -> Iterator[Controller]:
    """An in-process controller (Nova an in-memory fake) whose pod watch has synced."""
    config = config_for(tmp_path, tmp_path / "kubeconfig")
    with open_store(tmp_path / "state.db", create=True) as store:
        controller = Controller(config, store, SystemClock(), sources=("k8s",),
                                cluster=cluster, scheduler=None, lock=nullcontext,
                                clouds={"region-a": FakeCloud()},
                                on_pass=(reports if reports is not None else []).append)
        controller.informer = Informer(cluster, (), timeout=5.0).start()
        try:
            deadline = time.monotonic() + 30
            while not controller.follower.synced:
                assert time.monotonic() < deadline, "the pod watch never synced"
                controller._take(controller.informer.drain(0.2))
            yield controller
        finally:
            controller.informer.stop()


def test_the_controller_hurries_on_new_demand_and_holds_what_it_looked_at(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
) -> None:
    k8s_emulator.add(make_pod("orders-0", "shop", cpu="1", memory="1Gi",
                              labels={"sco/workload": "orders"}, node_name="n1",
                              phase="Running"))
    with synced_controller(k8s_cluster, tmp_path) as controller:
        assert controller.steps.deps().hurry == controller.demand_waiting
        assert not controller.demand_waiting()

        k8s_emulator.update("Pod", "shop", "orders-0",  # a status change: no demand
                            lambda pod: pod["metadata"]["labels"].update({"seen": "1"}))
        deadline = time.monotonic() + 30
        while not controller.held:
            assert time.monotonic() < deadline, "the update never reached the queue"
            assert not controller.demand_waiting()
            time.sleep(0.02)

        k8s_emulator.add(pending("orders-new"))
        deadline = time.monotonic() + 30
        while not controller.demand_waiting():
            assert time.monotonic() < deadline, "the new pod never reached the queue"
            time.sleep(0.02)
        assert ("shop", "orders-new") not in controller.follower.pods  # no change mid-pass
        assert controller.schedule.window is None
        controller._idle(Signals())
        assert controller.held == []
        assert ("shop", "orders-new") in controller.follower.pods  # taken, in order
        assert controller.follower.pods[("shop", "orders-0")].labels.get("seen") == "1"
        assert controller.schedule.window is not None  # the batch window opened
        assert controller.demand_waiting()  # owed until an intake takes it in
        controller.steps.intake(decide.Due("intake", kubernetes=True),
                                Pass(controller.steps.deps()))
        assert not controller.demand_waiting()


def test_a_pass_while_new_demand_waits_leaves_the_events_to_the_intake_pass(
    k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
) -> None:
    reports: list[Any] = []
    with synced_controller(k8s_cluster, tmp_path, reports) as controller:
        for _ in range(3):  # the first intake, plan, reconcile: a quiet controller
            controller.schedule = decide.start(controller.clock.monotonic())
            controller._pass()
        k8s_emulator.add(pending("orders-new"))
        deadline = time.monotonic() + 30
        while controller.schedule.window is None:
            assert time.monotonic() < deadline, "the new pod never arrived"
            assert controller.informer is not None
            controller._take(controller.informer.drain(0.2))
        controller.schedule = replace(  # a reconcile asked for, past its gap
            decide.reconcile_wanted(controller.schedule), last_reconcile=-math.inf)
        controller._pass()  # the window still open: a reconcile only
        steps = {s.name: s for s in reports[-1].steps}
        assert "watch" not in steps and "reconcile" in steps
        assert steps["kube-events"].skipped == INTAKE_OWED
        while controller.schedule.window is not None:
            controller._idle(Signals())
            controller._pass()
        steps = {s.name: s for s in reports[-1].steps}
        assert "watch" in steps
        assert not steps["kube-events"].skipped
        assert steps["kube-events"].ok
