"""`scoctl run`: the whole loop over the Kubernetes and Nova emulators, one lock, exit codes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.adapters.nova import NovaCloud
from scoctl.clock import FixedClock
from scoctl.core.timefmt import rfc3339
from scoctl.errors import TemporaryError
from scoctl.host.lock import run_lock
from scoctl.sim.k8s_emulator import K8sEmulator, make_node, make_pod
from scoctl.sim.nova_emulator import NovaEmulator
from scoctl.state import Store, open_store
from tests.builders import Systems, one_pass
from tests.fixtures.state import Cli
from tests.stages.test_reconcile import REGION, emulator_cloud, make_config  # noqa: F401

PODS = 6
CREATED_BEFORE = 30.0  # the pods were created this long before the first pass


@pytest.fixture
def loop(tmp_path: Path, emulator_cloud: NovaCloud, k8s_emulator: K8sEmulator,  # noqa: F811
         k8s_kubeconfig: Path) -> Iterator[tuple[Store, Systems, FixedClock, Path]]:
    clock = FixedClock()
    store = open_store(tmp_path / "state.db", clock=clock, create=True)
    cluster = KubernetesCluster(str(k8s_kubeconfig), "scoctl-sim")
    systems = Systems(cluster=cluster, clouds={REGION: emulator_cloud}, sources=("k8s",))
    created = rfc3339(clock.now() - timedelta(seconds=CREATED_BEFORE))
    for i in range(PODS):
        pod = make_pod(f"web-{i}", cpu="500m", memory="128Mi", labels={"sco/workload": "web"},
                       tolerations=[{"key": "reclaimable", "operator": "Equal",
                                     "value": "true", "effect": "NoSchedule"}],
                       unschedulable="0/0 nodes are available")
        pod["metadata"]["creationTimestamp"] = created
        k8s_emulator.add(pod)
    try:
        yield store, systems, clock, tmp_path
    finally:
        for server in emulator_cloud.servers():
            emulator_cloud.delete(server.id)
        cluster.close()
        store.close()


def test_one_pass_turns_pending_pods_into_servers_and_the_next_pass_into_ready_units(
    loop: tuple[Store, Systems, FixedClock, Path], nova_emulator: NovaEmulator,
    k8s_emulator: K8sEmulator,
) -> None:
    store, systems, clock, tmp = loop
    config = make_config(tmp, metrics="{textfile: " + str(tmp / "scoctl.prom") + "}")
    first = one_pass(config, store, clock, systems, acquire_watch=0)
    assert first.exit_code == 0, first.as_dict()
    assert f'scoctl_pending{{source="k8s"}} {PODS}' in (tmp / "scoctl.prom").read_text()
    assert [s.name for s in first.steps] == ["watch", "plan", "acquire", "reconcile", "notice",
                                             "kube-events"]
    claim = store.claim("web")
    assert claim is not None and claim.pods == PODS
    servers = list(systems.clouds[REGION].servers(tags=["sco:managed"]))  # type: ignore
    assert servers and {i.status for i in store.instances()} <= {"requested", "building",
                                                                 "active"}
    nova_emulator.settle()
    for server in servers:  # the node agent: nodes register Ready, labelled and tainted
        inst = store.instance(server.id)
        assert inst is not None
        k8s_emulator.add(make_node(server.name, provider_id=f"openstack:///{server.id}",
                                   labels={"sco/managed": "true", "sco/workload": "web",
                                           "sco/pool": inst.pool or ""},
                                   taints=[{"key": "reclaimable", "value": "true",
                                            "effect": "NoSchedule"}]))
    second = one_pass(config, store, clock, systems, acquire_watch=0)
    assert second.exit_code == 0
    assert {i.status for i in store.instances()} == {"ready"}
    acquire = second.step("acquire")
    assert acquire is not None and acquire.result.launches == ()  # nothing launched twice
    text = (tmp / "scoctl.prom").read_text()
    assert 'scoctl_instances{state="ready"} ' + str(len(servers)) in text
    assert "scoctl_stage_duration_seconds{stage=\"reconcile\"}" in text
    assert f'scoctl_cloud_calls_total{{outcome="ok",region="{REGION}"}}' in text
    assert "scoctl_last_success_timestamp_seconds" in text
    assert "scoctl_claim_pods 6" in text


def test_a_timer_pass_records_latency_from_the_pods_creation_not_from_its_own_sight(
    loop: tuple[Store, Systems, FixedClock, Path], nova_emulator: NovaEmulator,
    k8s_emulator: K8sEmulator,
) -> None:
    """``run --once`` (no controller) records both histograms, each sample starting at the
    pods' creationTimestamp: the "decision p99" alert works for timer users too."""
    store, systems, clock, tmp = loop
    config = make_config(tmp, metrics="{textfile: " + str(tmp / "scoctl.prom") + "}")
    assert one_pass(config, store, clock, systems, acquire_watch=0).exit_code == 0
    decided = store.latency_samples("placement_decision")
    assert [(s.workload, s.seconds) for s in decided] == [("web", CREATED_BEFORE)]
    assert "scoctl_placement_decision_seconds_count 1" in (tmp / "scoctl.prom").read_text()
    nova_emulator.settle()
    for server in systems.clouds[REGION].servers(tags=["sco:managed"]):  # type: ignore
        inst = store.instance(server.id)
        assert inst is not None
        k8s_emulator.add(make_node(server.name, provider_id=f"openstack:///{server.id}",
                                   labels={"sco/managed": "true", "sco/workload": "web",
                                           "sco/pool": inst.pool or ""},
                                   taints=[{"key": "reclaimable", "value": "true",
                                            "effect": "NoSchedule"}]))
    clock.advance(12)
    assert one_pass(config, store, clock, systems, acquire_watch=0).exit_code == 0
    ready = store.latency_samples("pending_to_ready")
    assert [(s.workload, s.seconds) for s in ready] == [("web", CREATED_BEFORE + 12)]
    assert "scoctl_pending_to_ready_seconds_count 1" in (tmp / "scoctl.prom").read_text()


def test_a_failed_stage_is_named_the_others_still_run_and_the_exit_code_is_1(
    loop: tuple[Store, Systems, FixedClock, Path], nova_emulator: NovaEmulator,
) -> None:
    store, systems, clock, tmp = loop
    config = make_config(tmp)
    nova_emulator.inject(503, count=100, methods=["GET"])
    started = time.perf_counter()
    try:
        result = one_pass(config, store, clock, systems, acquire_watch=0)
    finally:
        for _ in range(100):  # burn what is left of the injected faults
            try:
                systems.clouds[REGION].servers()  # type: ignore[index]
                break
            except TemporaryError:
                continue
    assert time.perf_counter() - started < 30
    assert result.exit_code == 1
    assert "reconcile" in result.failed
    watch = result.step("watch")
    plan = result.step("plan")
    assert watch is not None and watch.ok and plan is not None and plan.ok
    assert store.claim("web") is not None  # watch and plan did their part


def test_run_once_exits_75_while_another_run_holds_the_lock(tmp_path: Path, cli: Cli) -> None:
    config = make_config(tmp_path)
    assert config.path is not None and config.path.exists()
    open_store(tmp_path / "state.db", create=True).close()
    with run_lock(tmp_path / "state.db"):
        done = cli("--config", str(config.path), "run", "--once")
    assert done.code == 75, done.stderr
    assert "lock" in done.stderr


def test_a_runner_acts_only_for_the_regions_it_leads(tmp_path):
    """`leads` (several runners on a shared state) keeps acquire and reconcile off the regions
    another runner leads; the leader gauge says so."""
    from scoctl.adapters.fakes import FakeCloud
    from scoctl.clock import FixedClock
    from scoctl.stages.acquire import run_acquire
    from scoctl.stages.reconcile import run_reconcile
    from scoctl.state import open_store
    from tests.stages.test_acquire import make_config, set_plan

    config = make_config(tmp_path)
    fake = FakeCloud()
    with open_store(tmp_path / "state.db", create=True) as store:
        set_plan(store, "web", {"small.a": 1})
        clock = FixedClock()
        led = run_acquire(config, store, clock, connect=lambda c, r, b: fake, watch=0,
                          leads=lambda region: False)
        assert led.launches == () and fake.calls == []
        again = run_reconcile(config, store, clock, clouds={r.name: fake for r in config.regions},
                              discover=False, leads=lambda region: False)
        assert again.regions == () and fake.calls == []
        launched = run_acquire(config, store, clock, connect=lambda c, r, b: fake, watch=0,
                               leads=lambda region: True)
        assert [o.pool for o in launched.launches] == ["small.a"]
