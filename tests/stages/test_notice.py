"""The notice stage inside `scoctl run` (design: Notices): the real openstacksdk against the Nova
emulator, the official Kubernetes client against the Kubernetes emulator, a real state file
and an injected clock, so that deadlines pass without sleeping.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.adapters.nova import NovaCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import InstanceRecord, LaunchRequest
from scoctl.core.model.vocabulary import META_RECLAIM_AT, TAG_MANAGED
from scoctl.core.timefmt import parse_rfc3339
from scoctl.runner.compose import PassReport
from scoctl.sim.k8s_emulator import K8sEmulator, make_node, make_pod
from scoctl.sim.nova_emulator import IMAGE_ID, NETWORK_ID, NovaEmulator
from scoctl.stages.notice import announce, run_notices
from scoctl.state import Store, open_store
from tests.builders import BOOTSTRAP, Systems, one_pass
from tests.stages.test_reconcile import REGION, emulator_cloud  # noqa: F401

PODS = 4
# Production Nodes are named after the host, not the server: the flow must match by identity
NODE_SUFFIX = ".novalocal"
TOLERATE = [{"key": "reclaimable", "operator": "Equal", "value": "true",
             "effect": "NoSchedule"}]


def make_config(tmp: Path) -> Config:
    text = f"""
state: {tmp}/state.db
budget_dir: {tmp}/budget
spool: {tmp}/spool
regions:
  - name: {REGION}
    cloud: {REGION}
    mutating_calls_per_second: 1000
    launch: {{image: {IMAGE_ID}, networks: [{NETWORK_ID}]}}
flavors:
  - {{name: m1.small, vcpus: 1, ram: 2Gi}}
pools:
  - {{name: small.a, region: {REGION}, az: nova, flavor: m1.small, group: g1,
     tier: reclaimable, depth: 20}}
  - {{name: small.b, region: {REGION}, az: nova, flavor: m1.small, group: g2,
     tier: reclaimable, depth: 20}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{small.a: 0.9, small.b: 0.5}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
timeouts: {{drain_margin: 15s, negative_cache: 3m}}
{BOOTSTRAP}"""
    (tmp / "config.yaml").write_text(text, encoding="utf-8")
    return parse_config(load_located(text, str(tmp / "config.yaml")), path=tmp / "config.yaml")


@dataclass
class World:
    config: Config
    store: Store
    clock: FixedClock
    cloud: NovaCloud
    nova: NovaEmulator
    k8s: K8sEmulator
    systems: Systems

    def run(self) -> PassReport:
        result = one_pass(self.config, self.store, self.clock, self.systems, acquire_watch=0)
        assert result.exit_code == 0, result.as_dict()
        return result

    def register(self) -> None:
        """The node agent's part: every ACTIVE server gets a Ready node, labelled and tainted."""
        self.nova.settle()
        names = {n["metadata"]["name"] for n in self.k8s.objects("Node")}
        for server in self.cloud.servers(tags=["sco:managed"]):
            inst, name = self.store.instance(server.id), f"{server.name}{NODE_SUFFIX}"
            if inst is None or name in names or server.status != "ACTIVE":
                continue
            self.k8s.add(make_node(name,
                                   provider_id=f"openstack:///{server.id}",
                                   labels={"sco/managed": "true", "sco/workload": "web",
                                           "sco/pool": inst.pool or ""},
                                   taints=[{"key": "reclaimable", "value": "true",
                                            "effect": "NoSchedule"}]))

    def bind_all(self, node: str) -> None:
        for pod in self.k8s.objects("Pod"):
            if not pod["spec"].get("nodeName"):
                self.k8s.bind_pod("shop", pod["metadata"]["name"], node)

    def instances(self, pool: str | None = None) -> list[InstanceRecord]:
        return [i for i in self.store.instances() if pool is None or i.pool == pool]

    def tokens(self) -> list[str]:
        return [e.token for e in self.store.events()]

    def detail(self, token: str) -> dict[str, Any]:
        return dict(next(e for e in self.store.events() if e.token == token).detail)

    def notice(self, server_id: str, seconds: float) -> str:
        deadline = rfc3339(self.clock.now() + timedelta(seconds=seconds))
        self.cloud.connection.compute.set_server_metadata(server_id, **{META_RECLAIM_AT: deadline})
        return deadline


@pytest.fixture
def world(tmp_path: Path, emulator_cloud: NovaCloud,  # noqa: F811
          nova_emulator: NovaEmulator, k8s_emulator: K8sEmulator,
          k8s_kubeconfig: Path) -> Iterator[World]:
    clock = FixedClock()
    store = open_store(tmp_path / "state.db", clock=clock, create=True)
    cluster = KubernetesCluster(str(k8s_kubeconfig), "scoctl-sim")
    for i in range(PODS):
        k8s_emulator.add(make_pod(f"web-{i}", "shop", cpu="200m", memory="128Mi",
                                  labels={"sco/workload": "web"}, tolerations=TOLERATE,
                                  unschedulable="0/0 nodes are available"))
    systems = Systems(cluster=cluster, clouds={REGION: emulator_cloud}, sources=("k8s",))
    try:
        yield World(make_config(tmp_path), store, clock, emulator_cloud, nova_emulator,
                    k8s_emulator, systems)
    finally:
        for server in emulator_cloud.servers():
            emulator_cloud.delete(server.id)
        cluster.close()
        store.close()


def node_name(inst: InstanceRecord) -> str:
    """The name the node agent registers the instance's Node under (not the server's name)."""
    return f"{inst.name}{NODE_SUFFIX}"


def serving(world: World) -> InstanceRecord:
    """One ready unit of `web` in small.a, holding every pod."""
    world.run()
    world.register()
    world.run()
    [inst] = world.instances("small.a")
    assert inst.status == "ready"
    world.bind_all(node_name(inst))
    return inst


def test_a_notice_replans_launches_elsewhere_in_the_same_pass_then_drains_and_deletes(
        world: World) -> None:
    world.k8s.grace_scale = 0.05  # an evicted pod's 30 s take 1.5 s: seen Terminating below
    inst = serving(world)
    deadline = world.notice(inst.id, 60)
    world.run()
    noticed = world.store.instance(inst.id)
    assert noticed is not None and noticed.status == "noticed"
    detail = world.detail("RECLAIM_NOTICED")
    assert (detail["server"], detail["deadline"], detail["lead_seconds"]) == (inst.id, deadline,
                                                                               60)
    assert {e.pool for e in world.store.exclusions()} == {"small.a"}
    # the same pass re-planned without the noticed unit and launched the replacement elsewhere
    assert world.store.plans()["web"].pools[0].pool == "small.b"
    [replacement] = world.instances("small.b")
    assert replacement.status in ("requested", "building", "active")
    node = world.k8s.get("Node", None, node_name(inst))
    assert node["spec"]["unschedulable"] is True
    assert len([p for p in world.k8s.objects("Pod") if p["spec"].get("nodeName")]) == PODS

    world.clock.advance(5)
    world.run()  # the replacement boots: the pods stay where they run
    assert not [r for r in world.k8s.requests if "eviction" in r]
    world.register()
    world.clock.advance(10)
    world.run()  # reconcile sees the replacement's node Ready, the notice stage then evicts
    ready = world.detail("REPLACEMENT_READY")
    assert ready["replacement"] == replacement.id and ready["before_deadline"] is True
    evictions = [r for r in world.k8s.requests if r.endswith("/eviction")]
    assert len(evictions) == PODS
    assert len(terminating(world, node_name(inst))) == PODS  # evicted, not gone yet
    terminated(world)  # their (scaled) grace periods end
    world.clock.advance(5)
    world.run()  # empty now: deleted 40 s before the deadline
    gone = world.store.instance(inst.id)
    assert gone is not None and gone.status in ("deleting", "deleted")
    reclaimed = world.detail("INSTANCE_RECLAIMED")
    assert reclaimed["noticed"] is True and reclaimed["why"] == "empty"
    assert reclaimed["evicted"] == PODS and reclaimed["pods_deleted"] == 0
    assert reclaimed["before_deadline_seconds"] == 40 and reclaimed["lead_seconds"] == 60
    [row] = world.store.noticed(every=True)
    assert row.outcome == "reclaimed" and row.replacement_ready_at is not None
    world.nova.settle()
    assert world.cloud.server(inst.id) is None


def drain_ready(world: World) -> InstanceRecord:
    """A noticed unit whose replacement's node has just registered: the next pass evicts."""
    inst = serving(world)
    world.notice(inst.id, 40)
    world.run()
    world.register()
    world.clock.advance(1)
    return inst


def on_node(world: World, name: str) -> list[str]:
    return [p["metadata"]["name"] for p in world.k8s.objects("Pod")
            if p["spec"].get("nodeName") == name]


def terminating(world: World, name: str) -> list[str]:
    return [p["metadata"]["name"] for p in world.k8s.objects("Pod")
            if p["spec"].get("nodeName") == name and p["metadata"].get("deletionTimestamp")]


def terminated(world: World) -> None:
    """Wait, in the emulator's real time, until every pod being deleted is gone (its grace
    period, scaled down by the fixture, is over)."""
    deadline = time.monotonic() + 10
    while any(p["metadata"].get("deletionTimestamp") for p in world.k8s.objects("Pod")):
        assert time.monotonic() < deadline, "pods still Terminating after 10 s"
        time.sleep(0.05)


def test_a_refused_eviction_is_retried_within_the_pass(world: World) -> None:
    drain_ready(world)
    world.k8s.fail_next(PODS, 429, path_contains="/eviction")  # the budget says "not yet"
    notice = world.run().step("notice")
    assert notice is not None and notice.result.regions[0].evicted == PODS
    assert world.clock.slept == [0.5]  # one retry round, half a second later


def test_evictions_refused_for_good_give_way_to_deletions_at_deadline_minus_margin(
        world: World) -> None:
    inst = drain_ready(world)
    world.k8s.grace_scale = 0.2  # a deletion's 7 s take 1.4 s: seen Terminating below
    world.k8s.fail_next(10_000, 429, path_contains="/eviction")
    notice = world.run().step("notice")
    assert notice is not None and notice.result.regions[0].refused == PODS
    assert world.clock.slept == [0.5] * 6 and len(on_node(world, node_name(inst))) == PODS
    world.clock.advance(24)  # deadline − 15 s: evictions give way to deletions
    world.run()
    assert "DRAIN_FORCED" in world.tokens()
    # deleted within half the margin, each Terminating for that long
    assert sorted(terminating(world, node_name(inst))) == sorted(on_node(world, node_name(inst)))
    assert {p["metadata"]["deletionGracePeriodSeconds"] for p in world.k8s.objects("Pod")
            if p["spec"].get("nodeName") == node_name(inst)} == {7}
    terminated(world)
    assert on_node(world, node_name(inst)) == []
    world.k8s.clear_faults()
    world.clock.advance(1)
    world.run()
    reclaimed = world.detail("INSTANCE_RECLAIMED")
    assert reclaimed["why"] == "empty" and reclaimed["pods_deleted"] == PODS


def test_a_withdrawn_notice_uncordons_and_puts_the_unit_back(world: World) -> None:
    inst = serving(world)
    world.notice(inst.id, 60)
    world.run()
    world.cloud.connection.compute.delete_server_metadata(inst.id, [META_RECLAIM_AT])
    world.clock.advance(2)
    world.run()
    back = world.store.instance(inst.id)
    assert back is not None and back.status == "ready"
    assert "RECLAIM_WITHDRAWN" in world.tokens()
    assert world.k8s.get("Node", None, node_name(inst))["spec"]["unschedulable"] is False


def test_a_spooled_notice_withdrawn_with_notice_withdraw_uncordons_and_keeps_the_server(
        world: World) -> None:
    inst = serving(world)
    announce(world.config, world.config.state, world.clock, server=inst.id, pool=None,
             at="+60s", reason="lease ends")
    world.run()
    held = world.store.instance(inst.id)
    assert held is not None and held.status == "noticed"
    assert world.k8s.get("Node", None, node_name(inst))["spec"]["unschedulable"] is True
    taken_back = announce(world.config, world.config.state, world.clock, server=inst.id,
                          pool=None, at="", reason="lease extended", withdraw=True)
    assert taken_back.withdraw and taken_back.deadline == ""
    world.clock.advance(2)
    world.run()
    assert world.store.notices() == []
    back = world.store.instance(inst.id)
    assert back is not None and back.status == "ready"
    assert world.detail("RECLAIM_WITHDRAWN")["server"] == inst.id
    assert world.k8s.get("Node", None, node_name(inst))["spec"]["unschedulable"] is False
    world.clock.advance(60)  # past the old deadline: nothing reclaims it
    world.run()
    assert world.cloud.server(inst.id) is not None
    assert "INSTANCE_RECLAIMED" not in world.tokens()


def test_the_deadline_deletes_a_server_whatever_still_runs_there(world: World) -> None:
    inst = serving(world)
    world.notice(inst.id, 40)
    world.run()
    world.k8s.fail_next(1000, 429, path_contains="/eviction")
    world.k8s.fail_next(1000, 500, path_contains="/pods/web-", method="DELETE")
    world.clock.advance(41)
    result = one_pass(world.config, world.store, world.clock, world.systems, acquire_watch=0)
    assert result.failed == ("notice",)  # the pod deletes failed, and say so
    world.k8s.clear_faults()
    reclaimed = world.detail("INSTANCE_RECLAIMED")
    assert reclaimed["why"] == "deadline" and reclaimed["left"] == PODS
    world.nova.settle()
    assert world.cloud.server(inst.id) is None  # deleted in Nova, pods or no pods


def test_a_pool_notice_through_the_spool_covers_every_server_of_the_pool(
        world: World) -> None:
    inst = serving(world)
    spooled = announce(world.config, world.config.state, world.clock, server=None,
                       pool="small.a", at="+30s", reason="lease ends")
    assert spooled.kind == "pool"
    result = world.run()
    assert [s.name for s in result.steps] == ["watch", "plan", "acquire", "reconcile",
                                               "notice", "plan", "acquire", "kube-events"]
    assert world.instances("small.b")  # replaced in the same pass
    noticed = world.store.instance(inst.id)
    assert noticed is not None and noticed.status == "noticed"
    assert world.detail("RECLAIM_NOTICED")["source"] == "pool"
    assert world.store.notices()[0].target == "small.a"


def test_a_notice_on_a_server_without_scoctls_tags_touches_nothing(world: World) -> None:
    inst = serving(world)  # a managed unit the flow does act on, in the same pass
    foreign = world.cloud.launch(LaunchRequest(name="not-ours", flavor="m1.small",
                                               image=IMAGE_ID, networks=(NETWORK_ID,)))
    world.nova.settle()
    [server] = foreign.servers
    assert TAG_MANAGED not in (world.cloud.server(server.id) or server).tags
    due = rfc3339(world.clock.now())  # due now: a managed server would be deleted at once
    world.cloud.connection.compute.set_server_metadata(server.id, **{META_RECLAIM_AT: due})
    world.notice(inst.id, 0)
    calls = len(world.nova.calls())
    result = run_notices(world.config, world.store, world.clock,
                         clouds={REGION: world.cloud}, cluster=world.systems.cluster)
    assert result.changed and not result.errors  # the managed unit's notice took effect
    assert world.detail("RECLAIM_NOTICED")["server"] == inst.id
    assert world.store.instance(inst.id).status != "ready"  # type: ignore[union-attr]
    assert not [e for e in world.store.events() if server.id in str(dict(e.detail))]
    assert server.id not in {r.server_id for r in world.store.noticed(every=True)}
    made = world.nova.calls()[calls:]
    assert [c for c in made if c[0] == "DELETE" and inst.id in c[1]]  # the due managed one
    assert [c for c in made if c[0] in ("POST", "PUT", "DELETE") and server.id in c[1]] == []
    world.nova.settle()
    kept = world.cloud.server(server.id)
    assert kept is not None and kept.status == "ACTIVE"
    assert kept.metadata.get(META_RECLAIM_AT) == due


def test_a_runner_that_does_not_lead_the_region_leaves_the_notice_to_its_leader(
        world: World) -> None:
    """design: Runners: only the leader of a region cordons, drains and deletes for it; a standby's
    notice stage still records what the spool brought but touches neither Nova nor the node."""
    inst = serving(world)
    world.notice(inst.id, 0)  # due now: a leader would delete at once
    calls, k8s_requests = len(world.nova.calls()), len(world.k8s.requests)
    result = run_notices(world.config, world.store, world.clock, clouds={REGION: world.cloud},
                         cluster=world.systems.cluster, leads=lambda region: False)
    assert result.regions == () and not result.errors and not result.replan
    mutating = [c for c in world.nova.calls()[calls:] if c[0] in ("POST", "PUT", "DELETE")]
    assert mutating == [] and list(world.k8s.requests)[k8s_requests:] == []
    assert world.store.noticed(every=True) == []
    assert world.store.instance(inst.id).status == "ready"  # type: ignore[union-attr]
    led = run_notices(world.config, world.store, world.clock, clouds={REGION: world.cloud},
                      cluster=world.systems.cluster, leads=lambda region: region == REGION)
    assert [r.region for r in led.regions] == [REGION]
    assert world.store.instance(inst.id).status != "ready"  # type: ignore[union-attr]


def test_a_far_future_reclaim_time_is_ignored_with_one_warning_however_many_passes(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    inst = serving(world)
    world.cloud.connection.compute.set_server_metadata(
        inst.id, **{META_RECLAIM_AT: "9999-12-31T23:59:59Z"})
    with caplog.at_level(logging.WARNING):
        for _ in range(3):  # each a pass as a timer runs it: the memory is the state's
            world.run()
            world.clock.advance(30)
    back = world.store.instance(inst.id)
    assert back is not None and back.status == "ready"
    assert world.tokens().count("NOTICE_IGNORED") == 1
    assert world.detail("NOTICE_IGNORED")["server"] == inst.id
    assert "RECLAIM_NOTICED" not in world.tokens()
    assert len([r for r in caplog.records if "notice horizon" in r.getMessage()]) == 1


def test_a_handled_spooled_notice_is_never_reported_as_ignored(world: World) -> None:
    """Issue 28 item 14: a server notice scoctl carried out (deleted at the deadline) came back
    as ``NOTICE_IGNORED`` "not a server scoctl manages" on the passes after."""
    inst = serving(world)
    announce(world.config, world.config.state, world.clock, server=inst.id, pool=None,
             at="+30s", reason="lease ends")
    world.run()
    world.clock.advance(31)
    world.run()
    assert world.detail("INSTANCE_RECLAIMED")["server"] == inst.id
    for _ in range(3):
        world.nova.settle()
        world.clock.advance(20)
        world.run()
    assert "NOTICE_IGNORED" not in world.tokens()


def test_a_notice_on_one_unit_keeps_the_healthy_units_of_its_pool(world: World) -> None:
    # issue 28 item 9: a notice on 1 of 4 units of a pool dropped the 3 others from the plan
    # ("current units dropped: excluded"); the pool is excluded for new units only
    for i in range(3):  # one whole m1.small each: web needs 4 units
        world.k8s.add(make_pod(f"big-{i}", "shop", cpu="1", memory="900Mi",
                               labels={"sco/workload": "web"}, tolerations=TOLERATE,
                               unschedulable="0/0 nodes are available"))
    world.run()
    world.register()
    world.run()
    units = world.instances("small.a")
    assert len(units) == 4 and {i.status for i in units} == {"ready"}
    noticed = units[0]
    world.notice(noticed.id, 60)
    world.run()
    assert {e.pool for e in world.store.exclusions()} == {"small.a"}
    plan = {p.pool: p.units for p in world.store.plans()["web"].pools}
    assert plan == {"small.a": 3, "small.b": 1}  # one replacement, elsewhere
    world.register()
    world.clock.advance(10)
    world.run()
    world.run()
    healthy = {i.id: i.status for i in world.instances("small.a") if i.id != noticed.id}
    assert healthy == {i.id: "ready" for i in units[1:]}  # none scaled down
    assert len(world.instances("small.b")) == 1


def test_a_spooled_notice_is_timed_from_when_it_was_given_not_when_a_pass_saw_it(
        world: World) -> None:
    """Issue 28 item 11: the lead and the replacement's time start at the notice's own time
    (``scoctl notice``'s spool file), so a pass that comes late (a stalled or restarted
    controller) does not shorten them."""
    inst = serving(world)
    given = world.clock.now()
    announce(world.config, world.config.state, world.clock, server=inst.id, pool=None,
             at="+90s", reason="lease ends")
    world.clock.advance(25)  # no pass for 25 s
    world.run()
    detail = world.detail("RECLAIM_NOTICED")
    assert detail["lead_seconds"] == 90  # not 65
    [row] = world.store.noticed()
    assert abs((parse_rfc3339(row.noticed_at) - given).total_seconds()) < 1
