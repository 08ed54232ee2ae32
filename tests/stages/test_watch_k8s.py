"""`scoctl watch` against the Kubernetes emulator, through the real client: every Kubernetes
flow of design: Statuses end to end, the 42-pod batch, quota blocks with teardown, 410 and
restarts."""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import FixedClock, SystemClock
from scoctl.config.schema import Config, load_config
from scoctl.core.model import PodEvent
from scoctl.host.spool import write_event
from scoctl.runner.watch import follow
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator, StatusError
from scoctl.stages import watch as watch_stage
from scoctl.stages.watch import Follower, WatchResult, run_pass
from scoctl.state import Store, open_store
from tests.builders import BOOTSTRAP
from tests.fixtures.k8s import with_scoctl_role

# These tests stop the API under open TLS watches and drop clients mid-stream: the client
# library leaves such sockets to the garbage collector (a ResourceWarning seen only over TLS).
# Each test's garbage is collected at its own end, so none is blamed on whichever test the
# collector next runs in; the leak itself is the client's, and is noted as known.
pytestmark = [pytest.mark.k8s,
              pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")]


@pytest.fixture(autouse=True)
def _collect_dropped_sockets() -> Iterator[None]:
    yield
    gc.collect()

GI = 2**30
BUSY = ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: "
        "3 No preemption victims found for incoming pod..")
QUOTA = ('pods "orders-daily-5d8f7c9b4-x1" is forbidden: exceeded quota: shop-quota, requested: '
         'requests.cpu=4,requests.memory=16Gi, used: requests.cpu=32,requests.memory=128Gi, '
         'limited: requests.cpu=32,requests.memory=128Gi')
REPO = Path(__file__).resolve().parents[2]


def write_config(tmp_path: Path, kubeconfig: Path, *, quota_block: str = "fail",
                 elastic: bool = True, idle: str = "1s", longest: str = "5s") -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path}/state.db
spool: {tmp_path}/spool
budget_dir: {tmp_path}/run
regions:
  - name: region-a
    cloud: region-a
    launch: {{image: ubuntu-24.04, networks: [net-a]}}
flavors:
  - {{name: c4.xlarge, vcpus: 16, ram: 64Gi}}
  - {{name: c4.2xlarge, vcpus: 32, ram: 128Gi}}
node_reserve: {{cpu: 100m, memory: 1Gi}}
pools:
  - {{name: c4.2xlarge.az1.spot, region: region-a, az: az1, flavor: c4.2xlarge, group: row-a,
     tier: reclaimable, depth: 40}}
contracts:
  T1: {{floor: 0.30, pool_cap: 0.15, group_cap: 0.30, min_pools: 8}}
  T2: {{floor: 0.0}}
ranking: {{id: r-8812, scores: {{c4.2xlarge.az1.spot: 0.9}}}}
workloads:
  - {{name: orders-daily, contract: T1, source: k8s, kind: deployment, namespace: shop}}
kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}
intake: {{batch_idle: {idle}, batch_max: {longest}}}
quota_block: {quota_block}
elastic: {str(elastic).lower()}
{BOOTSTRAP}""", encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path, k8s_kubeconfig: Path) -> Config:
    return load_config(write_config(tmp_path, k8s_kubeconfig))


@pytest.fixture
def wstore(tmp_path: Path) -> Iterator[Store]:
    store = open_store(tmp_path / "state.db", clock=FixedClock(), create=True)
    yield store
    store.close()


def nodes(emu: K8sEmulator, count: int = 3, *, cpu: str = "16", managed: bool = True) -> None:
    for i in range(count):
        emu.add(ke.make_node(f"sco-{i}", cpu=cpu, memory="64Gi",
                             labels={"sco/managed": "true"} if managed else {}))


def orders(emu: K8sEmulator, pods: int = 42, *, managed: bool = True, cpu: str = "4",
           name: str = "orders-daily", namespace: str = "shop",
           labels: dict[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Deployment with its ReplicaSet and `pods` unschedulable pods of 4 vCPU / 16Gi, which
    carry the toleration and node selector of their (exclusive) workload's units, as the
    platform that creates managed workloads gives them."""
    dep = emu.add(ke.make_deployment(name, namespace, replicas=pods, cpu=cpu, memory="16Gi",
                                     managed=managed, labels=labels,
                                     tolerations=[{"key": "sco/workload", "operator": "Equal",
                                                   "value": name, "effect": "NoSchedule"}],
                                     node_selector={"sco/workload": name}))
    rs = emu.add(ke.make_replicaset(dep))
    emu.add_many(ke.pods_for(rs, pods, unschedulable=BUSY))
    return dep, rs


def once(config: Config, store: Store, cluster: KubernetesCluster, *,
         teardown: bool = True) -> WatchResult:
    return run_pass(config, store, store.clock, sources=["k8s"], cluster=cluster,
                    teardown=teardown)


def statuses(store: Store, slug: str = "orders-daily") -> list[str | None]:
    return [e.status for e in store.events(workload=slug) if e.token != "TEARDOWN"]


def tokens(store: Store, slug: str = "orders-daily") -> list[str]:
    return [e.token for e in store.events(workload=slug)]


def gone(emu: K8sEmulator, kind: str, namespace: str, name: str) -> bool:
    try:
        emu.get(kind, namespace, name)
    except StatusError as exc:
        return exc.code == 404
    return False


def make_available(emu: K8sEmulator, name: str, replicas: int,
                   namespace: str = "shop") -> None:
    def change(dep: dict[str, Any]) -> None:
        dep["status"] = {"replicas": replicas, "readyReplicas": replicas,
                         "availableReplicas": replicas, "updatedReplicas": replicas,
                         "conditions": [{"type": "Available", "status": "True",
                                         "reason": "MinimumReplicasAvailable"}]}
    emu.update("Deployment", namespace, name, change)


# --- once ------------------------------------------------------------------------------------


def test_42_pending_pods_become_one_claim_of_168_vcpu_and_672_gib(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    nodes(k8s_emulator)
    orders(k8s_emulator)
    k8s_emulator.add(ke.make_pod("stranger", "shop", cpu="64", unschedulable=BUSY))

    first = once(config, wstore, k8s_cluster)
    claim = wstore.claim("orders-daily")
    assert claim is not None
    assert (claim.version, claim.pods, claim.contract, claim.source) == (1, 42, "T1", "k8s")
    assert claim.requests == {"cpu": 168_000, "memory": 672 * GI}
    assert claim.largest_pod == {"cpu": 4000, "memory": 16 * GI}
    assert (first.claims_written, first.claims_changed, first.changed) == (1, 1, ["orders-daily"])
    assert [c.workload for c in wstore.claims()] == ["orders-daily"]  # the stranger is not ours
    assert statuses(wstore) == ["queued"]

    again = once(config, wstore, k8s_cluster)  # nothing changed: no version, no token
    assert (again.claims_changed, again.tokens) == (0, 0)
    assert wstore.claim("orders-daily").version == 1  # type: ignore[union-attr]

    k8s_emulator.delete("Pod", "shop", "orders-daily-5d8f7c9b4-00041")
    shrunk = once(config, wstore, k8s_cluster)
    assert shrunk.changed == ["orders-daily"]
    claim = wstore.claim("orders-daily")
    assert claim is not None and (claim.version, claim.pods) == (2, 41)


def test_k8s_flow_pending_queued_preparing_running(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    nodes(k8s_emulator)
    orders(k8s_emulator, 4)
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "queued"  # type: ignore[union-attr]

    for i in range(4):  # scheduled onto nodes scoctl launched: still starting
        k8s_emulator.bind_pod("shop", f"orders-daily-5d8f7c9b4-{i:05d}", f"sco-{i % 3}",
                              running=False)
    result = once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "preparing"  # type: ignore[union-attr]
    assert result.claims_changed == 0  # bound to our nodes: the claim keeps them

    for i in range(4):
        k8s_emulator.bind_pod("shop", f"orders-daily-5d8f7c9b4-{i:05d}", f"sco-{i % 3}")
    make_available(k8s_emulator, "orders-daily", 4)
    once(config, wstore, k8s_cluster)
    assert statuses(wstore) == ["queued", "preparing", "running"]
    assert tokens(wstore) == ["POD_QUEUED", "POD_INITIALIZING", "DEPLOYMENT_AVAILABLE"]
    claim = wstore.claim("orders-daily")
    assert claim is not None and (claim.version, claim.pods) == (1, 4)

    k8s_emulator.set_pod_unschedulable("shop", "orders-daily-5d8f7c9b4-00000")
    once(config, wstore, k8s_cluster)  # running is settled: no longer watched
    assert wstore.active_workload("orders-daily").status == "running"  # type: ignore[union-attr]


def test_a_running_deployment_scaled_up_is_queued_again_and_one_scaled_to_zero_never_runs(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    # issue 28 item 10: a settled workload was never watched again (42 pods pending later gave
    # no POD_QUEUED), and a Deployment with 0 desired replicas was marked running
    nodes(k8s_emulator)
    _, rs = orders(k8s_emulator, 2)
    for i in range(2):
        k8s_emulator.bind_pod("shop", f"orders-daily-5d8f7c9b4-{i:05d}", f"sco-{i}")
    make_available(k8s_emulator, "orders-daily", 2)
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "running"  # type: ignore[union-attr]

    def scale(dep: dict[str, Any]) -> None:
        dep["spec"]["replicas"] = 44  # status still says 2 available
    k8s_emulator.update("Deployment", "shop", "orders-daily", scale)
    k8s_emulator.add_many(ke.pods_for(rs, 42, unschedulable=BUSY, start=2))
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "queued"  # type: ignore[union-attr]
    assert tokens(wstore)[-1] == "POD_QUEUED"
    assert wstore.events(workload="orders-daily")[-1].detail["pods"] == 42
    claim = wstore.claim("orders-daily")
    assert claim is not None and claim.pods == 44

    idle = k8s_emulator.add(ke.make_deployment("idle", "shop", replicas=0, managed=True,
                                               labels={"sco/workload": "idle"}))
    make_available(k8s_emulator, idle["metadata"]["name"], 0)
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("idle") is None or \
        wstore.active_workload("idle").status != "running"  # type: ignore[union-attr]
    assert "DEPLOYMENT_AVAILABLE" not in tokens(wstore, "idle")


def test_over_capacity_found_at_run_time_fails_and_tears_down(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
        k8s_kubeconfig: Path, wstore: Store) -> None:
    config = load_config(write_config(tmp_path, k8s_kubeconfig, elastic=False))
    nodes(k8s_emulator, 1, cpu="32")
    orders(k8s_emulator, 2, cpu="24")
    once(config, wstore, k8s_cluster)  # a 32-CPU node could hold a 24-CPU pod: busy, queued
    assert wstore.active_workload("orders-daily").status == "queued"  # type: ignore[union-attr]

    k8s_emulator.delete("Node", None, "sco-0")
    nodes(k8s_emulator, 2, cpu="16")  # now no node could ever hold 24 CPUs
    result = once(config, wstore, k8s_cluster)
    assert statuses(wstore) == ["queued", "failed"]
    failed = wstore.events(workload="orders-daily")[1]
    assert failed.token == "POD_SCHEDULING_FAILED"
    assert failed.detail["request"] == {"cpu": 24, "memory": 16 * GI}
    assert [t.deleted for t in result.teardowns] == [("Deployment shop/orders-daily",)]
    assert gone(k8s_emulator, "Deployment", "shop", "orders-daily")
    assert gone(k8s_emulator, "Pod", "shop", "orders-daily-5d8f7c9b4-00000")  # cascade
    assert wstore.claim("orders-daily").requests == {}  # type: ignore[union-attr]

    orders(k8s_emulator, 2, cpu="24")  # the same objects again: the failed row stays failed
    assert once(config, wstore, k8s_cluster).tokens == 0


def quota_blocked(emu: K8sEmulator, *, managed: bool = True) -> None:
    nodes(emu)
    dep, rs = orders(emu, 2, managed=managed)
    for i in range(2):
        emu.bind_pod("shop", f"orders-daily-5d8f7c9b4-{i:05d}", "sco-0", running=False)


def test_quota_block_fails_at_once_and_tears_down_the_deployment(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    quota_blocked(k8s_emulator)
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "preparing"  # type: ignore[union-attr]

    k8s_emulator.set_replica_failure("ReplicaSet", "shop", "orders-daily-5d8f7c9b4", QUOTA)
    result = once(config, wstore, k8s_cluster)
    assert statuses(wstore) == ["preparing", "failed"]
    assert tokens(wstore) == ["POD_INITIALIZING", "POD_QUOTA_EXCEEDED_FAILED", "TEARDOWN"]
    assert result.teardowns[0].deleted == ("Deployment shop/orders-daily",)
    assert gone(k8s_emulator, "Deployment", "shop", "orders-daily")
    assert gone(k8s_emulator, "ReplicaSet", "shop", "orders-daily-5d8f7c9b4")
    assert any(r.startswith("DELETE /apis/apps/v1/namespaces/shop/deployments/orders-daily")
               for r in k8s_emulator.requests)


def test_no_teardown_keeps_the_objects_of_a_failed_workload(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    quota_blocked(k8s_emulator)
    k8s_emulator.set_replica_failure("Deployment", "shop", "orders-daily", QUOTA)
    result = once(config, wstore, k8s_cluster, teardown=False)
    assert wstore.latest_workload("orders-daily").status == "failed"  # type: ignore[union-attr]
    assert result.teardowns[0].skipped == "--no-teardown"
    assert not gone(k8s_emulator, "Deployment", "shop", "orders-daily")
    assert not any(r.startswith("DELETE") for r in k8s_emulator.requests)


def test_teardown_never_deletes_objects_scoctl_does_not_manage(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    quota_blocked(k8s_emulator, managed=False)
    k8s_emulator.set_replica_failure("Deployment", "shop", "orders-daily", QUOTA)
    result = once(config, wstore, k8s_cluster)
    assert wstore.latest_workload("orders-daily").status == "failed"  # type: ignore[union-attr]
    assert result.teardowns[0].deleted == ()
    assert "not labelled sco/managed=true" in result.teardowns[0].kept[0]
    assert not gone(k8s_emulator, "Deployment", "shop", "orders-daily")
    assert not any(r.startswith("DELETE") for r in k8s_emulator.requests)


def test_quota_block_queue_keeps_a_busy_quota_queued(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
        k8s_kubeconfig: Path, wstore: Store) -> None:
    config = load_config(write_config(tmp_path, k8s_kubeconfig, quota_block="queue"))
    nodes(k8s_emulator)
    orders(k8s_emulator, 0)
    k8s_emulator.set_replica_failure("Deployment", "shop", "orders-daily", QUOTA)
    once(config, wstore, k8s_cluster)
    assert wstore.active_workload("orders-daily").status == "queued"  # type: ignore[union-attr]
    assert not gone(k8s_emulator, "Deployment", "shop", "orders-daily")


def test_inference_service_quota_block_tears_down_the_inference_service(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    nodes(k8s_emulator)
    isvc = k8s_emulator.add(ke.make_inference_service("llm", "ml", managed=True,
                                                      labels={"sco/workload": "llm"}))
    predictor = k8s_emulator.add(ke.make_predictor_deployment(isvc))
    k8s_emulator.set_replica_failure("Deployment", "ml", predictor["metadata"]["name"], QUOTA)
    result = once(config, wstore, k8s_cluster)
    row = wstore.latest_workload("llm")
    assert row is not None and (row.kind, row.status) == ("inference", "failed")
    assert result.teardowns[0].deleted == ("InferenceService ml/llm",)
    assert gone(k8s_emulator, "InferenceService", "ml", "llm")


def test_job_quota_block_is_only_logged(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    nodes(k8s_emulator)
    job = k8s_emulator.add(ke.make_job("etl", "shop", labels={"sco/workload": "etl",
                                                              "sco/managed": "true"}))
    k8s_emulator.add(ke.make_event(job, "FailedCreate", "Error creating: " + QUOTA))
    first = once(config, wstore, k8s_cluster)
    assert tokens(wstore, "etl") == ["POD_CREATION_BLOCKED"]
    assert wstore.latest_workload("etl").status == "pending"  # type: ignore[union-attr]
    assert first.teardowns == [] and not gone(k8s_emulator, "Job", "shop", "etl")
    once(config, wstore, k8s_cluster)
    assert tokens(wstore, "etl") == ["POD_CREATION_BLOCKED"]  # logged once


def test_spool_is_ingested_first_and_files_go_only_after_the_commit(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes(k8s_emulator)
    write_event(config.spool, ts="2026-01-01T00:00:00.000000Z", token="POD_INITIALIZING",
                workload="orders-daily", detail={"by": "hook"})
    write_event(config.spool, ts="2026-01-01T00:00:01.000000Z", token="SLURM_JOB_SUBMITTED",
                workload="train-x", detail={"job_id": "77"})

    def broken(*args: object) -> object:
        raise RuntimeError("crash in the middle of the pass")

    monkeypatch.setattr(watch_stage, "decide_k8s_intake", broken)
    with pytest.raises(RuntimeError, match="crash in the middle of the pass"):
        once(config, wstore, k8s_cluster)
    assert len(list(config.spool.glob("*.json"))) == 2  # rolled back: nothing lost
    assert wstore.events() == []
    monkeypatch.undo()

    result = once(config, wstore, k8s_cluster)
    assert (result.spool_events, result.spool_tokens) == (2, 2)
    assert list(config.spool.glob("*.json")) == []
    row = wstore.latest_workload("train-x")
    assert row is not None and (row.source, row.kind, row.job_id, row.status) == \
        ("slurm", "job", "77", "queued")
    assert wstore.latest_workload("orders-daily").status == "preparing"  # type: ignore[union-attr]


def test_an_unreachable_api_is_reported_and_the_spool_still_recorded(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    write_event(config.spool, ts="2026-01-01T00:00:00.000000Z", token="POD_QUEUED",
                workload="orders-daily")
    k8s_emulator.fail_next(50, 503)
    result = once(config, wstore, k8s_cluster)
    assert result.errors and "503" in result.errors[0]
    assert result.spool_tokens == 1 and wstore.claims() == []


# --- follow -----------------------------------------------------------------------------------


def test_follow_batches_42_pods_over_two_seconds_into_one_claim_version(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        wstore: Store) -> None:
    """Driven event by event with a fixed clock: no sleeping."""
    clock = FixedClock()
    nodes(k8s_emulator)
    follower = Follower(config, wstore, clock, sources=["k8s"], cluster=k8s_cluster, poll=30)
    follower.commit()  # the first periodic pass: nothing pending yet
    follower.handle(PodEvent("RESYNC", "1", pods=()))
    orders(k8s_emulator, 42)
    for pod in k8s_cluster.pods("shop"):  # they arrive over 2 s, one ADDED event each
        assert follower.handle(PodEvent("ADDED", pod.resource_version, pod=pod))
        assert not follower.due()
        clock.advance(2.0 / 41)
    clock.advance(1.0 - 2.0 / 41 - 0.01)
    assert not follower.due()
    clock.advance(0.02)
    assert follower.due()
    result = follower.commit()
    claim = wstore.claim("orders-daily")
    assert claim is not None and (claim.version, claim.pods) == (1, 42)
    assert claim.requests == {"cpu": 168_000, "memory": 672 * GI}
    assert result.changed == ["orders-daily"]
    assert not follower.due() and follower.seconds_to_due() == pytest.approx(30)


def run_follow(config: Config, store: Store, cluster: KubernetesCluster,
               **kw: Any) -> tuple[threading.Event, threading.Thread, list[WatchResult],
                                   list[str]]:
    stop = threading.Event()
    passes: list[WatchResult] = []
    errors: list[str] = []
    thread = threading.Thread(target=follow, args=(config, store, SystemClock()), kwargs={
        "sources": ["k8s"], "stop": stop, "on_pass": passes.append, "cluster": cluster,
        "poll": 30, "watch_timeout": 5, "on_error": errors.append, **kw}, daemon=True)
    thread.start()
    return stop, thread, passes, errors


def wait_until(predicate: Callable[[], bool], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_follow_commits_pods_arriving_over_time_as_one_claim(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
        k8s_kubeconfig: Path) -> None:
    config = load_config(write_config(tmp_path, k8s_kubeconfig, idle="500ms"))
    store = open_store(tmp_path / "state.db", create=True, clock=SystemClock())
    nodes(k8s_emulator)
    dep = k8s_emulator.add(ke.make_deployment("orders-daily", "shop", replicas=42, cpu="4",
                                              memory="16Gi", managed=True))
    rs = k8s_emulator.add(ke.make_replicaset(dep))
    stop, thread, passes, errors = run_follow(config, store, k8s_cluster)
    try:
        assert wait_until(lambda: len(passes) >= 1)  # the initial pass
        for pod in ke.pods_for(rs, 42, unschedulable=BUSY):
            k8s_emulator.add(pod)
            time.sleep(0.02)
        assert wait_until(lambda: (c := store.claim("orders-daily")) is not None
                          and c.pods == 42)
        time.sleep(0.7)  # longer than the idle window: nothing more is committed
        claim = store.claim("orders-daily")
        assert claim is not None and claim.version == 1
    finally:
        stop.set()
        thread.join(timeout=10)
        store.close()
    assert not thread.is_alive() and errors == []


def test_follow_retries_a_held_lock_a_second_later_not_in_a_tight_loop(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
        k8s_kubeconfig: Path) -> None:
    from contextlib import contextmanager

    from scoctl.errors import LockHeld

    config = load_config(write_config(tmp_path, k8s_kubeconfig, idle="200ms"))
    store = open_store(tmp_path / "state.db", create=True, clock=SystemClock())
    nodes(k8s_emulator)
    orders(k8s_emulator, 3)
    tries: list[float] = []
    held_until = time.monotonic() + 2.5  # another writer holds the lock for 2.5 s

    @contextmanager
    def guard() -> Iterator[None]:
        tries.append(time.monotonic())
        if tries[-1] < held_until:
            raise LockHeld("another scoctl run holds the lock")
        yield

    stop, thread, passes, errors = run_follow(config, store, k8s_cluster, guard=guard)
    try:
        assert wait_until(lambda: store.claim("orders-daily") is not None)
    finally:
        stop.set()
        thread.join(timeout=10)
        store.close()
    held = [t for t in tries if t < held_until]
    assert 2 <= len(held) <= 4, len(held)  # about one try a second while it is held
    assert len(errors) == 1 and passes  # one warning for the stretch of contention


def test_follow_relists_after_410_gone_and_keeps_the_claim_right(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, tmp_path: Path,
        k8s_kubeconfig: Path) -> None:
    config = load_config(write_config(tmp_path, k8s_kubeconfig, idle="200ms"))
    store = open_store(tmp_path / "state.db", create=True, clock=SystemClock())
    nodes(k8s_emulator)
    dep = k8s_emulator.add(ke.make_deployment("orders-daily", "shop", replicas=8, cpu="4",
                                              memory="16Gi", managed=True))
    rs = k8s_emulator.add(ke.make_replicaset(dep))
    k8s_emulator.add_many(ke.pods_for(rs, 4, unschedulable=BUSY))
    stop, thread, passes, errors = run_follow(config, store, k8s_cluster)
    try:
        assert wait_until(lambda: (c := store.claim("orders-daily")) is not None
                          and c.pods == 4)
        lists_before = sum(1 for r in k8s_emulator.requests
                           if r.startswith("GET /api/v1/pods?") and "watch=true" not in r)
        k8s_emulator.add_many(ke.pods_for(rs, 4, unschedulable=BUSY, start=4))
        k8s_emulator.compact("Pod")  # history gone: the resumed watch gets 410 Gone
        k8s_emulator.close_watches()
        assert wait_until(lambda: (c := store.claim("orders-daily")) is not None
                          and c.pods == 8)
        lists_after = sum(1 for r in k8s_emulator.requests
                          if r.startswith("GET /api/v1/pods?") and "watch=true" not in r)
        assert lists_after > lists_before  # re-listed
    finally:
        stop.set()
        thread.join(timeout=10)
        store.close()
    assert errors == []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_follow_survives_an_api_restart(tmp_path: Path) -> None:
    emu = with_scoctl_role(K8sEmulator(port=free_port())).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(emu.kubeconfig(), encoding="utf-8")
    config = load_config(write_config(tmp_path, kubeconfig, idle="200ms"))
    store = open_store(tmp_path / "state.db", create=True, clock=SystemClock())
    cluster = KubernetesCluster(str(kubeconfig), "scoctl-sim")
    nodes(emu)
    dep, rs = orders(emu, 2)
    stop, thread, passes, errors = run_follow(config, store, cluster)
    try:
        assert wait_until(lambda: (c := store.claim("orders-daily")) is not None and c.pods == 2)
        emu.stop()
        assert wait_until(lambda: len(errors) > 0)  # the watch saw the API go away
        emu.start()
        emu.add_many(ke.pods_for(rs, 3, unschedulable=BUSY, start=2))
        assert wait_until(lambda: (c := store.claim("orders-daily")) is not None
                          and c.pods == 5)
    finally:
        stop.set()
        thread.join(timeout=10)
        cluster.close()
        store.close()
        emu.stop()
    assert not thread.is_alive()


# --- the command ----------------------------------------------------------------------------


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "KUBECONFIG"))}
    env["PYTHONPATH"] = str(REPO)
    return env


def test_cli_once_json_summary_and_exit_codes(
        k8s_emulator: K8sEmulator, tmp_path: Path, k8s_kubeconfig: Path) -> None:
    path = write_config(tmp_path, k8s_kubeconfig)
    nodes(k8s_emulator)
    orders(k8s_emulator, 42)
    scoctl = [sys.executable, "-m", "scoctl", "--config", str(path), "watch"]
    done = subprocess.run([*scoctl, "--source", "k8s", "--once", "--json"], env=cli_env(),
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["claims_written"], body["claims_changed"], body["changed"], body["tokens"]) == \
        (1, 1, ["orders-daily"], 1)
    assert body["sources"]["k8s"]["pods"] == 42 and body["errors"] == []
    assert isinstance(body["seconds"], float)

    both = subprocess.run([*scoctl, "--once", "--follow"], env=cli_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert both.returncode == 2

    k8s_emulator.fail_next(100, 503)
    down = subprocess.run([*scoctl, "--source", "k8s", "--once"], env=cli_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert down.returncode == 1 and "503" in down.stderr


def test_cli_follow_streams_json_lines_until_sigterm(
        k8s_emulator: K8sEmulator, tmp_path: Path, k8s_kubeconfig: Path) -> None:
    path = write_config(tmp_path, k8s_kubeconfig, idle="200ms")
    nodes(k8s_emulator)
    orders(k8s_emulator, 3)
    with subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(path), "watch",
                           "--source", "k8s", "--follow", "--json"], env=cli_env(),
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            first = json.loads(proc.stdout.readline())
            assert first["changed"] == ["orders-daily"]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def test_cli_follow_takes_the_run_lock_only_while_a_pass_records(
        k8s_emulator: K8sEmulator, tmp_path: Path, k8s_kubeconfig: Path) -> None:
    path = write_config(tmp_path, k8s_kubeconfig, idle="200ms")
    nodes(k8s_emulator)
    orders(k8s_emulator, 3)
    with subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(path), "watch",
                           "--source", "k8s", "--follow", "--json"], env=cli_env(),
                          cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        try:
            assert proc.stdout is not None
            json.loads(proc.stdout.readline())  # the first pass has committed
            # another writer gets the lock while --follow keeps streaming (a pass holds it for
            # milliseconds; a --follow holding it for its whole life would give exit 75)
            other = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(path),
                                    "init", "--wait", "5"], env=cli_env(), cwd=tmp_path,
                                   capture_output=True, text=True, timeout=60)
            assert other.returncode == 0, other.stderr
            assert proc.poll() is None
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=20)
            assert proc.returncode == 0
            # while `init` held the lock, --follow waited and said so once, never spinning
            # (thousands of warnings once filled the stderr pipe and hung the process)
            assert err.count("holds the lock") <= 1, err[-2000:]
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
