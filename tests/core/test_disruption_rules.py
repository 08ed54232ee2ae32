"""The day-2 disruption rules (design: Disruption), pure: consolidation, expiry, repair, in-flight
counting across passes, rates over recorded starts, replace-before-remove and the events."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core import disruption
from scoctl.core.disruption import Unit, jitter, starts_of
from scoctl.core.fleet import units_of
from scoctl.core.model import DisruptionBlock, InstanceRecord, PodInfo
from scoctl.core.model.disruption import Budget, DisruptionSettings, Rate, Units
from scoctl.core.model.kubernetes import Container, OwnerRef
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.core.reconcile import Decision, Snapshot, decide
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

GIB = 2**30
ALLOC = {"cpu": 4000, "memory": 16 * GIB, "pods": 110}


def pod(name: str, node: str, cpu: int = 1000) -> PodInfo:
    return PodInfo(name=name, namespace="default", node_name=node, phase="Running",
                   containers=(Container("c", {"cpu": cpu, "memory": GIB}),),
                   owners=(OwnerRef("ReplicaSet", "web-1", controller=True),))


def world(n: int, *, pods_per: dict[int, int], target: int, idle: float | None = None,
          **kwargs: Any) -> Snapshot:
    """`n` ready units of web in p-spot, unit i running pods_per[i] one-core pods."""
    servers = tuple(make_server(f"s{i:02d}") for i in range(n))
    insts = tuple(make_instance(f"s{i:02d}", idle_since=None if pods_per.get(i) else idle)
                  for i in range(n))
    nodes = tuple(replace(make_node(i.name, sid=i.id), allocatable=ALLOC) for i in insts)
    pods = {i.name: tuple(pod(f"p{k}-{i.name}", i.name) for k in range(pods_per.get(j, 0)))
            for j, i in enumerate(insts)}
    busy = {name: len(p) for name, p in pods.items() if p}
    return snap(servers=servers, instances=insts, k8s_nodes=nodes, pods=pods, busy_pods=busy,
                targets={"web": {"p-spot": target}}, **kwargs)


def policy(**settings: Any) -> Any:
    budgets = settings.pop("budgets", (Budget(Units.share(100)),))
    return replace(POLICY, budgets=budgets,
                   disruption=DisruptionSettings(budgets=budgets, **settings))


def started(d: Decision) -> list[tuple[str, str]]:
    return [(e.detail["server"], str(e.detail["reason"])) for e in d.events
            if e.token == "DISRUPTION_STARTED"]


# -- consolidation -----------------------------------------------------------------------------

def test_units_the_plan_no_longer_holds_are_consolidated_when_their_pods_fit_on_kept_ones() -> None:
    # 5 units one pod each, the plan wants 2: the two kept (busiest, then by name) take the
    # other three's pods (4 cores each): all three are drained busy, reason underutilized
    d = decide(world(5, pods_per=dict.fromkeys(range(5), 1), target=2), policy(), NOW)
    assert sorted(s.name for s in d.scale_downs) == ["sco-web-s02", "sco-web-s03", "sco-web-s04"]
    assert {s.reason for s in d.scale_downs} == {DisruptionReason.UNDERUTILIZED}
    assert all(fields(d, s.instance) == {"status": "draining", "disruption": "underutilized",
                                         "disruption_at": ago(0)} for s in d.scale_downs)


def test_a_unit_whose_pods_do_not_fit_on_the_kept_units_stays() -> None:
    # kept units have 4 cores and run 3 pods each: one core free each; the unit to go runs 3
    d = decide(world(3, pods_per={0: 3, 1: 3, 2: 3}, target=2), policy(), NOW)
    assert d.scale_downs == ()
    d = decide(world(3, pods_per={0: 3, 1: 3, 2: 2}, target=2), policy(), NOW)
    assert [s.name for s in d.scale_downs] == ["sco-web-s02"]


def test_room_taken_by_one_consolidated_unit_is_not_given_to_the_next() -> None:
    # kept: s00 (3 pods, 1 core free); s01 and s02 run one pod each: only one of them fits
    d = decide(world(3, pods_per={0: 3, 1: 1, 2: 1}, target=1), policy(), NOW)
    assert len(d.scale_downs) == 1


def test_consolidation_goes_through_the_budget_counted_in_flight() -> None:
    snapshot = world(6, pods_per=dict.fromkeys(range(6), 1), target=2)
    two = policy(budgets=(Budget(Units.count(2), frozenset({DisruptionReason.UNDERUTILIZED})),))
    d = decide(snapshot, two, NOW)
    assert len(d.scale_downs) == 2 and tokens(d).count("DISRUPTION_BLOCKED") == 1
    # the next pass: the two are in flight (draining, reason set), nothing more starts, and
    # the block is not announced again
    after = apply(snapshot, d)
    d2 = decide(after, two, NOW + timedelta(seconds=5))
    assert started(d2) == [] and "DISRUPTION_BLOCKED" not in tokens(d2)
    assert len(d2.scale_downs) == 2  # the two in flight carry on


def apply(snapshot: Snapshot, d: Decision) -> Snapshot:
    """The snapshot after the decision was recorded (instance updates, blocks)."""
    updates = {u.id: u.fields for u in d.updates}
    insts = tuple(replace(i, **updates.get(i.id, {})) for i in snapshot.instances)
    blocks = d.blocks if d.block_workloads else snapshot.blocks
    return replace(snapshot, instances=insts, blocks=blocks)


# -- rates over recorded starts ------------------------------------------------------------------

def test_a_rate_counts_starts_recorded_on_deleted_instances_across_passes() -> None:
    rate = policy(budgets=(Budget(Units.share(100), rate=Rate(Units.count(1), 600.0)),))
    snapshot = world(4, pods_per={}, target=0, idle=700)
    gone = replace(make_instance("old", status="deleted"), disruption="empty",
                   disruption_at=ago(300))
    d = decide(replace(snapshot, disrupted=(replace(gone, region="region-b"),)), rate, NOW)
    assert started(d) == []  # one start 5 min ago: the 10-minute window is full
    [block] = d.blocks
    assert block.until == ago(-300)  # that start leaves the window in 5 minutes
    d = decide(replace(snapshot, disrupted=(replace(gone, region="region-b"),)), rate,
               NOW + timedelta(seconds=301))
    assert len(started(d)) == 1


def test_disruption_blocked_is_told_again_when_the_rate_holds_instead_of_the_units() -> None:
    budget = Budget(Units.count(1), frozenset({DisruptionReason.EMPTY}),
                    rate=Rate(Units.count(1), 600.0))
    rated = policy(budgets=(budget,))
    snapshot = world(4, pods_per={}, target=0, idle=700)
    d = decide(snapshot, rated, NOW)
    assert len(started(d)) == 1
    [first] = [e.detail for e in d.events if e.token == "DISRUPTION_BLOCKED"]
    assert (first["budget"], first["by"]) == (0, "units") and "until" not in first
    assert first["limit"] == "1 in flight reached"
    # the unit it started is gone: one may be in flight again, but the rate (1 per 10m)
    # holds the rest until that start leaves its window — a new block, told as such
    after = apply(snapshot, d)
    gone = {s for s, _ in started(d)}
    after = replace(after, instances=tuple(replace(i, status="deleted") if i.id in gone else i
                                           for i in after.instances),
                    servers=tuple(x for x in after.servers if x.id not in gone))
    d2 = decide(after, rated, NOW + timedelta(seconds=5))
    assert started(d2) == []
    [second] = [e.detail for e in d2.events if e.token == "DISRUPTION_BLOCKED"]
    assert (second["budget"], second["by"], second["until"]) == (0, "rate", ago(-600))
    assert second["limit"] == "rate 1 per 10m used up"
    # and not again while it stays as it is
    d3 = decide(apply(after, d2), rated, NOW + timedelta(seconds=10))
    assert "DISRUPTION_BLOCKED" not in tokens(d3)


def test_starts_of_reads_reason_and_time_per_workload() -> None:
    rows = [replace(make_instance("a"), disruption="expired", disruption_at=ago(10)),
            make_instance("b")]
    assert starts_of(rows) == {"web": [(NOW - timedelta(seconds=10),
                                        DisruptionReason.EXPIRED)]}


# -- expiry --------------------------------------------------------------------------------------

@given(st.text(min_size=1, max_size=40))
def test_jitter_is_within_ten_percent_and_stable_per_server_id(server_id: str) -> None:
    assert 0.9 <= jitter(server_id) <= 1.1
    assert jitter(server_id) == jitter(server_id)


def test_units_expire_each_at_its_own_jittered_age() -> None:
    units = [Unit(f"id-{i}", f"u{i}", "web", "p", created=ago(1000)) for i in range(200)]
    limit = {"web": 1000.0 / 1.0}
    out = disruption.expired(units, now=NOW, expire_after=limit)
    assert {d.server_id for d in out} == {u.server_id for u in units
                                          if 1000 >= 1000 * jitter(u.server_id)}
    assert 0 < len(out) < 200  # spread out, not all at once
    assert all(d.replace_first for d in out)
    assert disruption.expired(units, now=NOW, expire_after={"web": None}) == ()


def test_an_expired_unit_is_replaced_first_then_drained_once_the_replacement_is_ready() -> None:
    snapshot = world(2, pods_per={0: 1, 1: 1}, target=2)
    old = replace(snapshot.instances[0], created=ago(10_000))
    snapshot = replace(snapshot, instances=(old, snapshot.instances[1]))
    expiring = policy(expire_after=5000.0)
    d = decide(snapshot, expiring, NOW)
    assert started(d) == [("s00", "expired")]
    assert "UNIT_EXPIRED" in tokens(d) and d.scale_downs == ()  # stays in service meanwhile
    assert fields(d, "s00")["disruption"] == "expired"
    snapshot = apply(snapshot, d)
    # out of coverage: acquire's diff sees one unit, and launches its replacement
    assert units_of(snapshot.instances, ()) == {"web": {"p-spot": 1}}
    d = decide(snapshot, expiring, NOW + timedelta(seconds=30))
    assert d.scale_downs == () and "REPLACEMENT_READY" not in tokens(d)
    # the replacement s02 (launched after the disruption started) turns up Ready: now the
    # old unit is cordoned and drained
    new = make_instance("s02", created=-5)
    snapshot = replace(snapshot, servers=(*snapshot.servers, make_server("s02")),
                       instances=(*snapshot.instances, new),
                       k8s_nodes=(*snapshot.k8s_nodes,
                                  replace(make_node(new.name, sid="s02"), allocatable=ALLOC)))
    d = decide(snapshot, expiring, NOW + timedelta(seconds=60))
    [ready] = [e for e in d.events if e.token == "REPLACEMENT_READY"]
    assert (ready.detail["old"], ready.detail["new"]) == ("s00", "s02")
    [down] = d.scale_downs
    assert (down.instance, down.reason) == ("s00", DisruptionReason.EXPIRED)


def replacing_world(rows: dict[str, dict[str, Any]], targets: dict[str, int]) -> Snapshot:
    """Ready units of web (and their servers and Nodes), each row's fields replaced."""
    insts = tuple(replace(make_instance(sid, pool=f.get("pool", "p-spot")), **{
        k: v for k, v in f.items() if k != "pool"}) for sid, f in rows.items())
    nodes = tuple(replace(make_node(i.name, sid=i.id, pool=i.pool or ""), allocatable=ALLOC)
                  for i in insts)
    return snap(servers=tuple(make_server(i.id, pool=i.pool or "") for i in insts),
                instances=insts, k8s_nodes=nodes, targets={"web": targets})


def test_replacement_ready_names_the_unit_launched_for_it_not_an_older_one_of_another_pool(
) -> None:
    # s01 is an old unit of another pool that came back Ready a moment ago; s03 was launched
    # after s00's disruption started: s03 is its replacement
    snapshot = replacing_world({
        "s00": {"disruption": "expired", "disruption_at": ago(100), "created": ago(9000)},
        "s01": {"pool": "p-spot2", "created": ago(5000), "ready_at": ago(10)},
        "s02": {"created": ago(5000)},
        "s03": {"created": ago(50), "ready_at": ago(20)}}, {"p-spot": 2, "p-spot2": 1})
    d = decide(snapshot, policy(), NOW)
    [ready] = [e for e in d.events if e.token == "REPLACEMENT_READY"]
    assert (ready.detail["old"], ready.detail["new"]) == ("s00", "s03")


def test_a_replacement_is_never_credited_twice_across_passes() -> None:
    # s00 retired at an earlier pass (draining) with s03 as its replacement; s04, disrupted
    # just after it, leaves now on surplus: no unit was launched for it, none is named
    snapshot = replacing_world({
        "s00": {"status": "draining", "disruption": "expired", "disruption_at": ago(100)},
        "s01": {"created": ago(5000)}, "s02": {"created": ago(5000)},
        "s03": {"created": ago(50), "ready_at": ago(20)},
        "s04": {"disruption": "expired", "disruption_at": ago(90), "created": ago(5000)}},
        {"p-spot": 3})
    d = decide(snapshot, policy(), NOW)
    [ready] = [e for e in d.events if e.token == "REPLACEMENT_READY"]
    assert (ready.detail["old"], ready.detail["new"]) == ("s04", None)


def test_replacements_match_in_the_order_disruptions_started_own_pool_first() -> None:
    def unit(sid: str, pool: str, created: float, since: float | None = None) -> InstanceRecord:
        return replace(make_instance(sid, pool=pool, created=created),
                       disruption="drifted" if since is not None else None,
                       disruption_at=ago(since) if since is not None else None)

    old = [unit("a", "p1", 9000, since=100), unit("b", "p2", 9000, since=100),
           unit("c", "p1", 9000, since=10)]
    fresh = [unit("n1", "p2", 80), unit("n2", "p1", 60), unit("n3", "p1", 5000)]
    assert disruption.replacements(old, fresh) == {"a": "n2", "b": "n1", "c": None}


# -- repair --------------------------------------------------------------------------------------

def sick_world(n: int, sick: dict[int, float], target: int) -> Snapshot:
    base = world(n, pods_per={}, target=target)
    insts = tuple(replace(i, unhealthy_since=ago(sick[k]) if k in sick else None)
                  for k, i in enumerate(base.instances))
    nodes = tuple(replace(node, ready=k not in sick) for k, node in enumerate(base.k8s_nodes))
    return replace(base, instances=insts, k8s_nodes=nodes)


def test_a_node_turning_not_ready_is_marked_unhealthy_and_back_when_ready() -> None:
    base = world(2, pods_per={}, target=2)
    nodes = (replace(base.k8s_nodes[0], ready=False), base.k8s_nodes[1])
    d = decide(replace(base, k8s_nodes=nodes), policy(), NOW)
    assert fields(d, "s00")["unhealthy_since"] == ago(0)
    healed = replace(base, instances=(replace(base.instances[0], unhealthy_since=ago(5)),
                                      base.instances[1]))
    assert fields(decide(healed, policy(), NOW), "s00")["unhealthy_since"] is None


def test_an_unhealthy_unit_is_repaired_after_repair_after_replaced_first() -> None:
    snapshot = sick_world(10, {3: 700}, target=10)
    d = decide(snapshot, policy(repair_after=600.0), NOW)
    assert started(d) == [("s03", "unhealthy")] and "UNIT_UNHEALTHY" in tokens(d)
    assert d.deletions == ()  # replaced first
    d = decide(sick_world(10, {3: 500}, target=10), policy(repair_after=600.0), NOW)
    assert started(d) == []  # not unhealthy for long enough
    # its replacement Ready: the dead unit is deleted with its Node (no drain)
    snapshot = apply(snapshot, decide(snapshot, policy(repair_after=600.0), NOW))
    new = make_instance("s10")
    snapshot = replace(snapshot, servers=(*snapshot.servers, make_server("s10")),
                       instances=(*snapshot.instances, new),
                       k8s_nodes=(*snapshot.k8s_nodes, make_node(new.name, sid="s10")))
    d = decide(snapshot, policy(repair_after=600.0), NOW + timedelta(seconds=60))
    [gone] = d.deletions
    assert (gone.instance, gone.node) == ("s03", "sco-web-s03")
    assert "REPLACEMENT_READY" in tokens(d)


def test_a_pool_with_too_many_unhealthy_units_is_excluded_not_repaired() -> None:
    snapshot = sick_world(10, {1: 700, 2: 700, 3: 700}, target=10)  # 3 of 10 > 20 %
    d = decide(snapshot, policy(repair_after=600.0), NOW)
    assert started(d) == []
    [pool] = [e for e in d.events if e.token == "POOL_UNHEALTHY"]
    assert (pool.detail["pool"], pool.detail["unhealthy"], pool.detail["units"]) == (
        "p-spot", 3, 10)
    [ex] = d.exclusions
    assert ex.pool == "p-spot" and ex.reason.startswith("POOL_UNHEALTHY")
    # two of ten (20 %) is within the limit: both repaired
    d = decide(sick_world(10, {1: 700, 2: 700}, target=10), policy(repair_after=600.0), NOW)
    assert sorted(started(d)) == [("s01", "unhealthy"), ("s02", "unhealthy")]


def test_slurm_down_or_not_responding_is_unhealthy_powered_down_is_not() -> None:
    from scoctl.core.model import SlurmNode
    from scoctl.core.reconcile import slurm_unhealthy

    def node(state: str, *flags: str) -> SlurmNode:
        return SlurmNode(name="n1", state=state, cpus=4, memory_mb=8192,
                         flags=frozenset(flags))

    assert slurm_unhealthy(node("down"))
    assert slurm_unhealthy(node("idle", "NOT_RESPONDING"))
    assert not slurm_unhealthy(node("idle", "POWERED_DOWN"))
    assert not slurm_unhealthy(node("allocated"))


# -- blocks --------------------------------------------------------------------------------------

def test_disruption_blocked_is_written_once_per_change_from_allowed_to_blocked() -> None:
    snapshot = world(4, pods_per={}, target=0, idle=700)
    none = policy(budgets=(Budget(Units.count(0)),))
    d = decide(snapshot, none, NOW)
    assert tokens(d).count("DISRUPTION_BLOCKED") == 1
    assert d.blocks == (DisruptionBlock("web", "empty", 0, None),)
    d2 = decide(apply(snapshot, d), none, NOW)
    assert "DISRUPTION_BLOCKED" not in tokens(d2) and d2.block_workloads == ()
    # allowed again: the block is cleared; blocked once more later: announced again
    d3 = decide(apply(snapshot, d), policy(), NOW)
    assert d3.blocks == () and d3.block_workloads == ("web",)
    d4 = decide(replace(snapshot, blocks=d3.blocks), none, NOW)
    assert tokens(d4).count("DISRUPTION_BLOCKED") == 1


def test_a_noticed_unit_counts_against_a_budget_naming_no_reason() -> None:
    snapshot = world(4, pods_per={}, target=0, idle=700)
    noticed = replace(snapshot.instances[0], status="noticed")
    snapshot = replace(snapshot, instances=(noticed, *snapshot.instances[1:]))
    one = policy(budgets=(Budget(Units.count(1)),))
    assert started(decide(snapshot, one, NOW)) == []


def test_in_flight_of_ignores_deleted_rows() -> None:
    rows = [replace(make_instance("a"), disruption="empty", disruption_at=ago(1)),
            replace(make_instance("b", status="deleted"), disruption="empty",
                    disruption_at=ago(1))]
    assert [d.server_id for d in disruption.in_flight_of(rows)] == ["a"]


def test_status_counts_allowed_and_in_flight_per_reason() -> None:
    rows: list[InstanceRecord] = [make_instance(f"u{i}") for i in range(9)]
    rows.append(replace(make_instance("d"), status="draining", disruption="empty",
                        disruption_at=ago(5)))
    out = {r.reason: r for r in disruption.status(
        ["web"], instances=rows, budgets_of={"web": (Budget(Units.count(2)),)}, now=NOW)}
    assert (out[DisruptionReason.EMPTY].allowed, out[DisruptionReason.EMPTY].in_flight) == (1, 1)
    assert out[DisruptionReason.NOTICED].allowed is None
