"""The reconcile stage: real openstacksdk against the Nova emulator (and the real Nova harness
for faults), the official Kubernetes client against the Kubernetes emulator, a real state file.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.adapters.nova import NovaCloud
from scoctl.adapters.retry import RetryPolicy
from scoctl.clock import Clock, FixedClock
from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import (
    InstanceRecord,
    LaunchRecord,
    LaunchRequest,
    PlanUnitRecord,
    PlanWorkloadRecord,
    ServerInfo,
)
from scoctl.sim.k8s_emulator import K8sEmulator, make_deployment, make_node, make_pod
from scoctl.sim.nova_emulator import IMAGE_ID, NETWORK_ID, NovaEmulator
from scoctl.stages.reconcile import ReconcileResult, run_reconcile
from scoctl.state import Store
from tests.builders import BOOTSTRAP, held_units
from tests.fixtures.nova import NovaBackend, write_clouds_yaml

REGION = "region-a"


def make_config(tmp: Path, **extra: Any) -> Config:
    lines = "".join(f"{k}: {v}\n" for k, v in extra.items())
    text = f"""
state: {tmp}/state.db
budget_dir: {tmp}/budget
regions:
  - name: {REGION}
    cloud: {REGION}
    mutating_calls_per_second: 1000
    launch: {{image: {IMAGE_ID}, networks: [{NETWORK_ID}]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
  - {{name: m1.xlarge, vcpus: 8, ram: 16Gi}}
pools:
  - {{name: tiny.spot, region: {REGION}, az: nova, flavor: m1.tiny, group: g1,
     tier: reclaimable, depth: 50}}
  - {{name: big.spot, region: {REGION}, az: nova, flavor: m1.xlarge, group: g2,
     tier: reclaimable, depth: 50}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{tiny.spot: 0.9, big.spot: 0.5}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
{BOOTSTRAP}{lines}"""
    (tmp / "config.yaml").write_text(text, encoding="utf-8")
    return parse_config(load_located(text, str(tmp / "config.yaml")), path=tmp / "config.yaml")


@dataclass
class World:
    config: Config
    store: Store
    clock: FixedClock
    cloud: NovaCloud
    k8s: K8sEmulator
    cluster: KubernetesCluster
    nova: NovaEmulator | None

    def reconcile(self, **kwargs: Any) -> ReconcileResult:
        return run_reconcile(self.config, self.store, self.clock, clouds={REGION: self.cloud},
                             cluster=self.cluster, discover=False, **kwargs)

    def launch(self, count: int = 1, *, workload: str = "web", pool: str = "tiny.spot",
               launch_id: str | None = None, flavor: str = "m1.tiny", record: bool = True,
               tags: tuple[str, ...] | None = None) -> list[ServerInfo]:
        """Create servers as acquire does (tags, multi-create) and record them as instances."""
        launch_id = launch_id or f"l-{uuid.uuid4().hex[:12]}"
        if tags is None:
            tags = ("sco:managed", f"sco:workload={workload}", f"sco:pool={pool}", "sco:gen=1",
                    f"sco:launch={launch_id}")
        result = self.cloud.launch(LaunchRequest(
            name=f"sco-{workload}-{launch_id}", flavor=flavor, image=IMAGE_ID,
            networks=(NETWORK_ID,), min_count=count, max_count=count, tags=tags))
        if record:
            for server in result.servers:
                self.store.upsert_instance(InstanceRecord(
                    id=server.id, name=server.name, region=REGION, workload=workload,
                    pool=pool, generation=1, launch_id=launch_id, status="requested",
                    created=self.store.now(), updated=self.store.now()))
        return list(result.servers)

    def settle(self) -> None:
        if self.nova is not None:
            self.nova.settle()

    def register(self, server: ServerInfo, *, pool: str = "tiny.spot", workload: str = "web",
                 taint: bool = True, name: str | None = None) -> None:
        """The node agent's part: a Ready node with scoctl's labels and taint (named after the
        server unless `name` says otherwise)."""
        self.k8s.add(make_node(
            name or server.name, provider_id=f"openstack:///{server.id}",
            labels={"sco/managed": "true", "sco/workload": workload, "sco/pool": pool},
            taints=[{"key": "reclaimable", "value": "true", "effect": "NoSchedule"}]
            if taint else None))

    def status(self, server_id: str) -> str:
        inst = self.store.instance(server_id)
        assert inst is not None
        return inst.status

    def tokens(self) -> list[str]:
        return [e.token for e in self.store.events()]

    def plan(self, units: Mapping[str, int], workload: str = "web") -> None:
        self.store.commit_plan(ranking="r-1", full=False, plans=[PlanWorkloadRecord(
            workload=workload, generation=0, claim_version=1, contract="T1", ranking="r-1",
            feasible=True, degraded=False, reasons=(),
            pools=tuple(PlanUnitRecord(pool=p, tier="reclaimable", group="g1", units=n,
                                       share=0.0, score=0.0) for p, n in units.items()))])


def _world(tmp_path: Path, make_store: Callable[[Clock], Store], cloud: NovaCloud,
           nova: NovaEmulator | None, k8s: K8sEmulator, kubeconfig: Path,
           **extra: Any) -> Iterator[World]:
    clock = FixedClock()
    config = make_config(tmp_path, **extra)
    store = make_store(clock)
    cluster = KubernetesCluster(str(kubeconfig), "scoctl-sim")
    try:
        yield World(config, store, clock, cloud, k8s, cluster, nova)
    finally:
        for server in cloud.servers():
            cloud.delete(server.id)
        cluster.close()


@pytest.fixture
def emulator_cloud(nova_emulator: NovaEmulator, tmp_path: Path,
                   monkeypatch: pytest.MonkeyPatch) -> Iterator[NovaCloud]:
    project = "p" + uuid.uuid4().hex[:12]
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(
        write_clouds_yaml(tmp_path, REGION, nova_emulator.url, project)))
    cloud = NovaCloud.connect(REGION, retry=RetryPolicy(sleep=lambda _: None))
    yield cloud
    cloud.connection.close()


@pytest.fixture
def world(tmp_path: Path, make_store: Callable[[Clock], Store], emulator_cloud: NovaCloud,
          nova_emulator: NovaEmulator, k8s_emulator: K8sEmulator,
          k8s_kubeconfig: Path) -> Iterator[World]:
    yield from _world(tmp_path, make_store, emulator_cloud, nova_emulator, k8s_emulator,
                      k8s_kubeconfig)


# -- lifecycle ---------------------------------------------------------------------------------

def test_servers_turn_ready_when_their_nodes_register_and_a_second_reconcile_changes_nothing(
    world: World,
) -> None:
    servers = world.launch(2)
    world.plan({"tiny.spot": 2})
    world.settle()
    world.reconcile()
    assert {world.status(s.id) for s in servers} == {"active"}
    world.register(servers[0])
    world.register(servers[1], taint=False)  # reclaimable but registered without the taint
    world.reconcile()
    assert [world.status(s.id) for s in servers] == ["ready", "active"]
    assert world.tokens().count("INSTANCE_READY") == 1

    events, calls = len(world.store.events()), len(world.nova.calls())  # type: ignore[union-attr]
    again = world.reconcile()
    assert not again.changed and not again.errors
    assert len(world.store.events()) == events
    mutating = [c for c in world.nova.calls()[calls:]  # type: ignore[union-attr]
                if c[0] in ("POST", "DELETE", "PUT")]
    assert mutating == []


def test_registration_timeout_deletes_the_server_and_replans(world: World) -> None:
    [server] = world.launch(1)
    world.settle()
    world.reconcile()
    world.clock.advance(901)
    world.reconcile()
    assert world.status(server.id) in ("deleting", "deleted")
    assert "REGISTRATION_TIMEOUT" in world.tokens()
    assert "web" in world.store.dirty()
    assert world.cloud.server(server.id) is None or \
        world.cloud.server(server.id).status == "DELETED"  # type: ignore[union-attr]


def test_capacity_fault_excludes_the_pool_deletes_and_replans(nova_cloud: NovaBackend,
                                                              tmp_path: Path,
                                                              k8s_emulator: K8sEmulator,
                                                              k8s_kubeconfig: Path,
                                                              make_store: Callable[[Clock], Store],
                                                              ) -> None:
    gen = _world(tmp_path, make_store, nova_cloud.cloud, nova_cloud.emulator, k8s_emulator,
                 k8s_kubeconfig)
    world = next(gen)
    try:
        [server] = world.launch(1, pool="big.spot", flavor=nova_cloud.too_big_flavor)
        nova_cloud.wait_for(lambda: nova_cloud.cloud.server(server.id),
                            lambda s: s is not None and s.status == "ERROR")
        result = world.reconcile()
        assert not result.errors
        inst = world.store.instance(server.id)
        assert inst is not None and inst.status in ("deleting", "deleted")
        assert "No valid host" in (inst.fault or "")  # read by id: list views omit it
        assert [e.pool for e in world.store.exclusions()] == ["big.spot"]
        assert "POOL_EXCLUDED" in world.tokens()
        assert "big.spot" in world.store.dirty()["web"]
        nova_cloud.wait_for(lambda: nova_cloud.cloud.server(server.id),
                            lambda s: s is None or s.status == "DELETED")
    finally:
        gen.close()


def test_quota_fault_deletes_without_excluding(world: World) -> None:
    assert world.nova is not None
    world.nova.fail_quota_recheck(1)
    [server] = world.launch(1)
    world.settle()
    world.reconcile()
    assert world.store.exclusions() == []
    assert "QUOTA_EXCEEDED" in world.tokens()
    assert world.status(server.id) in ("deleting", "deleted")


# -- intents, reclaims, orphans ----------------------------------------------------------------

def test_servers_of_a_crashed_launch_intent_are_adopted_and_not_launched_again(
    world: World,
) -> None:
    world.store.add_launch(LaunchRecord(
        launch_id="l-00000000abcd", region=REGION, workload="web", pool="tiny.spot",
        generation=1, count=2, status="intent", created=world.store.now(),
        updated=world.store.now()))
    servers = world.launch(2, launch_id="l-00000000abcd", record=False)
    world.settle()
    world.reconcile()
    assert sorted(i.id for i in world.store.instances()) == sorted(s.id for s in servers)
    assert [launch.status for launch in world.store.launches()] == ["recorded"]
    assert world.tokens().count("LAUNCH_ADOPTED") == 1
    assert held_units(world.store) == {"web": {"tiny.spot": 2}}


def test_an_intent_without_servers_fails_after_the_launch_timeout(world: World) -> None:
    world.store.add_launch(LaunchRecord(
        launch_id="l-0000000000ff", region=REGION, workload="web", pool="tiny.spot",
        generation=1, count=3, status="intent", created=world.store.now(),
        updated=world.store.now()))
    world.reconcile()
    assert held_units(world.store) == {"web": {"tiny.spot": 3}}
    world.clock.advance(301)
    world.reconcile()
    assert [launch.status for launch in world.store.launches()] == ["failed"]
    assert held_units(world.store) == {}


def test_a_reclaim_is_noticed_and_replanned(world: World) -> None:
    assert world.nova is not None
    gone, broken = world.launch(2)
    world.settle()
    world.register(gone)
    world.register(broken)
    world.reconcile()
    world.nova.reclaim(gone.id, "delete")
    world.nova.reclaim(broken.id, "error")
    world.reconcile()
    assert world.status(gone.id) == "deleted"
    assert world.status(broken.id) in ("deleting", "deleted")
    assert world.tokens().count("INSTANCE_RECLAIMED") == 2
    assert world.store.exclusions() == []  # a reclaim is not a capacity fault
    assert world.store.dirty() == {"web": "units lost to a reclaim"}
    assert held_units(world.store) == {}


def test_orphans_are_reported_and_foreign_servers_never_touched(world: World) -> None:
    [orphan] = world.launch(1, workload="ghost", record=False)
    [foreign] = world.launch(1, record=False, tags=("team:db",))
    world.settle()
    first = world.reconcile()
    assert [o.server_id for o in first.regions[0].decision.orphans] == [orphan.id]
    assert "ORPHAN_FOUND" in world.tokens()
    world.clock.advance(4000)
    world.reconcile()  # gc_orphans is off: still there
    assert world.cloud.server(orphan.id).status == "ACTIVE"  # type: ignore[union-attr]
    assert world.cloud.server(foreign.id).status == "ACTIVE"  # type: ignore[union-attr]
    assert world.store.instances() == []


def test_a_server_of_a_known_workload_without_an_intent_is_an_orphan_never_deleted(
    world: World,
) -> None:
    # `web` is a configured workload, but scoctl recorded no launch for this server
    [stray] = world.launch(1, workload="web", record=False)
    world.settle()
    first = world.reconcile()
    assert [(o.server_id, o.workload) for o in first.regions[0].decision.orphans] == [
        (stray.id, "web")]
    assert world.tokens() == ["ORPHAN_FOUND"]
    # past the registration timeout (15m) and the orphan grace (30m), gc_orphans off
    world.clock.advance(4000)
    second = world.reconcile()
    assert second.regions[0].deleted == ()
    assert world.cloud.server(stray.id).status == "ACTIVE"  # type: ignore[union-attr]
    assert world.store.instances(include_deleted=True) == []
    assert world.tokens() == ["ORPHAN_FOUND"]


def test_orphans_are_deleted_after_the_grace_period_with_gc_orphans(
    tmp_path: Path, emulator_cloud: NovaCloud, nova_emulator: NovaEmulator,
    k8s_emulator: K8sEmulator, k8s_kubeconfig: Path, make_store: Callable[[Clock], Store],
) -> None:
    gen = _world(tmp_path, make_store, emulator_cloud, nova_emulator, k8s_emulator, k8s_kubeconfig,
                 gc_orphans="true")
    world = next(gen)
    try:
        [orphan] = world.launch(1, workload="ghost", record=False)
        [foreign] = world.launch(1, record=False, tags=("team:db",))
        world.settle()
        world.reconcile()
        assert world.cloud.server(orphan.id).status == "ACTIVE"  # type: ignore[union-attr]
        world.clock.advance(1801)
        world.reconcile()
        after = world.cloud.server(orphan.id)
        assert after is None or after.status == "DELETED"
        assert world.cloud.server(foreign.id).status == "ACTIVE"  # type: ignore[union-attr]
    finally:
        gen.close()


# -- scale-down --------------------------------------------------------------------------------

def test_idle_surplus_nodes_are_cordoned_drained_and_deleted_under_the_disruption_budget(
    world: World,
) -> None:
    servers = world.launch(4)
    world.settle()
    for server in servers:
        world.register(server)
    world.plan({"tiny.spot": 4})
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet",
          "metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-1"}}
    for server in servers:  # DaemonSet pods never keep a node busy
        world.k8s.add(make_pod(f"agent-{server.name}", "kube-system", node_name=server.name,
                               phase="Running", owner=ds))
    world.k8s.add(make_pod("busy", node_name=servers[0].name, phase="Running"))
    world.reconcile()
    assert all(world.status(s.id) == "ready" for s in servers)
    world.plan({"tiny.spot": 1})  # the claim shrank: three units are surplus
    world.clock.advance(599)
    assert world.reconcile().regions[0].scaled_down == ()
    world.clock.advance(2)
    result = world.reconcile()
    # 10% of 4 units, rounded up: one per run, the oldest idle first, never the busy node
    [name] = result.regions[0].scaled_down
    assert name != servers[0].name
    gone = next(s for s in servers if s.name == name)
    assert world.status(gone.id) in ("deleting", "deleted")
    assert name not in {n["metadata"]["name"] for n in world.k8s.objects("Node")}
    world.reconcile()
    world.reconcile()
    left = [s for s in servers if world.status(s.id) == "ready"]
    assert [s.name for s in left] == [servers[0].name]
    assert world.tokens().count("INSTANCE_SCALE_DOWN") == 3


def test_a_node_named_unlike_its_server_is_matched_by_identity_and_scaled_down_by_its_name(
    world: World,
) -> None:
    servers = world.launch(2)
    world.settle()
    for server in servers:  # a real cloud's Nodes: <server>.novalocal
        world.register(server, name=f"{server.name}.novalocal")
    world.k8s.add(make_pod("busy", node_name=f"{servers[0].name}.novalocal", phase="Running"))
    world.reconcile()
    assert [world.status(s.id) for s in servers] == ["ready", "ready"]
    world.clock.advance(700)  # the plan holds no unit: both are surplus, one is busy
    result = world.reconcile()
    assert result.errors == ()
    assert result.regions[0].scaled_down == (servers[1].name,)
    assert world.status(servers[1].id) in ("deleting", "deleted")
    nodes = {n["metadata"]["name"] for n in world.k8s.objects("Node")}
    assert nodes == {f"{servers[0].name}.novalocal"}  # drained and deleted by its own name
    assert world.status(servers[0].id) == "ready"  # its Node holds a pod: not idle


class PodLandsOnCordon(KubernetesCluster):
    """The real adapter, plus a scheduler that binds a pod the moment a node is cordoned (the
    race the re-check after cordon exists for)."""

    def __init__(self, kubeconfig: Path, k8s: K8sEmulator) -> None:
        super().__init__(str(kubeconfig), "scoctl-sim")
        self.k8s = k8s

    def cordon(self, node: str) -> None:
        self.k8s.add(make_pod("late", node_name=node, phase="Running"))
        super().cordon(node)


def test_a_scale_down_is_called_off_when_a_pod_lands_as_the_node_is_cordoned(
    world: World, k8s_kubeconfig: Path,
) -> None:
    [server] = world.launch(1)
    world.settle()
    world.register(server)
    world.reconcile()  # ready, idle since now; the plan holds no unit: surplus
    world.clock.advance(700)
    world.cluster.close()
    world.cluster = PodLandsOnCordon(k8s_kubeconfig, world.k8s)
    result = world.reconcile()
    assert result.regions[0].kept == (server.name,)
    assert world.status(server.id) == "ready"
    assert not world.k8s.get("Node", None, server.name)["spec"].get("unschedulable")
    assert world.cloud.server(server.id).status == "ACTIVE"  # type: ignore[union-attr]
    assert "SCALE_DOWN_CANCELLED" in world.tokens()


# -- teardown and dry-run ----------------------------------------------------------------------

def test_failed_deployment_is_torn_down_once_and_unmanaged_objects_stay(world: World) -> None:
    world.k8s.add(make_deployment("web", managed=True))
    world.k8s.add(make_deployment("other", managed=False, labels={"sco/workload": "web"}))
    row = world.store.ensure_workload("web", kind="deployment", source="k8s", contract="T1")
    world.store.set_status(row.id, "failed")
    result = world.reconcile()
    assert result.torn_down == ("web",)
    assert [d["metadata"]["name"] for d in world.k8s.objects("Deployment")] == ["other"]
    again = world.reconcile()
    assert again.torn_down == () and not again.changed
    assert world.reconcile(teardown=False).torn_down == ()


def test_dry_run_decides_but_changes_nothing(world: World) -> None:
    assert world.nova is not None
    world.nova.fail_quota_recheck(1)
    [server] = world.launch(1)
    world.settle()
    before = len(world.nova.calls())
    result = world.reconcile(dry_run=True)
    assert [d.server_id for d in result.regions[0].decision.deletions] == [server.id]
    assert world.status(server.id) == "requested"
    assert not [c for c in world.nova.calls()[before:] if c[0] == "DELETE"]
    assert world.store.events() == []


def test_nova_down_reports_the_region_and_still_tears_down(world: World) -> None:
    assert world.nova is not None
    world.k8s.add(make_deployment("web", managed=True))
    row = world.store.ensure_workload("web", kind="deployment", source="k8s", contract="T1")
    world.store.set_status(row.id, "failed")
    world.nova.inject(500, count=4, methods=["GET"])  # every attempt of the retry policy
    result = world.reconcile()
    assert result.errors and "Nova" in result.errors[0]
    assert result.torn_down == ("web",)


def test_a_kubernetes_failure_in_a_scale_down_is_a_kubernetes_problem_not_novas(
        world: World) -> None:
    """The Node's cordon fails (the API server answers 500): the problem names Kubernetes as
    the API that failed, so the controller counts a Kubernetes outage, whatever its words."""
    servers = world.launch(1)
    world.settle()
    world.register(servers[0])
    world.reconcile()
    assert world.status(servers[0].id) == "ready"
    world.clock.advance(700)  # the plan holds no unit: surplus, idle past the timeout
    world.k8s.fail_next(10, 500, path_contains=f"/nodes/{servers[0].name}", method="PATCH")
    result = world.reconcile()
    world.k8s.clear_faults()
    [problem] = result.problems
    assert (problem.api, problem.region) == ("kubernetes", REGION)
    assert problem.what == f"scale-down of {servers[0].name}"
    assert "Nova" not in str(problem)
