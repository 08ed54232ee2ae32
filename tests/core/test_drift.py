"""Drift (design: Drift), pure: detection once per unit, the `drifted` candidates in order under
the budgets, canary, halt, revert, and Node labels patched in place."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from scoctl.core import drift
from scoctl.core.disruption import Unit
from scoctl.core.fleet import units_of
from scoctl.core.model.disruption import Budget, DisruptionSettings, Drift, Units
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.core.reconcile import Decision, DriftView, Snapshot, decide
from scoctl.core.spec import LaunchSpec, hash_of, hashes_of
from tests.core.test_disruption_rules import ALLOC, apply, started
from tests.core.test_reconcile import (
    NOW,
    POLICY,
    ago,
    fields,
    make_instance,
    make_node,
    make_server,
    snap,
    tokens,
)

OLD = LaunchSpec(flavor="g1", image="ubuntu-24.04", networks=("net",), az="nova",
                 user_data_template="#!/bin/sh\n", taints=("reclaimable=true:NoSchedule",))
NEW = replace(OLD, image="ubuntu-26.04")


def view(spec: LaunchSpec = NEW, **kwargs: Any) -> DriftView:
    base: dict[str, Any] = {"specs": {("web", "p-spot"): spec}, "known": {hash_of(OLD): OLD}}
    base.update(kwargs)
    return DriftView(**base)


def fleet(n: int, *, spec: LaunchSpec = OLD, target: int | None = None, **kwargs: Any
          ) -> Snapshot:
    """`n` ready, busy units of web in p-spot launched from `spec`, s00 the oldest."""
    insts = tuple(replace(make_instance(f"s{i:02d}", created=1000 - i),
                          spec_hash=hash_of(spec)) for i in range(n))
    nodes = tuple(replace(make_node(i.name, sid=i.id), allocatable=ALLOC) for i in insts)
    return snap(servers=tuple(make_server(i.id) for i in insts), instances=insts,
                k8s_nodes=nodes, busy_pods={i.name: 1 for i in insts},
                targets={"web": {"p-spot": n if target is None else target}},
                drift=kwargs.pop("drift", view()), **kwargs)


def policy(soak: float = 120.0, halt_after: int = 2, **settings: Any) -> Any:
    budgets = settings.pop("budgets", (Budget(Units.share(100)),))
    return replace(POLICY, budgets=budgets, disruption=DisruptionSettings(
        budgets=budgets, drift=Drift(soak=soak, halt_after=halt_after), **settings))


def detail(d: Decision, token: str) -> list[dict[str, Any]]:
    return [dict(e.detail) for e in d.events if e.token == token]


def with_replacement(s: Snapshot, sid: str, *, spec: LaunchSpec = NEW, ready_for: float = 0,
                     status: str = "ready", fault: str | None = None) -> Snapshot:
    """`s` with unit `sid` launched from `spec`: Ready `ready_for` seconds, or failed."""
    inst = replace(make_instance(sid, status=status, created=ready_for + 60),
                   spec_hash=hash_of(spec), fault=fault)
    if status == "ready":
        inst = replace(inst, ready_at=ago(ready_for))
    node = replace(make_node(inst.name, sid=sid), allocatable=ALLOC)
    return replace(s, instances=(*s.instances, inst),
                   servers=(*s.servers, make_server(sid)) if status == "ready" else s.servers,
                   k8s_nodes=(*s.k8s_nodes, node) if status == "ready" else s.k8s_nodes,
                   busy_pods={**s.busy_pods, inst.name: 1})


# -- detection -----------------------------------------------------------------------------------

def test_a_unit_whose_spec_changed_is_recorded_drifted_once_naming_the_fields() -> None:
    s = fleet(2)
    d = decide(s, policy(), NOW)
    found = detail(d, "UNIT_DRIFTED")
    assert [(f["server"], f["fields"], f["spec"]) for f in found] == [
        ("s00", ["image"], hash_of(OLD)), ("s01", ["image"], hash_of(OLD))]
    # recorded already: not again
    d = decide(replace(s, drift=view(noted=frozenset({"s00", "s01"}))), policy(), NOW)
    assert detail(d, "UNIT_DRIFTED") == []


def test_units_on_the_current_spec_are_not_drifted_and_a_pool_the_config_dropped_is_not() -> None:
    assert drift.drifted(fleet(2, spec=NEW).instances, {("web", "p-spot"): NEW}) == ()
    assert drift.drifted(fleet(2).instances, {("web", "other"): NEW}) == ()
    d = decide(fleet(2, spec=NEW), policy(), NOW)
    assert d.empty and started(d) == []


def test_without_a_drift_view_nothing_is_compared() -> None:
    d = decide(fleet(2, drift=None), policy(), NOW)
    assert "UNIT_DRIFTED" not in tokens(d) and started(d) == []


# -- order ---------------------------------------------------------------------------------------

def test_replacement_order_is_empty_first_then_oldest_round_robin_across_pools() -> None:
    units = [Unit("a1", "a1", "web", "pa", created=ago(50)),
             Unit("a2", "a2", "web", "pa", created=ago(90)),
             Unit("a3", "a3", "web", "pa", created=ago(70)),
             Unit("b1", "b1", "web", "pb", created=ago(60)),
             Unit("b2", "b2", "web", "pb", created=ago(10), idle_since=ago(5)),
             Unit("a4", "a4", "web", "pa", created=ago(5), idle_since=ago(1))]
    assert [u.name for u in drift.order(units)] == ["a4", "b2", "a2", "b1", "a3", "a1"]


# -- canary, budgets, replace first ----------------------------------------------------------------

def test_the_first_replacement_is_a_canary_one_at_a_time_until_it_soaked() -> None:
    s = fleet(3)
    # started before its replacement (launched 90 s before NOW, below) was launched
    d = decide(s, policy(soak=120.0), NOW - timedelta(seconds=200))
    assert started(d) == [("s00", "drifted")]  # the oldest alone, though the budget allows 3
    assert fields(d, "s00")["disruption"] == "drifted" and d.scale_downs == ()
    s = apply(s, d)
    # out of coverage, in service: acquire launches its replacement
    assert units_of(s.instances, ()) == {"web": {"p-spot": 2}}
    assert started(decide(s, policy(soak=120.0), NOW + timedelta(seconds=10))) == []
    # the replacement is Ready: the old unit is cordoned and drained; still a canary
    s = with_replacement(s, "n00", ready_for=30)
    d = decide(s, policy(soak=120.0), NOW)
    [ready] = detail(d, "REPLACEMENT_READY")
    assert (ready["old"], ready["new"]) == ("s00", "n00")
    [down] = d.scale_downs
    assert (down.instance, down.reason) == ("s00", DisruptionReason.DRIFTED)
    assert started(d) == []
    # the canary's old unit is gone, its replacement still soaking: nothing more starts
    gone = replace(s, instances=tuple(i for i in s.instances if i.id != "s00"),
                   servers=tuple(v for v in s.servers if v.id != "s00"),
                   k8s_nodes=tuple(n for n in s.k8s_nodes if n.name != "sco-web-s00"),
                   targets={"web": {"p-spot": 3}})
    assert [i.disruption for i in gone.instances] == [None, None, None]
    assert started(decide(gone, policy(soak=120.0), NOW)) == []
    assert started(decide(gone, policy(soak=30.0), NOW)) != []  # soaked: it goes on
    # Ready for the soak: the rest of the rollout starts, as the budget allows
    s = with_replacement(fleet(3), "n00", ready_for=130)
    d = decide(replace(s, targets={"web": {"p-spot": 3}}), policy(soak=120.0), NOW)
    assert sorted(started(d)) == [("s00", "drifted"), ("s01", "drifted"), ("s02", "drifted")]


def test_an_open_rollout_runs_under_the_drifted_budget() -> None:
    budgets = (Budget(Units.count(1), reasons=frozenset({DisruptionReason.DRIFTED})),
               Budget(Units.share(100)))
    s = with_replacement(fleet(4, target=5), "n00", ready_for=600)
    d = decide(s, policy(budgets=budgets), NOW)
    assert started(d) == [("s00", "drifted")]
    assert [b.disruption.server_id for b in d.blocked] == ["s01", "s02", "s03"]
    assert "DISRUPTION_BLOCKED" in tokens(d)


# -- halt ---------------------------------------------------------------------------------------

def failing(s: Snapshot, *sids: str) -> Snapshot:
    for sid in sids:
        s = with_replacement(s, sid, status="error", fault="no ready node after 900s")
    return s


def test_halt_after_failed_replacements_in_a_row_keeps_the_old_units() -> None:
    s = fleet(3)
    s = apply(s, decide(s, policy(), NOW))  # the canary s00 starts
    s = failing(s, "f1")
    d = decide(s, policy(halt_after=2), NOW)
    assert "DRIFT_ROLLOUT_HALTED" not in tokens(d)  # one failure: it goes on
    s = failing(s, "f2")
    d = decide(s, policy(halt_after=2), NOW)
    [halt] = detail(d, "DRIFT_ROLLOUT_HALTED")
    assert halt["failures"] == 2 and halt["hashes"] == sorted(hashes_of(NEW))
    # the canary's old unit is back in service, nothing else starts, nothing is removed
    assert fields(d, "s00") == {"disruption": None, "disruption_at": None}
    assert [e["why"] for e in detail(d, "DRIFT_ENDED")] == ["halted"]
    assert started(d) == [] and d.scale_downs == () and d.deletions == ()
    s = apply(s, d)
    assert units_of(s.instances, ()) == {"web": {"p-spot": 3}}
    # recorded already: not again, and still nothing starts
    key = ("web", ",".join(halt["hashes"]))
    d = decide(replace(s, drift=view(halted=frozenset({key}), noted=frozenset({"s00", "s01",
                                                                                "s02"}))),
               policy(halt_after=2), NOW)
    assert d.empty


def test_a_resume_forgets_the_failures_before_it() -> None:
    s = failing(fleet(3), "f1", "f2")
    assert drift.rollout("web", {hash_of(NEW)}, s.instances, now=NOW, soak=120,
                         halt_after=2).phase is drift.Phase.HALTED
    d = decide(replace(s, drift=view(resumed={"web": ago(0)})), policy(halt_after=2), NOW)
    assert "DRIFT_ROLLOUT_HALTED" not in tokens(d)
    assert started(d) == [("s00", "drifted")]


def test_a_ready_replacement_resets_the_failures_in_a_row() -> None:
    s = failing(fleet(3), "f1")
    s = with_replacement(s, "ok", ready_for=10)
    s = failing(s, "f3")  # created last
    ok = next(i for i in s.instances if i.id == "ok")
    f3 = next(i for i in s.instances if i.id == "f3")
    s = replace(s, instances=tuple(replace(i, created=ago(5)) if i.id == "f3" else
                                   replace(i, created=ago(20)) if i.id == "ok" else i
                                   for i in s.instances))
    assert ok.ready_at and f3.fault
    r = drift.rollout("web", {hash_of(NEW)}, s.instances, now=NOW, soak=120, halt_after=2)
    assert (r.phase, r.failures) == (drift.Phase.CANARY, 1)


# -- revert -------------------------------------------------------------------------------------

def test_reverting_the_config_mid_rollout_ends_it_without_removing_old_units() -> None:
    s = fleet(3)
    s = apply(s, decide(s, policy(), NOW))  # the canary s00 starts
    s = replace(s, drift=view(spec=OLD))  # the operator reverts the image
    d = decide(s, policy(), NOW)
    assert fields(d, "s00") == {"disruption": None, "disruption_at": None}
    assert [e["why"] for e in detail(d, "DRIFT_ENDED")] == ["reverted"]
    assert started(d) == [] and d.scale_downs == () and "UNIT_DRIFTED" not in tokens(d)
    # its replacement, Ready on the new spec, is an ordinary unit (the revert keeps its hash:
    # `drift.kept_after_revert`): not drifted back, surplus goes by the plan
    s = with_replacement(apply(s, d), "n00", spec=NEW, ready_for=300)
    d = decide(replace(s, drift=view(spec=OLD, kept=frozenset({("web", hash_of(NEW))}))),
               policy(), NOW)
    assert "REPLACEMENT_READY" not in tokens(d) and "UNIT_DRIFTED" not in tokens(d)
    assert started(d) == []
    # without the revert on record it would be drifted back onto the old spec
    d = decide(replace(s, drift=view(spec=OLD)), policy(), NOW)
    assert [f["server"] for f in detail(d, "UNIT_DRIFTED")] == ["n00"]


# -- meta ---------------------------------------------------------------------------------------

def test_a_label_change_is_patched_onto_the_nodes_in_place_with_no_new_server() -> None:
    want = {("web", "p-spot"): {"team": "ml", "tier": "gold"}}
    s = fleet(2, spec=NEW, drift=view(node_labels=want))
    d = decide(s, policy(), NOW)
    assert [(p.node, dict(p.labels)) for p in d.label_patches] == [
        ("sco-web-s00", {"team": "ml", "tier": "gold"}),
        ("sco-web-s01", {"team": "ml", "tier": "gold"})]
    assert [e["labels"] for e in detail(d, "DRIFT_PATCHED")] == [dict(want[("web", "p-spot")])] * 2
    assert started(d) == [] and d.scale_downs == () and d.deletions == ()
    assert "UNIT_DRIFTED" not in tokens(d)
    # patched: the next pass changes nothing
    nodes = tuple(replace(n, labels={**n.labels, "team": "ml", "tier": "gold"})
                  for n in s.k8s_nodes)
    d = decide(replace(s, k8s_nodes=nodes), policy(), NOW)
    assert d.label_patches == () and {u.id: u.fields for u in d.updates} == {
        i.id: {"labels": "team,tier"} for i in s.instances}  # the keys it now carries
    s = apply(replace(s, k8s_nodes=nodes), d)
    assert decide(s, policy(), NOW).empty
    assert drift.meta_patches({"team": "ml", "x": "1"}, {"team": "ai"}) == {"team": "ai"}
    # a label the config drops is removed; one it never gave (x) stays
    s = replace(s, drift=view(node_labels={("web", "p-spot"): {"team": "ml"}}))
    d = decide(s, policy(), NOW)
    assert [dict(p.labels) for p in d.label_patches] == [{"tier": None}] * 2
    assert [e["removed"] for e in detail(d, "DRIFT_PATCHED")] == [["tier"]] * 2
    assert d.updates == ()  # recorded once the Node no longer carries it
    nodes = tuple(replace(n, labels={k: v for k, v in n.labels.items() if k != "tier"})
                  for n in s.k8s_nodes)
    d = decide(replace(s, k8s_nodes=nodes), policy(), NOW)
    assert d.label_patches == () and {u.fields["labels"] for u in d.updates} == {"team"}


def test_only_labels_the_config_gave_are_removed_and_never_the_well_known_ones() -> None:
    node = {"team": "ml", "x": "1", "topology.kubernetes.io/zone": "az1", "sco/pool": "p"}
    assert drift.meta_patches(node, {}, given=("team", "topology.kubernetes.io/zone",
                                               "sco/pool", "gone")) == {"team": None}
    assert drift.given_keys(drift.label_keys({"b": "1", "a": "2"})) == ("a", "b")
    assert drift.given_keys(None) == ()


# -- the rows a halt counts over -----------------------------------------------------------------

def test_failed_replacements_deleted_already_still_count_toward_the_halt() -> None:
    # the state's snapshot holds no deleted rows: the view hands the launches on the new spec
    s = fleet(3)
    s = apply(s, decide(s, policy(), NOW))
    gone = tuple(replace(make_instance(sid, status="deleted", created=100 - n),
                         spec_hash=hash_of(NEW), fault="no ready node after 900s")
                 for n, sid in enumerate(("f1", "f2")))
    d = decide(replace(s, drift=view(launched=gone)), policy(halt_after=2), NOW)
    assert [h["failures"] for h in detail(d, "DRIFT_ROLLOUT_HALTED")] == [2]
    assert fields(d, "s00") == {"disruption": None, "disruption_at": None}


def test_a_server_nova_still_lists_as_deleted_is_never_adopted_again() -> None:
    # its instance row is deleted (the state hands none), its sco:launch names a known launch:
    # adopting it would record a unit that is gone, and then a reclaim that never happened
    from scoctl.core.model import LaunchRecord

    launch = LaunchRecord(launch_id="l-000000000001", region="region-a", workload="web",
                          pool="p-spot", generation=3, count=1, status="recorded",
                          created=ago(600), updated=ago(600))
    d = decide(snap(servers=(make_server("x", status="DELETED"),), launches=(launch,)),
               POLICY, NOW)
    assert d.new_instances == () and "LAUNCH_ADOPTED" not in tokens(d)
    assert "INSTANCE_RECLAIMED" not in tokens(decide(snap(
        servers=(make_server("x", status="DELETED"),), launches=(launch,)), POLICY, NOW))


# -- Slurm ---------------------------------------------------------------------------------------

def test_a_drifted_slurm_node_is_drained_and_powered_down_once_idle_not_replaced_first() -> None:
    from scoctl.core.model import SlurmNode

    inst = replace(make_instance("s00", node_name="cloud-1", created=1000),
                   spec_hash=hash_of(OLD))
    busy = SlurmNode(name="cloud-1", cpus=1, memory_mb=2000, partitions=("cloud",),
                     state="allocated", flags=frozenset({"CLOUD"}))
    s = snap(servers=(make_server("s00"),), instances=(inst,), slurm_nodes=(busy,),
             targets={"web": {"p-spot": 1}}, drift=view())
    d = decide(s, policy(), NOW)
    assert started(d) == [("s00", "drifted")]
    [down] = d.scale_downs
    assert (down.slurm_node, down.reason) == ("cloud-1", DisruptionReason.DRIFTED)
    assert fields(d, "s00")["status"] == "draining"  # no replacement launched for it


def test_a_reverted_rollout_keeps_its_target_until_the_spec_changes_again() -> None:
    a = LaunchSpec(flavor="f", image="img", image_id="7d3c0d4e-0000-4000-8000-00000000000a")
    b = replace(a, image_id="7d3c0d4e-0000-4000-8000-00000000000b")
    c = replace(a, image_id="7d3c0d4e-0000-4000-8000-00000000000c")
    noted = [("web", hash_of(a), hash_of(b)), ("web", hash_of(a), hash_of(b))]
    assert drift.kept_after_revert(noted, {("web", "p"): a}) == {("web", hash_of(b))}
    # still rolling (the spec is the target): nothing kept; moved on: nothing kept
    assert drift.kept_after_revert(noted, {("web", "p"): b}) == frozenset()
    assert drift.kept_after_revert(noted, {("web", "p"): c}) == frozenset()
    # another workload's revert keeps nothing of this one's
    assert drift.kept_after_revert([("db", hash_of(a), hash_of(b))],
                                   {("web", "p"): a, ("db", "p"): a}) == {("db", hash_of(b))}
