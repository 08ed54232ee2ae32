"""The reconciler's pure decision: each rule of design: Reconciler as a sentence, plus
properties."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scoctl.clock import rfc3339
from scoctl.core.model import InstanceRecord, LaunchRecord, NodeInfo, ServerInfo, SlurmNode, Taint
from scoctl.core.model.disruption import Budget, DisruptionSettings, Units
from scoctl.core.reconcile import Decision, NodeAddress, Policy, Snapshot, decide

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
# the config's defaults (timeouts: launch 5m, launch_settle 30s, registration 15m, idle 10m,
# negative_cache 3m, orphan_grace 30m; gc_orphans off; disruption budgets [{units: "10%"}])
POLICY = Policy(launch_timeout=300.0, launch_settle=30.0, registration_timeout=900.0,
                idle_timeout=600.0,
                negative_cache=180.0, orphan_grace=1800.0, gc_orphans=False,
                budgets=DisruptionSettings().budgets, workload_budgets={})
REGION = "region-a"
TIERS = {"p-spot": "reclaimable", "p-res": "committed", "p-spot2": "reclaimable"}


def ago(seconds: float) -> str:
    return rfc3339(NOW - timedelta(seconds=seconds))


def make_server(sid: str, *, status: str = "ACTIVE", workload: str | None = "web",
                pool: str = "p-spot", launch: str = "l-000000000001", name: str | None = None,
                managed: bool = True, fault_code: int | None = None,
                fault: str | None = None) -> ServerInfo:
    tags = set()
    if managed:
        tags.add("sco:managed")
        if workload:
            tags.add(f"sco:workload={workload}")
        tags |= {f"sco:pool={pool}", "sco:gen=3", f"sco:launch={launch}"}
    return ServerInfo(id=sid, name=name or f"sco-{workload}-{sid}", status=status,
                      tags=frozenset(tags), fault_code=fault_code, fault_message=fault)


def make_instance(sid: str, *, status: str = "ready", workload: str = "web",
                  pool: str = "p-spot", created: float = 120, active: float | None = 60,
                  idle_since: float | None = None, node_name: str | None = None,
                  name: str | None = None, updated: float = 0) -> InstanceRecord:
    return InstanceRecord(
        id=sid, name=name or f"sco-{workload}-{sid}", region=REGION, workload=workload,
        pool=pool, generation=3, launch_id="l-000000000001", status=status,
        created=ago(created), updated=ago(updated),
        active_at=ago(active) if active is not None else None,
        ready_at=ago(800) if status == "ready" else None,
        idle_since=ago(idle_since) if idle_since is not None else None, node_name=node_name)


def make_node(name: str, *, sid: str, ready: bool = True, workload: str = "web",
              pool: str = "p-spot", taint: bool = True, via: str = "provider") -> NodeInfo:
    """The Node of server `sid`, named `name`, telling its server by `via`: ``provider``
    (``openstack:///<sid>``), ``region`` (``openstack://region-a/<sid>``), ``label``
    (``sco/instance=<sid>``) or ``none``."""
    labels = {"sco/managed": "true", "sco/workload": workload, "sco/pool": pool}
    if via == "label":
        labels["sco/instance"] = sid
    provider = {"provider": f"openstack:///{sid}", "region": f"openstack://region-a/{sid}"}
    return NodeInfo(name=name, ready=ready, labels=labels,
                    taints=(Taint("reclaimable", "NoSchedule", "true"),) if taint else (),
                    provider_id=provider.get(via, ""))


def make_launch(launch_id: str, *, created: float = 10, status: str = "intent",
                count: int = 2, node_names: tuple[str, ...] = (),
                updated: float | None = None) -> LaunchRecord:
    return LaunchRecord(launch_id=launch_id, region=REGION, workload="web", pool="p-spot",
                        generation=3, count=count, status=status, created=ago(created),
                        updated=ago(created if updated is None else updated),
                        node_names=node_names)


def snap(**kwargs: Any) -> Snapshot:
    base: dict[str, Any] = {"region": REGION, "k8s_nodes": (),
                            "tiers": TIERS, "targets": {"web": {"p-spot": 10}}}
    base.update(kwargs)
    return Snapshot(**base)


def tokens(decision: Decision) -> list[str]:
    return [e.token for e in decision.events]


def fields(decision: Decision, sid: str) -> dict[str, Any]:
    return dict(next((u.fields for u in decision.updates if u.id == sid), {}))


# -- lifecycle ---------------------------------------------------------------------------------

def test_build_server_moves_requested_instance_to_building() -> None:
    d = decide(snap(servers=(make_server("a", status="BUILD"),),
                    instances=(make_instance("a", status="requested", active=None),)),
               POLICY, NOW)
    assert fields(d, "a") == {"status": "building"}
    assert not d.deletions


def test_active_server_without_node_is_active_then_ready_when_node_is_ready_tainted() -> None:
    inst = make_instance("a", status="building", active=None)
    d = decide(snap(servers=(make_server("a"),), instances=(inst,)), POLICY, NOW)
    assert fields(d, "a") == {"status": "active", "active_at": rfc3339(NOW)}
    d = decide(snap(servers=(make_server("a"),), instances=(inst,),
                    k8s_nodes=(make_node(inst.name, sid="a"),)), POLICY, NOW)
    assert fields(d, "a")["status"] == "ready"
    assert tokens(d) == ["INSTANCE_READY"]


def test_node_matched_by_provider_id_counts() -> None:
    inst = make_instance("a", status="active")
    d = decide(snap(servers=(make_server("a"),), instances=(inst,),
                    k8s_nodes=(make_node("other-name", sid="a"),)), POLICY, NOW)
    assert fields(d, "a")["status"] == "ready"


def test_nodes_are_matched_by_identity_never_by_name() -> None:
    inst = make_instance("a", status="active")
    servers = (make_server("a"),)
    for via in ("provider", "region", "label"):
        node = make_node("10.0.0.7", sid="a", via=via)  # named by IP: matched by identity
        d = decide(snap(servers=servers, instances=(inst,), k8s_nodes=(node,)), POLICY, NOW)
        assert fields(d, "a")["status"] == "ready", via
    named_alike = make_node(inst.name, sid="a", via="none")  # the server's name, no identity
    other = make_node(inst.name, sid="b")  # the server's name, another server's identity
    for node in (named_alike, other):
        d = decide(snap(servers=servers, instances=(inst,), k8s_nodes=(node,)), POLICY, NOW)
        assert "status" not in fields(d, "a")


def test_idle_detection_cordon_and_node_deletion_use_the_matched_nodes_own_name() -> None:
    servers, insts, _ = fleet(2, idle=5000)
    nodes = tuple(make_node(f"{i.name}.novalocal", sid=i.id) for i in insts)
    busy = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, targets={},
                       busy_pods={f"{insts[0].name}.novalocal": 1}), POLICY, NOW)
    assert fields(busy, "s00") == {"idle_since": None}  # its Node holds a pod
    assert [s.node for s in busy.scale_downs] == [f"{insts[1].name}.novalocal"]
    # a server's name on another Node says nothing about this one
    idle = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, targets={},
                       busy_pods={insts[0].name: 1}), POLICY, NOW)
    assert "s00" in {s.instance for s in idle.scale_downs}
    gone = decide(snap(servers=(replace(servers[0], status="ERROR", fault_code=500,
                                        fault_message="reclaimed"),), instances=insts[:1],
                       k8s_nodes=nodes[:1]), POLICY, NOW)
    assert [x.node for x in gone.deletions] == [f"{insts[0].name}.novalocal"]


def test_reclaimable_node_without_the_taint_or_labels_is_not_ready() -> None:
    inst = make_instance("a", status="active")
    for node in (make_node(inst.name, sid="a", taint=False),
                 make_node(inst.name, sid="a", workload="other"),
                 make_node(inst.name, sid="a", ready=False)):
        d = decide(snap(servers=(make_server("a"),), instances=(inst,), k8s_nodes=(node,)),
                   POLICY, NOW)
        assert "status" not in fields(d, "a")


def test_committed_node_needs_no_taint() -> None:
    inst = make_instance("a", status="active", pool="p-res")
    d = decide(snap(servers=(make_server("a", pool="p-res"),), instances=(inst,),
                    k8s_nodes=(make_node(inst.name, sid="a", pool="p-res", taint=False),)),
               POLICY, NOW)
    assert fields(d, "a")["status"] == "ready"


def test_slurm_node_up_makes_instance_ready_and_powered_down_does_not() -> None:
    inst = make_instance("a", status="active", node_name="gpu-1", name="gpu-1")
    up = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle", flags=frozenset({"CLOUD"}))
    booting = replace(up, state="mixed", flags=frozenset({"CLOUD", "POWERING_UP"}))
    d = decide(snap(servers=(make_server("a", name="gpu-1"),), instances=(inst,),
                    slurm_nodes=(up,)), POLICY, NOW)
    assert fields(d, "a")["status"] == "ready"
    d = decide(snap(servers=(make_server("a", name="gpu-1"),), instances=(inst,),
                    slurm_nodes=(booting,)), POLICY, NOW)
    assert "status" not in fields(d, "a")


def test_a_slurm_server_names_its_address_for_its_node_on_each_pass_until_the_node_is_up(
) -> None:
    inst = make_instance("a", status="building", active=None, node_name="gpu-1",
                         name="sco-hpc-a")
    server = replace(make_server("a", name="sco-hpc-a"), address="127.0.0.5")
    booting = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle",
                        flags=frozenset({"CLOUD", "POWERING_UP"}))

    d = decide(snap(servers=(server,), instances=(inst,), slurm_nodes=(booting,)), POLICY, NOW)

    assert d.addresses == (NodeAddress(node="gpu-1", address="127.0.0.5",
                                       hostname="sco-hpc-a"),)
    assert fields(d, "a")["status"] == "active"
    # recorded ACTIVE already (by acquire, or by the last pass whose scontrol failed): the
    # address is given again, and nothing else changes
    active = replace(inst, status="active", active_at=rfc3339(NOW))
    again = decide(snap(servers=(server,), instances=(active,), slurm_nodes=(booting,)),
                   POLICY, NOW)
    assert again.addresses == d.addresses and again.empty
    up = replace(booting, flags=frozenset({"CLOUD"}))
    done = decide(snap(servers=(server,), instances=(active,), slurm_nodes=(up,)), POLICY, NOW)
    assert done.addresses == ()  # registered: nothing more to tell slurmctld
    unread = decide(snap(servers=(server,), instances=(active,), slurm_nodes=None), POLICY, NOW)
    assert unread.addresses == ()  # Slurm was not read: no blind updates


def test_no_address_is_set_without_a_node_name_an_address_or_when_the_node_is_up() -> None:
    server = replace(make_server("a", name="gpu-1"), address="127.0.0.5")
    k8s = make_instance("a", status="building", active=None)
    no_address = make_instance("a", status="building", active=None, node_name="gpu-1")
    up = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle", flags=frozenset({"CLOUD"}))

    assert decide(snap(servers=(server,), instances=(k8s,)), POLICY, NOW).addresses == ()
    assert decide(snap(servers=(replace(server, address=None),), instances=(no_address,),
                       slurm_nodes=(up,)), POLICY, NOW).addresses == ()
    registered = decide(snap(servers=(server,), instances=(no_address,), slurm_nodes=(up,)),
                        POLICY, NOW)
    assert registered.addresses == ()  # slurmd registered already: it gave its own address
    assert fields(registered, "a")["status"] == "ready"


def test_launch_timeout_deletes_a_server_still_building() -> None:
    inst = make_instance("a", status="building", created=301, active=None)
    d = decide(snap(servers=(make_server("a", status="BUILD"),), instances=(inst,)), POLICY, NOW)
    assert [x.reason for x in d.deletions] == ["launch timeout"]
    assert tokens(d) == ["LAUNCH_TIMEOUT"]
    assert d.dirty == {"web": "launch timed out"}


def test_registration_timeout_deletes_an_active_server_whose_node_never_came() -> None:
    inst = make_instance("a", status="active", active=901)
    d = decide(snap(servers=(make_server("a"),), instances=(inst,)), POLICY, NOW)
    assert [x.reason for x in d.deletions] == ["registration timeout"]
    assert tokens(d) == ["REGISTRATION_TIMEOUT"]


def test_no_registration_timeout_when_the_cluster_could_not_be_read() -> None:
    inst = make_instance("a", status="active", active=5000)
    d = decide(snap(servers=(make_server("a"),), instances=(inst,), k8s_nodes=None),
               POLICY, NOW)
    assert d.empty


# -- errors, exclusions, reclaims ------------------------------------------------------------

def test_capacity_fault_excludes_the_pool_and_deletes() -> None:
    inst = make_instance("a", status="building", active=None)
    server = make_server("a", status="ERROR", fault_code=500,
                         fault="No valid host was found. There are not enough hosts available.")
    d = decide(snap(servers=(server,), instances=(inst,)), POLICY, NOW)
    assert [e.pool for e in d.exclusions] == ["p-spot"]
    assert d.exclusions[0].until == rfc3339(NOW + timedelta(seconds=180))
    assert tokens(d) == ["POOL_EXCLUDED"]
    assert set(d.events[0].detail) == {"pool", "launch", "servers", "fault", "region", "until"}
    assert fields(d, "a")["status"] == "error"
    assert "No valid host" in fields(d, "a")["fault"]
    assert [x.server_id for x in d.deletions] == ["a"]
    assert "web" in d.dirty


def test_quota_fault_deletes_without_excluding() -> None:
    inst = make_instance("a", status="building", active=None)
    server = make_server("a", status="ERROR", fault_code=413, fault="Quota exceeded for cores")
    d = decide(snap(servers=(server,), instances=(inst,)), POLICY, NOW)
    assert d.exclusions == ()
    assert tokens(d) == ["QUOTA_EXCEEDED"]
    assert set(d.events[0].detail) == {"pool", "launch", "servers", "fault", "region"}
    assert [x.server_id for x in d.deletions] == ["a"]


def test_error_after_active_is_a_reclaim_not_an_exclusion() -> None:
    inst = make_instance("a", status="ready")
    server = make_server("a", status="ERROR", fault_code=500, fault="reclaimed")
    d = decide(snap(servers=(server,), instances=(inst,)), POLICY, NOW)
    assert tokens(d) == ["INSTANCE_RECLAIMED"]
    assert d.exclusions == ()
    assert d.dirty == {"web": "units lost to a reclaim"}
    assert [x.server_id for x in d.deletions] == ["a"]


def test_a_vanished_live_server_is_a_reclaim() -> None:
    d = decide(snap(instances=(make_instance("a", status="ready"),)), POLICY, NOW)
    assert fields(d, "a")["status"] == "deleted"
    assert tokens(d) == ["INSTANCE_RECLAIMED"]
    assert "web" in d.dirty
    assert d.held == {}


def test_a_vanished_server_scoctl_deleted_is_just_deleted() -> None:
    d = decide(snap(instances=(make_instance("a", status="deleting"),)), POLICY, NOW)
    assert fields(d, "a") == {"status": "deleted"}
    assert tokens(d) == ["INSTANCE_DELETED"]
    assert not d.dirty


# -- intents, adoption, orphans --------------------------------------------------------------

def test_servers_of_a_crashed_intent_are_adopted_once() -> None:
    launch = make_launch("l-aaaaaaaaaaaa")
    servers = (make_server("s1", status="BUILD", launch="l-aaaaaaaaaaaa"),
               make_server("s2", status="BUILD", launch="l-aaaaaaaaaaaa"))
    d = decide(snap(servers=servers, launches=(launch,)), POLICY, NOW)
    assert sorted(i.id for i in d.new_instances) == ["s1", "s2"]
    assert all(i.launch_id == "l-aaaaaaaaaaaa" and i.pool == "p-spot" for i in d.new_instances)
    assert [(u.launch_id, u.status) for u in d.launch_updates] == [("l-aaaaaaaaaaaa",
                                                                    "recorded")]
    assert tokens(d).count("LAUNCH_ADOPTED") == 1


def test_intent_without_servers_fails_after_the_settle_window_not_the_launch_timeout() -> None:
    young = decide(snap(launches=(make_launch("l-aaaaaaaaaaaa", created=29),)), POLICY, NOW)
    assert young.empty
    old = decide(snap(launches=(make_launch("l-aaaaaaaaaaaa", created=30),)), POLICY, NOW)
    assert [(u.launch_id, u.status) for u in old.launch_updates] == [("l-aaaaaaaaaaaa",
                                                                      "failed")]
    assert tokens(old) == ["LAUNCH_TIMEOUT"]
    assert old.events[0].detail == {"launch": "l-aaaaaaaaaaaa", "pool": "p-spot", "servers": 0,
                                    "settle": 30.0}
    assert "web" in old.dirty
    # the window runs from the end of the call (`updated`), not from the intent
    called_late = make_launch("l-aaaaaaaaaaaa", created=400, updated=5)
    assert decide(snap(launches=(called_late,)), POLICY, NOW).empty


def test_a_server_showing_up_after_its_intent_failed_is_adopted_not_an_orphan() -> None:
    failed = make_launch("l-aaaaaaaaaaaa", created=60, status="failed")
    late = make_server("s1", launch="l-aaaaaaaaaaaa")
    d = decide(snap(servers=(late,), launches=(failed,)), POLICY, NOW)
    assert [i.id for i in d.new_instances] == ["s1"] and d.orphans == ()
    # the launch stays failed (its units were launched again): its servers are late
    assert d.launch_updates == () and tokens(d) == ["LATE_LAUNCH_ADOPTED"]
    assert d.deletions == ()  # within the plan (10 wanted): kept


def test_late_servers_above_the_plan_are_deleted_within_the_disruption_budget() -> None:
    failed = make_launch("l-aaaaaaaaaaaa", created=60, status="failed")
    late = tuple(make_server(f"late{i}", launch="l-aaaaaaaaaaaa") for i in range(2))
    kept = tuple(make_instance(f"k{i}", status="active") for i in range(2))
    servers = late + tuple(make_server(f"k{i}") for i in range(2))
    targets = {"web": {"p-spot": 2}}
    first = decide(snap(servers=servers, instances=kept, launches=(failed,), targets=targets),
                   POLICY, NOW)
    assert tokens(first).count("LATE_LAUNCH_ADOPTED") == 1
    # 10 % of 4 units, rounded up: one at a time, and only the late ones
    assert [(x.server_id, x.reason) for x in first.deletions] == [
        ("late0", "late launch: above the plan")]
    adopted = tuple(first.new_instances)
    second = decide(snap(servers=servers[1:], instances=kept + adopted[1:],
                         launches=(failed,), targets=targets), POLICY, NOW)
    assert [x.server_id for x in second.deletions] == ["late1"]


def test_failed_slurm_intent_powers_its_node_down_never_deletes_a_server() -> None:
    d = decide(snap(launches=(make_launch("l-aaaaaaaaaaaa", created=400, count=1,
                                          node_names=("gpu-1",)),), slurm_nodes=()),
               POLICY, NOW)
    assert [(x.server_id, x.slurm_node) for x in d.deletions] == [("", "gpu-1")]


def test_failed_slurm_launch_powers_its_node_down_once_not_on_a_retried_delete() -> None:
    node = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle",
                     flags=frozenset({"CLOUD", "POWERING_UP"}))
    failed = make_server("a", name="gpu-1", status="ERROR", fault_code=500,
                         fault="No valid host was found.")
    building = make_instance("a", status="building", active=None, node_name="gpu-1",
                             name="gpu-1")
    first = decide(snap(servers=(failed,), instances=(building,), slurm_nodes=(node,)),
                   POLICY, NOW)
    assert [(x.server_id, x.slurm_node) for x in first.deletions] == [("a", "gpu-1")]
    # the delete failed and the row stays `error`: the retry deletes, it does not power down
    errored = replace(building, status="error", fault="No valid host was found.")
    retry = decide(snap(servers=(failed,), instances=(errored,), slurm_nodes=(node,)),
                   POLICY, NOW)
    assert [(x.server_id, x.slurm_node) for x in retry.deletions] == [("a", None)]


def test_a_failed_slurm_launch_never_powers_down_a_node_a_fallback_now_serves() -> None:
    node = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle",
                     flags=frozenset({"CLOUD", "POWERING_UP"}))
    failed = make_server("a", name="gpu-1", status="ERROR", fault_code=500,
                         fault="No valid host was found.")
    fallback = make_server("b", name="gpu-1", status="BUILD", pool="p-spot2")
    insts = (make_instance("a", status="building", active=None, node_name="gpu-1",
                           name="gpu-1"),
             make_instance("b", status="building", active=None, node_name="gpu-1",
                           name="gpu-1", pool="p-spot2"))
    d = decide(snap(servers=(failed, fallback), instances=insts, slurm_nodes=(node,)),
               POLICY, NOW)
    assert [(x.server_id, x.slurm_node) for x in d.deletions] == [("a", None)]
    timed_out = decide(snap(launches=(make_launch("l-aaaaaaaaaaaa", created=400, count=1,
                                                  node_names=("gpu-1",)),),
                            servers=(fallback,), instances=insts[1:], slurm_nodes=(node,)),
                       POLICY, NOW)
    assert [(u.launch_id, u.status) for u in timed_out.launch_updates] == [
        ("l-aaaaaaaaaaaa", "failed")]
    assert timed_out.deletions == ()


def test_orphans_are_reported_and_deleted_only_with_gc_after_grace() -> None:
    orphan = make_server("o", workload="ghost", launch="l-ffffffffffff")
    d = decide(snap(servers=(orphan,)), POLICY, NOW)
    assert [o.server_id for o in d.orphans] == ["o"]
    assert tokens(d) == ["ORPHAN_FOUND"]
    assert not d.deletions
    seen = {"o": ago(1801)}
    d = decide(snap(servers=(orphan,), orphans_seen=seen), POLICY, NOW)
    assert not d.deletions and not d.events
    gc = replace(POLICY, gc_orphans=True)
    d = decide(snap(servers=(orphan,), orphans_seen={"o": ago(100)}), gc, NOW)
    assert not d.deletions
    d = decide(snap(servers=(orphan,), orphans_seen=seen), gc, NOW)
    assert [x.server_id for x in d.deletions] == ["o"]


def test_a_server_scoctl_just_deleted_is_not_an_orphan_while_nova_still_lists_it() -> None:
    # Nova lists a deleted server as DELETED for a moment: the pass that sees it records
    # INSTANCE_DELETED; the next one, its row deleted (no longer read), reports no orphan
    going = make_server("a", status="DELETED")
    first = decide(snap(servers=(going,), instances=(make_instance("a", status="deleting"),)),
                   POLICY, NOW)
    assert tokens(first) == ["INSTANCE_DELETED"]
    after = decide(snap(servers=(going,)), replace(POLICY, gc_orphans=True, orphan_grace=0),
                   NOW)
    assert after.orphans == () and tokens(after) == [] and after.deletions == ()


def test_a_known_workload_without_a_known_launch_is_an_orphan_whatever_its_age() -> None:
    # tagged for a workload scoctl knows, but no launch intent scoctl recorded: an orphan
    stray = make_server("s", workload="web", launch="l-ffffffffffff")
    first = decide(snap(servers=(stray,), k8s_nodes=()), POLICY, NOW)
    assert first.new_instances == () and first.adoptions == ()
    assert [(o.server_id, o.workload, o.delete) for o in first.orphans] == [("s", "web", False)]
    assert tokens(first) == ["ORPHAN_FOUND"]
    # long past the registration timeout and the grace period: reported, never deleted
    seen = {"s": ago(POLICY.registration_timeout + POLICY.orphan_grace + 1)}
    later = decide(snap(servers=(stray,), k8s_nodes=(), orphans_seen=seen), POLICY, NOW)
    assert later.deletions == () and later.new_instances == () and later.events == ()
    gc = decide(snap(servers=(stray,), k8s_nodes=(), orphans_seen=seen),
                replace(POLICY, gc_orphans=True), NOW)
    assert [(x.server_id, x.reason) for x in gc.deletions] == [
        ("s", "orphan past its grace period")]


def test_a_server_without_scoctl_tags_is_never_touched() -> None:
    foreign = make_server("f", managed=False, status="ERROR", fault="whatever")
    d = decide(snap(servers=(foreign,)), replace(POLICY, gc_orphans=True, orphan_grace=0), NOW)
    assert d.empty and not d.orphans


# -- scale-down ------------------------------------------------------------------------------

def fleet(n: int, *, idle: float | None = 700) -> tuple[tuple[ServerInfo, ...],
                                                      tuple[InstanceRecord, ...],
                                                      tuple[NodeInfo, ...]]:
    servers = tuple(make_server(f"s{i:02d}") for i in range(n))
    insts = tuple(make_instance(f"s{i:02d}", idle_since=idle) for i in range(n))
    nodes = tuple(make_node(i.name, sid=i.id) for i in insts)
    return servers, insts, nodes


def test_surplus_idle_units_are_scaled_down_under_the_disruption_budget() -> None:
    servers, insts, nodes = fleet(20)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    targets={"web": {"p-spot": 5}}), POLICY, NOW)
    assert len(d.scale_downs) == 2  # 10% of 20
    assert all(fields(d, s.instance)["status"] == "draining" for s in d.scale_downs)
    assert all(fields(d, s.instance)["disruption"] == "empty" for s in d.scale_downs)
    # each start is announced, and the budget's block once (design: Disruption)
    assert tokens(d) == ["DISRUPTION_STARTED", "INSTANCE_SCALE_DOWN"] * 2 + ["DISRUPTION_BLOCKED"]
    assert [(b.workload, b.reason, b.budget) for b in d.blocks] == [("web", "empty", 0)]


def test_disruption_budget_rounds_up_to_at_least_one() -> None:
    servers, insts, nodes = fleet(3)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, targets={}), POLICY, NOW)
    assert len(d.scale_downs) == 1


def test_a_workloads_own_budget_replaces_the_top_level_one() -> None:
    servers, insts, nodes = fleet(20)
    frozen = replace(POLICY, workload_budgets={"web": (Budget(Units.count(0)),)})
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    targets={"web": {"p-spot": 5}}), frozen, NOW)
    assert not d.scale_downs and len(d.blocked) == 15
    assert {b.budget for b in d.blocked} == {Budget(Units.count(0))}
    wider = replace(POLICY, workload_budgets={"web": (Budget(Units.share(25)),)})
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    targets={"web": {"p-spot": 5}}), wider, NOW)
    assert len(d.scale_downs) == 5  # 25% of 20


def test_busy_or_recently_idle_units_are_not_scaled_down() -> None:
    servers, insts, nodes = fleet(2, idle=100)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, targets={}), POLICY, NOW)
    assert not d.scale_downs
    servers, insts, nodes = fleet(2, idle=None)
    busy = {i.name: 1 for i in insts}
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes, targets={},
                    busy_pods=busy), POLICY, NOW)
    assert not d.scale_downs and d.empty


def test_idle_since_is_set_when_a_node_empties_and_cleared_when_it_fills() -> None:
    servers, insts, nodes = fleet(1, idle=None)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes), POLICY, NOW)
    assert fields(d, "s00") == {"idle_since": rfc3339(NOW)}
    servers, insts, nodes = fleet(1, idle=50)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    busy_pods={insts[0].name: 2}), POLICY, NOW)
    assert fields(d, "s00") == {"idle_since": None}


def test_units_the_plan_still_needs_stay_even_when_idle() -> None:
    servers, insts, nodes = fleet(4, idle=5000)
    d = decide(snap(servers=servers, instances=insts, k8s_nodes=nodes,
                    targets={"web": {"p-spot": 4}}), POLICY, NOW)
    assert d.empty


def test_slurm_suspended_node_loses_its_server_without_drain() -> None:
    inst = make_instance("a", status="ready", node_name="gpu-1", name="gpu-1")
    node = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle",
                     flags=frozenset({"CLOUD", "POWERED_DOWN"}))
    d = decide(snap(servers=(make_server("a", name="gpu-1"),), instances=(inst,),
                    slurm_nodes=(node,), suspended=frozenset({"gpu-1"})), POLICY, NOW)
    # Slurm powered the node down itself: a second POWER_DOWN_FORCE would run SuspendProgram
    # again and keep the node from resuming for SuspendTimeout
    assert [(x.server_id, x.slurm_node) for x in d.deletions] == [("a", None)]
    assert not d.scale_downs and not d.dirty


def test_a_node_slurm_has_powered_down_already_is_not_powered_down_again() -> None:
    for flags in ({"CLOUD", "POWERED_DOWN"}, {"CLOUD", "POWERING_DOWN"}):
        node = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle",
                         flags=frozenset(flags))
        timed_out = decide(snap(launches=(make_launch("l-aaaaaaaaaaaa", created=400, count=1,
                                                      node_names=("gpu-1",)),),
                                slurm_nodes=(node,)), POLICY, NOW)
        assert [u.status for u in timed_out.launch_updates] == ["failed"]
        assert timed_out.deletions == ()
        reclaimed = decide(snap(instances=(make_instance("a", node_name="gpu-1",
                                                         name="gpu-1"),),
                                slurm_nodes=(node,)), POLICY, NOW)
        assert tokens(reclaimed) == ["INSTANCE_RECLAIMED"] and reclaimed.deletions == ()
    up = SlurmNode(name="gpu-1", cpus=8, memory_mb=1000, state="idle", flags=frozenset())
    reclaimed = decide(snap(instances=(make_instance("a", node_name="gpu-1", name="gpu-1"),),
                            slurm_nodes=(up,)), POLICY, NOW)
    assert [(x.server_id, x.slurm_node) for x in reclaimed.deletions] == [("", "gpu-1")]


# -- properties ------------------------------------------------------------------------------

@st.composite
def steady_fleets(draw: st.DrawFn) -> tuple[Snapshot, int]:
    n = draw(st.integers(min_value=0, max_value=30))
    want = draw(st.integers(min_value=0, max_value=30))
    idle = draw(st.lists(st.sampled_from([None, 100.0, 5000.0]), min_size=n, max_size=n))
    busy = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    servers = tuple(make_server(f"s{i:02d}") for i in range(n))
    insts = tuple(make_instance(f"s{i:02d}", idle_since=None if busy[i] else idle[i])
                  for i in range(n))
    insts = tuple(replace(i, idle_since=i.idle_since) if i.idle_since or busy[k] else
                  replace(i, idle_since=ago(1)) for k, i in enumerate(insts))
    nodes = tuple(make_node(i.name, sid=i.id) for i in insts)
    return snap(servers=servers, instances=insts, k8s_nodes=nodes,
                targets={"web": {"p-spot": want}},
                busy_pods={insts[i].name: 1 for i in range(n) if busy[i]}), want


@given(steady_fleets())
def test_scale_down_never_exceeds_surplus_or_the_disruption_budget(case: tuple[Snapshot,
                                                                             int]) -> None:
    snapshot, want = case
    d = decide(snapshot, POLICY, NOW)
    n = len(snapshot.instances)
    assert len(d.scale_downs) <= max(0, n - want)
    assert len(d.scale_downs) <= max(1, -(-n // 10))
    busy = set(snapshot.busy_pods)
    assert not {s.name for s in d.scale_downs} & busy
    assert not d.deletions


@given(steady_fleets())
def test_a_converged_fleet_yields_an_empty_decision(case: tuple[Snapshot, int]) -> None:
    snapshot, _ = case
    n = len(snapshot.instances)
    converged = replace(snapshot, targets={"web": {"p-spot": n}})
    assert decide(converged, POLICY, NOW).empty


@given(st.lists(st.sampled_from(["BUILD", "ACTIVE", "ERROR", "DELETED"]), max_size=12),
       st.booleans())
def test_unmanaged_servers_never_appear_in_any_action(statuses: list[str], gc: bool) -> None:
    servers = tuple(make_server(f"f{i}", managed=False, status=s) for i, s in
                    enumerate(statuses))
    d = decide(snap(servers=servers), replace(POLICY, gc_orphans=gc, orphan_grace=0), NOW)
    ids = {s.id for s in servers}
    assert not ids & {x.server_id for x in d.deletions}
    assert not ids & {s.server_id for s in d.scale_downs}
    assert not ids & {i.id for i in d.new_instances}
