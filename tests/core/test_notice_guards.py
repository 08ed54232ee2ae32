"""Rules the reclaim-notice decision shares: the Slurm power-down rule
(`core.reconcile.slurm_power_down`) and which pods must move off a node
(`core.demand.must_move`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scoctl.clock import rfc3339
from scoctl.core.demand import MIRROR_ANNOTATION, is_node_bound, is_provisionable, must_move
from scoctl.core.model import (
    Condition,
    InstanceRecord,
    NoticedRecord,
    OwnerRef,
    PodInfo,
    ServerInfo,
    SlurmNode,
)
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.core.notice import NoticePolicy, NoticeSnapshot, decide, movable
from scoctl.core.reconcile import slurm_power_down

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REGION = "region-a"
POLICY = NoticePolicy(drain_margin=15.0, cooldown=180.0)
NODE = "cloud-1"


def at(seconds: float) -> str:
    return rfc3339(NOW + timedelta(seconds=seconds))


def instance(sid: str, status: str, node_name: str | None = NODE) -> InstanceRecord:
    return InstanceRecord(
        id=sid, name=NODE, region=REGION, workload="hpc", pool="p0", generation=1,
        launch_id=f"l-{sid}", status=status, created=at(-600), updated=at(-600),
        ready_at=at(-500) if status == "ready" else None, node_name=node_name)


def slurm_node(*flags: str) -> SlurmNode:
    return SlurmNode(name=NODE, cpus=4, memory_mb=8000, state="idle",
                     flags=frozenset({"CLOUD", "DRAIN", *flags}))


def noticed_world(replacement: str | None, *, server_gone: bool = False) -> NoticeSnapshot:
    """s1 noticed on Slurm node `NODE`, its deadline passed; s2 (status `replacement`, when
    given) a later instance under the same node name."""
    row = NoticedRecord(server_id="s1", region=REGION, name=NODE, workload="hpc", pool="p0",
                        deadline=at(-5), noticed_at=at(-60), source="metadata", requeued=True)
    servers = [] if server_gone else [ServerInfo(
        id="s1", name=NODE, status="ACTIVE", tags=frozenset({"sco:managed"}),
        metadata={META_RECLAIM_AT: at(-5)})]
    instances = [instance("s1", "noticed")]
    if replacement is not None:
        instances.append(instance("s2", replacement))
        servers.append(ServerInfo(id="s2", name=NODE, status="BUILD",
                                  tags=frozenset({"sco:managed"})))
    return NoticeSnapshot(region=REGION, servers=tuple(servers), instances=tuple(instances),
                          noticed=(row,), exclusions={"p0": at(175)}, k8s_nodes=None,
                          slurm_nodes=(slurm_node(),), slurm_jobs={})


def test_the_rule_skips_a_node_powered_off_unread_or_served_by_another_live_instance() -> None:
    nodes = (slurm_node(),)
    assert slurm_power_down(NODE, "s1", nodes, [instance("s1", "noticed")]) == NODE
    for flag in ("POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"):
        assert slurm_power_down(NODE, "s1", (slurm_node(flag),), []) is None
    assert slurm_power_down(NODE, "s1", None, []) is None
    assert slurm_power_down(None, "s1", nodes, []) is None
    for live in ("requested", "building", "active", "ready"):
        assert slurm_power_down(NODE, "s1", nodes, [instance("s2", live)]) is None
    # an instance that no longer serves the name, or serves another one, does not hold it
    for gone in ("deleting", "deleted", "error", "noticed"):
        assert slurm_power_down(NODE, "s1", nodes, [instance("s2", gone)]) == NODE
    assert slurm_power_down(NODE, "s1", nodes, [instance("s2", "ready", "cloud-2")]) == NODE


def test_a_removal_does_not_power_down_a_node_name_a_replacement_now_serves() -> None:
    [alone] = decide(noticed_world(None), POLICY, NOW).removals
    assert alone.server_id == "s1" and alone.slurm_node == NODE
    for live in ("requested", "building", "active", "ready"):
        [removal] = decide(noticed_world(live), POLICY, NOW).removals
        assert removal.server_id == "s1" and removal.why == "empty"
        assert removal.slurm_node is None


def test_a_server_the_provider_took_does_not_power_down_a_node_name_served_again() -> None:
    alone = decide(noticed_world(None, server_gone=True), POLICY, NOW)
    assert [(s.node, s.power_down) for s in alone.slurm] == [(NODE, True)]
    served = decide(noticed_world("building", server_gone=True), POLICY, NOW)
    assert not any(s.power_down for s in served.slurm)
    assert served.statuses["s1"] == "deleted"


def a_pod(phase: str = "Running", owner: str | None = "ReplicaSet", mirror: bool = False,
          node_name: str = "n-1", unschedulable: bool = False) -> PodInfo:
    return PodInfo(
        name="p", namespace="shop", node_name=node_name, phase=phase,
        owners=(OwnerRef(owner, "o", controller=True),) if owner else (),
        annotations={MIRROR_ANNOTATION: "x"} if mirror else {},
        conditions=(Condition("PodScheduled", "False", "Unschedulable"),) if unschedulable
        else ())


def test_a_pod_must_move_unless_finished_a_daemonset_or_a_static_pod() -> None:
    assert must_move(a_pod()) and must_move(a_pod(owner=None))
    assert must_move(a_pod("Pending")) and must_move(a_pod("Unknown"))
    for phase in ("Succeeded", "Failed"):
        assert not must_move(a_pod(phase))
    for bound in (a_pod(owner="DaemonSet"), a_pod(owner="Node"), a_pod(mirror=True)):
        assert is_node_bound(bound) and not must_move(bound)


@given(st.lists(st.tuples(st.sampled_from(("Pending", "Running", "Succeeded", "Failed")),
                          st.sampled_from((None, "ReplicaSet", "Job", "DaemonSet", "Node")),
                          st.booleans()), max_size=8))
def test_the_drain_and_the_demand_share_the_one_rule(
        specs: list[tuple[str, str | None, bool]]) -> None:
    pods = [a_pod(phase, owner, mirror) for phase, owner, mirror in specs]
    assert movable(pods) == [p for p in pods if must_move(p)]
    for phase, owner, mirror in specs:
        pending = a_pod(phase, owner, mirror, node_name="", unschedulable=True)
        assert is_provisionable(pending) == (not is_node_bound(pending))
