"""The reclaim-notice decision (design: Notices), pure: each rule as a sentence, plus properties."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from scoctl.clock import rfc3339
from scoctl.core.diff import launches_needed
from scoctl.core.fleet import units_of
from scoctl.core.model import (
    Contract,
    InstanceRecord,
    NodeInfo,
    NoticedRecord,
    NoticeRecord,
    OwnerRef,
    PodInfo,
    ServerInfo,
    SlurmNode,
)
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.core.notice import (
    NoticeDecision,
    NoticePolicy,
    NoticeSnapshot,
    decide,
    held_ids,
    node_of,
    parse_notice_time,
)
from scoctl.core.planner import plan_all
from tests.core.builders_planner import make_claim, make_flavor, make_pool

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGION = "region-a"
POLICY = NoticePolicy(drain_margin=15.0, cooldown=180.0)


def at(seconds: float) -> str:
    """`seconds` after NOW (before it when negative)."""
    return rfc3339(NOW + timedelta(seconds=seconds))


def server(sid: str, *, deadline: float | None = None, status: str = "ACTIVE",
           raw: str | None = None) -> ServerInfo:
    metadata = {META_RECLAIM_AT: raw if raw is not None else at(deadline)} \
        if deadline is not None or raw is not None else {}
    return ServerInfo(id=sid, name=f"n-{sid}", status=status,
                      tags=frozenset({"sco:managed", "sco:workload=web"}), metadata=metadata)


def instance(sid: str, *, status: str = "ready", pool: str = "p0", workload: str = "web",
             created: float = -600, ready: float | None = -500,
             node_name: str | None = None) -> InstanceRecord:
    return InstanceRecord(
        id=sid, name=f"n-{sid}", region=REGION, workload=workload, pool=pool, generation=1,
        launch_id="l-1", status=status, created=at(created), updated=at(created),
        active_at=at(created + 30), ready_at=at(ready) if ready is not None else None,
        node_name=node_name)


def node(sid: str, *, cordoned: bool = False) -> NodeInfo:
    return NodeInfo(name=f"n-{sid}", ready=True, unschedulable=cordoned,
                    provider_id=f"openstack:///{sid}")


def pod(name: str, node_name: str, *, daemonset: bool = False) -> PodInfo:
    owner = OwnerRef("DaemonSet" if daemonset else "ReplicaSet", "rs", controller=True)
    return PodInfo(name=name, namespace="shop", owners=(owner,), node_name=node_name,
                   phase="Running")


def snap(**kwargs: Any) -> NoticeSnapshot:
    base: dict[str, Any] = {"region": REGION, "k8s_nodes": ()}
    base.update(kwargs)
    return NoticeSnapshot(**base)


def opened(sid: str, *, deadline: float, noticed: float = -10, cordoned: bool = True,
           source: str = "metadata", **changes: Any) -> NoticedRecord:
    row = NoticedRecord(server_id=sid, region=REGION, name=f"n-{sid}", workload="web",
                        pool="p0", deadline=at(deadline), noticed_at=at(noticed),
                        source=source, cordoned=cordoned)  # type: ignore[arg-type]
    return replace(row, **changes)


def tokens(decision: NoticeDecision) -> list[str]:
    return [e.token for e in decision.events]


def event(decision: NoticeDecision, token: str) -> dict[str, Any]:
    return dict(next(e for e in decision.events if e.token == token).detail)


# -- sources ------------------------------------------------------------------------------------

def test_a_metadata_notice_marks_the_instance_noticed_excludes_the_pool_and_replans() -> None:
    d = decide(snap(servers=(server("s1", deadline=60),), instances=(instance("s1"),),
                    k8s_nodes=(node("s1"),), pods={"n-s1": (pod("a", "n-s1"),)}), POLICY, NOW)
    assert d.statuses == {"s1": "noticed"}
    assert d.dirty == {"web": "reclaim notice"}
    [row] = d.rows
    assert (row.server_id, row.deadline, row.noticed_at, row.source, row.cordoned) == (
        "s1", at(60), at(0), "metadata", True)
    noticed = event(d, "RECLAIM_NOTICED")
    assert noticed["lead_seconds"] == 60 and noticed["pool"] == "p0"
    assert noticed["deadline"] == at(60)
    [ex] = d.exclusions
    assert (ex.pool, ex.until) == ("p0", at(60 + 180))
    # cordoned at once; no eviction yet: the replacement is launched later in this pass
    [drain] = d.drains
    assert drain.cordon and not drain.evict and not drain.delete
    assert not d.removals


def test_a_notice_time_needs_its_offset() -> None:
    assert parse_notice_time("2026-03-01T12:01:00+01:00") == NOW - timedelta(minutes=59)
    for bad in ("2026-03-01T12:01:00", "tomorrow", ""):
        with pytest.raises(ValueError):
            parse_notice_time(bad)


def test_unparseable_metadata_is_a_warning_and_no_notice() -> None:
    d = decide(snap(servers=(server("s1", raw="soon"),), instances=(instance("s1"),)),
               POLICY, NOW)
    assert d.empty and "is not an RFC 3339 time" in d.warnings[0]


def test_a_pool_notice_covers_every_server_of_the_pool_and_no_other() -> None:
    pool_notice = NoticeRecord(kind="pool", target="p0", region=REGION, deadline=at(120),
                               received=at(0), reason="lease ends")
    d = decide(snap(servers=(server("s1"), server("s2"), server("s3")),
                    instances=(instance("s1"), instance("s2"), instance("s3", pool="p1")),
                    announced=(pool_notice,)), POLICY, NOW)
    assert d.statuses == {"s1": "noticed", "s2": "noticed"}
    assert {r.source for r in d.rows} == {"pool"}
    assert event(d, "RECLAIM_NOTICED")["reason"] == "lease ends"


def test_the_earliest_notice_wins_and_a_later_one_moves_the_deadline() -> None:
    early = NoticeRecord(kind="server", target="s1", region=REGION, deadline=at(30),
                         received=at(0))
    d = decide(snap(servers=(server("s1", deadline=90),), instances=(instance("s1"),),
                    announced=(early,)), POLICY, NOW)
    assert d.rows[0].deadline == at(30) and d.rows[0].source == "server"
    moved = decide(snap(servers=(server("s1", deadline=90),),
                        instances=(instance("s1", status="noticed"),),
                        noticed=(opened("s1", deadline=45),),
                        k8s_nodes=(node("s1", cordoned=True),),
                        pods={"n-s1": (pod("a", "n-s1"),)}), POLICY, NOW)
    assert "RECLAIM_NOTICE_MOVED" in tokens(moved) and moved.rows[0].deadline == at(90)
    assert moved.exclusions[0].until == at(90 + 180)


def test_a_notice_for_a_server_scoctl_does_not_manage_is_ignored_with_a_warning() -> None:
    stray = NoticeRecord(kind="server", target="not-ours", region=REGION, deadline=at(60),
                         received=at(0))
    d = decide(snap(servers=(server("s1"),), instances=(instance("s1"),), announced=(stray,)),
               POLICY, NOW)
    assert d.expired == (("server", "not-ours"),) and tokens(d) == ["NOTICE_IGNORED"]
    assert not d.statuses


# -- the drain ----------------------------------------------------------------------------------

def drain_world(deadline: float, *, booting: bool, pods: int = 2,
                cordoned: bool = True) -> NoticeSnapshot:
    others = (instance("r1", status="building", pool="p1", created=-5, ready=None),) \
        if booting else (instance("r1", pool="p1", created=-5, ready=-1),)
    return snap(servers=(server("s1", deadline=deadline), server("r1")),
                instances=(instance("s1", status="noticed"), *others),
                noticed=(opened("s1", deadline=deadline),),
                exclusions={"p0": at(deadline + 180)},
                k8s_nodes=(node("s1", cordoned=cordoned),),
                pods={"n-s1": tuple(pod(f"p{i}", "n-s1") for i in range(pods))
                      + (pod("ds", "n-s1", daemonset=True),)})


def test_the_drain_waits_for_the_replacement_then_evicts_through_the_eviction_api() -> None:
    waiting = decide(drain_world(60, booting=True), POLICY, NOW)
    assert waiting.empty  # cordoned already, replacement booting: nothing to do yet
    ready = decide(drain_world(60, booting=False), POLICY, NOW)
    [drain] = ready.drains
    assert [p.name for p in drain.evict] == ["p0", "p1"] and not drain.delete  # no DaemonSet


def test_a_replacement_that_takes_too_long_no_longer_holds_the_drain_back() -> None:
    d = decide(drain_world(29, booting=True), POLICY, NOW)  # past deadline − 2·margin
    assert [p.name for p in d.drains[0].evict] == ["p0", "p1"]


def test_evictions_give_way_to_deletions_at_deadline_minus_the_drain_margin() -> None:
    d = decide(drain_world(15, booting=False), POLICY, NOW)
    [drain] = d.drains
    assert not drain.evict and [p.name for p in drain.delete] == ["p0", "p1"]
    assert "DRAIN_FORCED" in tokens(d) and d.rows[0].drain_forced
    assert not d.removals  # pods still there and the deadline not reached


def test_an_empty_node_is_deleted_before_the_deadline() -> None:
    d = decide(drain_world(50, booting=False, pods=0), POLICY, NOW)
    [removal] = d.removals
    assert (removal.server_id, removal.why, removal.node) == ("s1", "empty", "n-s1")
    assert removal.row.outcome == "reclaimed"
    detail = removal.event.detail
    assert removal.event.token == "INSTANCE_RECLAIMED" and detail["noticed"] is True
    assert detail["lead_seconds"] == 60 and detail["before_deadline_seconds"] == 50


def test_a_busy_node_is_deleted_at_the_deadline_whatever_is_left() -> None:
    d = decide(drain_world(0, booting=False), POLICY, NOW)
    [removal] = d.removals
    assert removal.why == "deadline" and removal.event.detail["left"] == 2


def test_a_notice_in_the_past_is_acted_on_at_once() -> None:
    d = decide(snap(servers=(server("s1", deadline=-5),), instances=(instance("s1"),),
                    k8s_nodes=(node("s1"),), pods={"n-s1": (pod("a", "n-s1"),)}), POLICY, NOW)
    assert event(d, "RECLAIM_NOTICED")["lead_seconds"] == 0
    assert [p.name for p in d.drains[0].delete] == ["a"]
    assert d.removals[0].why == "deadline"


def test_a_booting_noticed_instance_holds_no_work_and_goes_at_once() -> None:
    d = decide(snap(servers=(server("s1", deadline=60),),
                    instances=(instance("s1", status="building", ready=None),)), POLICY, NOW)
    assert d.statuses == {"s1": "noticed"} and d.removals[0].why == "empty"


def test_a_withdrawn_notice_uncordons_and_puts_the_instance_back_in_service() -> None:
    d = decide(snap(servers=(server("s1"),), instances=(instance("s1", status="noticed"),),
                    noticed=(opened("s1", deadline=40),), k8s_nodes=(node("s1", cordoned=True),)),
               POLICY, NOW)
    assert d.statuses == {"s1": "ready"} and tokens(d) == ["RECLAIM_WITHDRAWN"]
    assert d.rows[0].outcome == "withdrawn"
    [drain] = d.drains
    assert drain.uncordon and not drain.cordon


def test_a_server_the_provider_took_first_ends_the_notice() -> None:
    d = decide(snap(servers=(), instances=(instance("s1", status="noticed"),),
                    noticed=(opened("s1", deadline=0),)), POLICY, NOW)
    assert d.statuses == {"s1": "deleted"} and d.rows[0].outcome == "gone"
    assert event(d, "INSTANCE_RECLAIMED")["by"] == "provider"
    assert not d.removals


def test_a_second_pass_over_the_same_world_changes_nothing() -> None:
    first = decide(drain_world(60, booting=True, cordoned=False), POLICY, NOW)
    assert first.drains[0].cordon and first.rows == ()  # the row says cordoned already
    assert decide(drain_world(60, booting=True), POLICY, NOW).empty


def test_the_replacement_turning_ready_is_recorded_once() -> None:
    world = drain_world(60, booting=False)
    d = decide(world, POLICY, NOW)
    ready = event(d, "REPLACEMENT_READY")
    assert ready["replacement"] == "r1" and ready["seconds"] == 9 and ready["before_deadline"]
    done = replace(world, noticed=(replace(world.noticed[0],
                                           replacement_ready_at=at(-1)),))
    assert "REPLACEMENT_READY" not in tokens(decide(done, POLICY, NOW))


# -- Slurm --------------------------------------------------------------------------------------

def slurm_world(deadline: float, jobs: tuple[int, ...], *, drained: bool,
                noticed: NoticedRecord | None = None) -> NoticeSnapshot:
    flags = frozenset({"CLOUD", "DRAIN"}) if drained else frozenset({"CLOUD"})
    return snap(servers=(server("s1", deadline=deadline),),
                instances=(instance("s1", status="noticed" if noticed else "ready",
                                    node_name="cloud-1"),),
                noticed=(noticed,) if noticed else (),
                exclusions={"p0": at(deadline + 180)} if noticed else {},
                slurm_nodes=(SlurmNode(name="cloud-1", cpus=4, memory_mb=8000,
                                       state="allocated" if jobs else "idle", flags=flags),),
                slurm_jobs={"cloud-1": jobs} if jobs else {})


def test_a_noticed_slurm_node_is_drained_with_the_reason_and_dropped_from_its_claim() -> None:
    d = decide(slurm_world(60, (7,), drained=False), POLICY, NOW)
    [step] = d.slurm
    assert step.drain_reason == f"sco: reclaim at {at(60)}" and step.release
    assert not step.requeue and not d.removals and not d.drains


def test_slurm_jobs_are_requeued_at_deadline_minus_margin_and_the_empty_node_removed() -> None:
    row = opened("s1", deadline=10, cordoned=False)
    d = decide(slurm_world(10, (7, 8), drained=True, noticed=row), POLICY, NOW)
    assert d.slurm[0].requeue == (7, 8) and not d.slurm[0].drain_reason
    assert d.rows[0].requeued and "SLURM_JOBS_REQUEUED" in tokens(d)
    after = decide(slurm_world(10, (), drained=True, noticed=replace(row, requeued=True)),
                   POLICY, NOW)
    [removal] = after.removals
    assert removal.why == "empty" and removal.slurm_node == "cloud-1" and removal.node is None


# -- properties ---------------------------------------------------------------------------------

POOLS = [make_pool(f"p{i}", flavor="m4", group=f"g{i % 2}") for i in range(4)]
FLAVORS = {"m4": make_flavor("m4", 4, 16, reserve=False)}
OPEN = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[NoticeSnapshot, datetime]:
    """Up to six units of `web` over four pools, some under a notice (metadata or pool),
    some already noticed, each node with a few pods, a replacement booting or not."""
    count = draw(st.integers(1, 6))
    servers, instances, rows, nodes, pods = [], [], [], [], {}
    for i in range(count):
        sid = f"s{i}"
        pool = f"p{draw(st.integers(0, 3))}"
        deadline = draw(st.one_of(st.none(), st.integers(-60, 180)))
        state = draw(st.sampled_from(("ready", "ready", "building", "noticed")))
        if state == "noticed" and deadline is None:
            state = "ready"
        servers.append(server(sid, deadline=deadline))
        instances.append(instance(sid, status=state, pool=pool,
                                  ready=None if state == "building" else -500))
        if state == "noticed":
            assert deadline is not None
            rows.append(replace(opened(sid, deadline=deadline, noticed=-30,
                                       cordoned=draw(st.booleans())), pool=pool))
        if state != "building":
            nodes.append(node(sid, cordoned=draw(st.booleans())))
            pods[f"n-{sid}"] = tuple(pod(f"{sid}-{j}", f"n-{sid}")
                                     for j in range(draw(st.integers(0, 3))))
    announced = ()
    if draw(st.booleans()):
        announced = (NoticeRecord(kind="pool", target=f"p{draw(st.integers(0, 3))}",
                                  region=REGION, deadline=at(draw(st.integers(-30, 120))),
                                  received=at(-60)),)
    booting = frozenset({"web"}) if draw(st.booleans()) else frozenset()
    world = snap(servers=tuple(servers), instances=tuple(instances), noticed=tuple(rows),
                 announced=announced, booting_launches=booting, k8s_nodes=tuple(nodes),
                 pods=pods)
    return world, NOW + timedelta(seconds=draw(st.integers(0, 90)))


def _left(world: NoticeSnapshot, sid: str) -> int:
    return len([p for p in world.pods.get(f"n-{sid}", ()) if p.owners[0].kind != "DaemonSet"])


@given(worlds())
def test_property_never_deleted_before_the_deadline_unless_empty(
        drawn: tuple[NoticeSnapshot, datetime]) -> None:
    world, now = drawn
    d = decide(world, POLICY, now)
    assume(d.removals)  # a world where nothing is removed proves nothing here
    for removal in d.removals:
        deadline = datetime.fromisoformat(removal.row.deadline.replace("Z", "+00:00"))
        assert now >= deadline or _left(world, removal.server_id) == 0, removal


@given(worlds())
def test_property_no_new_unit_is_ever_placed_in_a_noticed_pool(
        drawn: tuple[NoticeSnapshot, datetime]) -> None:
    world, now = drawn
    d = decide(world, POLICY, now)
    in_force = dict(world.exclusions) | {e.pool: e.until for e in d.exclusions}
    noticed_pools = {i.pool for i in world.instances
                     if d.statuses.get(i.id, i.status) == "noticed" and i.pool}
    assume(noticed_pools)  # else there is no pool to keep out
    for pool in noticed_pools:  # excluded until past the deadline plus the cool-down
        deadlines = [r.deadline for r in (*world.noticed, *d.rows)
                     if r.pool == pool and r.outcome is None]
        assert pool in in_force and all(in_force[pool] >= dl for dl in deadlines)
    plans = plan_all([make_claim("web", pods=8, cpu=1, memory_gi=1)], {"T1": OPEN}, POOLS,
                     FLAVORS, {p.name: 0.5 for p in POOLS}, {}, excluded=set(in_force))
    assert not {p.pool for p in plans["web"].pools if p.units} & noticed_pools


@given(worlds())
def test_property_a_new_notice_requests_its_replacement_in_the_same_pass(
        drawn: tuple[NoticeSnapshot, datetime]) -> None:
    world, now = drawn
    d = decide(world, POLICY, now)
    fresh = [r for r in d.rows if r.noticed_at == rfc3339(now)]
    assume(fresh)  # the property is about a notice newly in force
    assert d.dirty.get("web") == "reclaim notice"
    # the re-plan the same pass makes: noticed units are no longer live, their pools excluded
    after = [replace(i, status=d.statuses.get(i.id, i.status)) for i in world.instances]
    current = units_of(after, ())
    excluded = {e.pool for e in d.exclusions} | set(world.exclusions)
    assume(not excluded >= {p.name for p in POOLS})  # every pool going: nothing can replace it
    claim = make_claim("web", pods=4 * len(world.instances), cpu=1, memory_gi=1)
    plans = plan_all([claim], {"T1": OPEN}, POOLS, FLAVORS, {p.name: 0.5 for p in POOLS},
                     current, excluded=excluded)
    targets = {"web": plans["web"].units()}
    launches = launches_needed(targets, current, {p.name: p for p in POOLS}, {"web": 1})
    assert launches and not {launch.pool for launch in launches} & excluded


@given(worlds())
def test_property_held_instances_are_exactly_those_the_decision_touches(
        drawn: tuple[NoticeSnapshot, datetime]) -> None:
    world, now = drawn
    d = decide(world, POLICY, now)
    touched = {r.server_id for r in d.rows} | {x.server_id for x in d.drains} | {
        x.server_id for x in d.removals}
    assume(touched)  # an untouched world makes the inclusion hold trivially
    assert touched <= held_ids(world, now)


def test_nodes_are_matched_by_identity_never_by_name_alone() -> None:
    inst = instance("s1")
    same_name = NodeInfo(name="n-s1", ready=True)
    labelled = NodeInfo(name="10.0.0.7", ready=True, labels={"sco/instance": "s1"})
    regional = NodeInfo(name="n-s1.novalocal", ready=True,
                        provider_id="openstack://region-a/s1")
    assert node_of(inst, [same_name]) is None
    assert node_of(inst, [same_name, labelled]) is labelled
    assert node_of(inst, [regional]) is regional
