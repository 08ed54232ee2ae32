"""The notice stage's guards: a removal powers down no Slurm node name another live instance
serves (reconcile's rule), and the pods a removal's own pass drained reach its record.

The drain runs the real `kubernetes` client against the emulator and the real openstacksdk
against the Nova emulator (`tests/stages/test_notice.py`'s world); the Slurm case uses the
in-package `FakeCloud` and a recording fake of scoctl's own `BatchScheduler`, as
`tests/stages/test_notice_slurm.py` does.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.core.demand import MIRROR_ANNOTATION, must_move
from scoctl.core.model import InstanceRecord, OwnerRef, PodInfo
from scoctl.errors import TemporaryError
from scoctl.stages.notice import run_notices
from scoctl.stages.reconcile import busy_pods
from scoctl.state import Store, open_store
from tests.stages.test_acquire import make_config
from tests.stages.test_notice import (  # noqa: F401
    PODS,
    World,
    node_name,
    on_node,
    serving,
    world,
)
from tests.stages.test_notice_slurm import NODE, RecordingSlurm, noticed_slurm_node
from tests.stages.test_reconcile import emulator_cloud  # noqa: F401


def test_a_removal_leaves_the_slurm_node_a_replacement_now_serves_powered_up(
        tmp_path: Path) -> None:
    config = make_config(tmp_path)
    clock = FixedClock()
    cloud, slurm = FakeCloud(), RecordingSlurm()
    slurm.running = []  # empty: the first pass removes the server
    deadline = rfc3339(clock.now() + timedelta(seconds=60))
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        server = noticed_slurm_node(cloud, store, deadline)
        # a replacement launched under the same node name, still booting
        store.upsert_instance(InstanceRecord(
            id="s-replacement", name=NODE, region="region-a", workload="hpc",
            pool="small.b", generation=1, launch_id="l-2", status="building",
            created=store.now(), updated=store.now(), node_name=NODE))
        result = run_notices(config, store, clock, clouds={"region-a": cloud},
                             scheduler=slurm)  # type: ignore[arg-type]
        assert not result.errors, result.errors
        assert cloud.server(server.id) is None  # removed: nothing ran there
        removed = store.instance(server.id)
        assert removed is not None and removed.status == "deleting"
        assert not [c for c in slurm.calls if "POWER_DOWN_FORCE" in c], slurm.calls


def test_a_deadline_pass_that_deletes_pods_and_removes_records_its_pods_deleted(
        world: World) -> None:  # noqa: F811
    inst = serving(world)
    world.notice(inst.id, 40)
    world.run()
    assert len(on_node(world, node_name(inst))) == PODS
    world.clock.advance(41)  # past the deadline: delete the pods, remove the server
    notice = world.run().step("notice")
    assert notice is not None and notice.result.regions[0].pods_deleted == PODS
    assert inst.name in notice.result.regions[0].deleted
    reclaimed = world.detail("INSTANCE_RECLAIMED")
    assert reclaimed["why"] == "deadline" and reclaimed["pods_deleted"] == PODS
    [row] = [r for r in world.store.noticed(every=True) if r.server_id == inst.id]
    assert row.outcome == "reclaimed" and row.pods_deleted == PODS and row.evicted == 0


def test_a_later_shorter_exclusion_never_cuts_a_notices_exclusion_short(
        store: Store, clock: FixedClock, tmp_path: Path) -> None:
    """On both backends: the notice excludes its pool until deadline + cool-down; a capacity
    fault's shorter exclusion recorded after it leaves it whole; a longer one replaces it."""
    config = make_config(tmp_path)
    deadline = rfc3339(clock.now() + timedelta(seconds=60))
    cloud = FakeCloud()
    server = noticed_slurm_node(cloud, store, deadline)
    result = run_notices(config, store, clock, clouds={"region-a": cloud},
                         scheduler=RecordingSlurm())  # type: ignore[arg-type]
    assert not result.errors and store.instance(server.id) is not None
    cooldown = config.timeouts.negative_cache
    notice_until = rfc3339(clock.now() + timedelta(seconds=60 + cooldown))
    [held] = store.exclusions()
    assert (held.pool, held.until) == ("small.a", notice_until)
    store.exclude("small.a", "NoValidHost", rfc3339(clock.now() + timedelta(seconds=30)))
    assert [(e.pool, e.reason, e.until) for e in store.exclusions()] == [
        ("small.a", held.reason, notice_until)]
    longer = rfc3339(clock.now() + timedelta(seconds=60 + cooldown + 1))
    store.exclude("small.a", "NoValidHost", longer)
    assert [(e.pool, e.reason, e.until) for e in store.exclusions()] == [
        ("small.a", "NoValidHost", longer)]
    store.exclude("small.b", "NoValidHost", longer)  # another pool: its own row
    assert [e.pool for e in store.exclusions()] == ["small.a", "small.b"]


def test_reconciles_busy_count_is_the_drains_rule() -> None:
    """Reconcile calls a node idle by the same rule the notice drain moves pods by."""
    pods = [PodInfo(name=f"p{i}", namespace="shop", phase=phase,
                    node_name="n-0" if phase in ("Running", "Succeeded") else "n-1",
                    owners=(OwnerRef(kind, "o", controller=True),),
                    annotations={MIRROR_ANNOTATION: "x"} if mirror else {})
            for i, (phase, kind, mirror) in enumerate(
                (p, k, m) for p in ("Running", "Pending", "Succeeded", "Failed")
                for k in ("ReplicaSet", "DaemonSet", "Node") for m in (False, True))]
    busy = busy_pods(pods, {"n-0", "n-1"})
    assert busy == {n: sum(1 for p in pods if p.node_name == n and must_move(p))
                    for n in ("n-0", "n-1")}
    # one Running and one Pending pod, ReplicaSet-owned, not mirrored
    assert busy == {"n-0": 1, "n-1": 1}
    assert busy_pods(pods, {"n-0"}) == {"n-0": 1}


class _RefusingBudget:
    """A `Cluster` whose PodDisruptionBudgets refuse every eviction (429), for the drain's
    retry bound; only the calls a drain makes."""

    def __init__(self) -> None:
        self.evictions = 0

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        self.evictions += 1
        raise TemporaryError(f"Kubernetes API evict {namespace}/{name}: 429 budget")


def test_evictions_refused_on_many_nodes_wait_at_most_the_passs_retry_bound(
        tmp_path: Path) -> None:
    """Three noticed nodes held by their budgets: the region's pass waits six half-seconds in
    all (3 s), not six per node; every pod is tried at least once and left to the next pass."""
    from scoctl.core.notice import Drain, PodRef
    from scoctl.stages.notice import EVICTION_RETRIES, EVICTION_RETRY_S, _Region

    config = make_config(tmp_path)
    clock = FixedClock()
    cluster = _RefusingBudget()
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        worker = _Region(config, store, clock, config.regions[0], FakeCloud(),
                         cluster, None, None)  # type: ignore[arg-type]
        for n in range(3):
            pods = (PodRef("shop", f"p{n}-a"), PodRef("shop", f"p{n}-b"))
            assert worker.drain(Drain(f"s-{n}", f"node-{n}", evict=pods)) == (0, 0)
    assert clock.slept == [EVICTION_RETRY_S] * EVICTION_RETRIES
    assert worker.counts["refused"] == 6
    assert cluster.evictions >= 6  # each pod asked at least once


def test_a_region_reconcile_could_not_list_is_not_listed_again_by_the_notice_stage(
        tmp_path: Path) -> None:
    """Nova down for reconcile's listing: the notice stage, on that listing, does not call the
    same Nova again in the same pass (one outage, one failed call); it still takes in the
    spool."""
    from scoctl.core.model import Problem
    from scoctl.runner.compose import notices_and_release
    from scoctl.stages.reconcile import ReconcileResult

    config = make_config(tmp_path)
    cloud = FakeCloud()
    with open_store(tmp_path / "state.db", clock=FixedClock(), create=True) as store:
        down = Problem("nova", "region-a", "Nova", "down")
        failed = ReconcileResult(regions=(), problems=(down,))
        result = notices_and_release(config, store, FixedClock(), failed,
                                     clouds={"region-a": cloud})
    assert cloud.calls == [] and result.regions == () and not result.errors
