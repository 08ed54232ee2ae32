"""The reconcile stage (placement steps 12-14, DD-0018 teardown): fleet truth into the state.

read: per region, the servers tagged ``sco:managed`` (ERROR ones, and tracked ones the list
misses, read by id: list views may omit faults), the Kubernetes nodes and the pods on them, the
Slurm nodes, the state's instances and launch intents, the plan targets · decide:
`scoctl.core.reconcile.decide` (pure) · record: the decision in one transaction (adoptions,
state changes, exclusions, events, workloads to re-plan) · act: deletes and scale-downs through
the region's token budget, each outcome recorded as it lands; then the teardown of failed
deployment / inference workloads through the watch stage's one teardown path.

Slurm power saving meets the fleet here too: `power_resume` turns a ResumeProgram hostlist into
a claim for those nodes, `power_release` hands nodes back (SuspendProgram, ResumeFailProgram, a
failed launch) so their servers get deleted and their demand leaves the claim.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.core.model import InstanceRecord, PlanWorkloadRecord
from scoctl.core.reconcile import (
    LIVE,
    MANAGED_TAG,
    SLURM_POWERED_OFF,
    Decision,
    Deletion,
    Policy,
    ScaleDown,
    Snapshot,
    decide,
    slurm_idle,
)
from scoctl.errors import ApiError, ScoctlError
from scoctl.stages.join_tokens import prune_or_report
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster, PodInfo
    from scoctl.core.model import ServerInfo, SlurmNode

log = logging.getLogger(__name__)

POWER_DOWN = "POWER_DOWN_FORCE"


@dataclass(frozen=True)
class RegionOutcome:
    """What reconcile decided and did in one region."""

    region: str
    decision: Decision
    deleted: tuple[str, ...] = ()
    scaled_down: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # scale-downs called off: the node got work meanwhile
    errors: tuple[str, ...] = ()
    servers: tuple[ServerInfo, ...] = ()  # the listing it read (the notice stage reads it too)


@dataclass(frozen=True)
class ReconcileResult:
    regions: tuple[RegionOutcome, ...]
    torn_down: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    dry_run: bool = False
    seconds: float = 0.0
    calls: Mapping[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """True when this pass changed the state or the world."""
        return any(not r.decision.empty for r in self.regions) or bool(self.torn_down)


def policy_of(config: Config) -> Policy:
    """The reconciler's knobs from the config."""
    t = config.timeouts
    return Policy(launch_timeout=t.launch, registration_timeout=t.registration,
                  idle_timeout=t.idle, negative_cache=t.negative_cache,
                  orphan_grace=t.orphan_grace, gc_orphans=config.gc_orphans,
                  disruption_budget=config.disruption_budget)


def uses_kubernetes(config: Config) -> bool:
    """Kubernetes is in play when a workload comes from it or a kubeconfig is configured."""
    return (config.kubernetes.kubeconfig is not None
            or any(w.source == "k8s" for w in config.workloads))


def uses_slurm(config: Config) -> bool:
    """Slurm is in play when a workload comes from it or CLOUD partitions are configured."""
    return (bool(config.slurm.cloud_partitions) or config.slurm.rest_url is not None
            or any(w.source == "slurm" for w in config.workloads))


def busy_pods(pods: Iterable[PodInfo], nodes: set[str]) -> dict[str, int]:
    """Pods that make a node busy, per node: not DaemonSet, mirror or finished pods."""
    out: dict[str, int] = {}
    for pod in pods:
        if pod.node_name not in nodes or pod.phase in ("Succeeded", "Failed"):
            continue
        if any(o.kind in ("DaemonSet", "Node") for o in pod.owners):
            continue
        if "kubernetes.io/config.mirror" in pod.annotations:
            continue
        out[pod.node_name] = out.get(pod.node_name, 0) + 1
    return out


def _targets(plans: Mapping[str, PlanWorkloadRecord]) -> dict[str, dict[str, int]]:
    return {name: {u.pool: u.units for u in plan.pools} for name, plan in plans.items()}


def _known_workloads(store: Store, config: Config, planned: Iterable[str]) -> frozenset[str]:
    names = {w.slug for w in store.workloads()} | {c.workload for c in store.claims()}
    names |= {w.name for w in config.workloads} | set(planned)
    return frozenset(names)


class _Region:
    """One region's read → decide → record → act."""

    def __init__(self, config: Config, store: Store, clock: Clock, region: Region, cloud: Cloud,
                 cluster: Cluster | None, scheduler: BatchScheduler | None, dry_run: bool,
                 count: Callable[[str], None]) -> None:
        self.config, self.store, self.clock, self.region = config, store, clock, region
        self.cloud, self.cluster, self.scheduler = cloud, cluster, scheduler
        self.dry_run = dry_run
        self.count = count
        self.errors: list[str] = []

    def _note(self, what: str, exc: BaseException) -> None:
        self.errors.append(f"{self.region.name}: {what}: {exc}")
        log.warning("reconcile %s: %s: %s", self.region.name, what, exc)

    # -- read ------------------------------------------------------------------------------

    def servers(self, tracked: Sequence[InstanceRecord]) -> list[ServerInfo]:
        listed = {s.id: s for s in self.cloud.servers(tags=[MANAGED_TAG])}
        self.count("read")
        for server in list(listed.values()):
            if server.status.upper() == "ERROR" and server.fault_message is None:
                detail = self.cloud.server(server.id)  # list views may omit the fault
                self.count("read")
                if detail is not None:
                    listed[server.id] = detail
        for inst in tracked:
            if inst.id in listed or inst.status not in LIVE | {"draining", "deleting", "error"}:
                continue
            detail = self.cloud.server(inst.id)  # before calling it gone, ask for it by id
            self.count("read")
            if detail is not None and MANAGED_TAG in detail.tags:
                listed[detail.id] = detail
        return list(listed.values())

    def snapshot(self) -> Snapshot:
        store, config = self.store, self.config
        tracked = list(store.instances(region=self.region.name))
        servers = self.servers(tracked)  # a Nova failure ends this region's pass (raised)
        k8s_nodes = None
        busy: dict[str, int] = {}
        if self.cluster is not None:
            try:
                k8s_nodes = tuple(self.cluster.nodes())
                names = {i.name for i in tracked} | {s.name for s in servers}
                busy = busy_pods(self.cluster.pods(), names)
            except ApiError as exc:
                k8s_nodes = None
                self._note("Kubernetes nodes unreadable (nothing turns ready or idle)", exc)
        slurm_nodes = None
        if self.scheduler is not None:
            try:
                slurm_nodes = tuple(self.scheduler.nodes())
            except ApiError as exc:
                self._note("Slurm nodes unreadable (nothing turns ready or idle)", exc)
        plans = store.plans()
        return Snapshot(
            region=self.region.name, servers=tuple(servers), instances=tuple(tracked),
            launches=tuple(launch for launch in store.launches()
                           if launch.region == self.region.name),
            k8s_nodes=k8s_nodes, busy_pods=busy, slurm_nodes=slurm_nodes,
            suspended=store.suspended_nodes(), targets=_targets(plans),
            workloads=_known_workloads(store, config, plans),
            tiers={p.name: p.tier for p in config.pools},
            orphans_seen=store.orphans_seen(self.region.name))

    # -- record ----------------------------------------------------------------------------

    def record(self, decision: Decision) -> None:
        store = self.store
        with store.transaction():
            for inst in decision.new_instances:
                store.upsert_instance(inst)
            for update in decision.updates:
                store.update_instance(update.id, **update.fields)
            for launch in decision.launch_updates:
                store.update_launch(launch.launch_id, status=launch.status, error=launch.error)
            for ex in decision.exclusions:
                store.exclude(ex.pool, ex.reason, ex.until)
            for event in decision.events:
                store.append_event(event.workload, event.token, event.level, None,
                                   dict(event.detail))
            if decision.dirty:
                by_reason: dict[str, set[str]] = {}
                for name, reason in decision.dirty.items():
                    by_reason.setdefault(reason, set()).add(name)
                for reason, names in sorted(by_reason.items()):
                    store.mark_dirty(names, reason)
            if store.orphans_seen(self.region.name) != dict(decision.orphans_seen):
                store.save_orphans_seen(self.region.name, decision.orphans_seen)

    # -- act -------------------------------------------------------------------------------

    def delete_server(self, server_id: str, instance: str | None, reason: str,
                      workload: str | None, name: str) -> bool:
        try:
            self.cloud.delete(server_id)
            self.count("delete")
        except ApiError as exc:
            self.count("delete_error")
            self._note(f"delete {name}", exc)
            return False
        if instance is None:
            self.store.append_event(workload, "INSTANCE_DELETED", "info", None,
                                    {"server": server_id, "name": name, "reason": reason})
            return True
        self.store.update_instance(instance, status="deleting")
        try:
            after = self.cloud.server(server_id)
            self.count("read")
        except ApiError:
            return True  # the next pass confirms it
        if after is None or after.status.upper() == "DELETED":
            self.confirm_deleted(instance, reason)
        return True

    def confirm_deleted(self, instance: str, reason: str) -> None:
        inst = self.store.instance(instance)
        if inst is None:
            return
        with self.store.transaction():
            self.store.update_instance(instance, status="deleted")
            self.store.append_event(inst.workload, "INSTANCE_DELETED", "info", None,
                                    {"server": inst.id, "name": inst.name, "pool": inst.pool,
                                     "reason": reason})
            if inst.node_name:
                self.store.clear_suspended([inst.node_name])

    def power_down(self, node: str, reason: str) -> None:
        if self.scheduler is None:
            return
        try:
            self.scheduler.update_node(node, state=POWER_DOWN, reason=reason)
        except ApiError as exc:
            self._note(f"power down Slurm node {node}", exc)
        power_release(self.store, [node], reason, suspend=False)

    def deletion(self, d: Deletion) -> bool:
        if d.node and self.cluster is not None:
            try:
                self.cluster.delete_node(d.node)
            except ApiError as exc:
                self._note(f"delete node {d.node}", exc)
        done = True
        if d.server_id:
            done = self.delete_server(d.server_id, d.instance, d.reason, d.workload, d.name)
        if d.slurm_node:
            self.power_down(d.slurm_node, f"scoctl: {d.reason}")
        return done

    def scale_down(self, s: ScaleDown) -> str:
        """cordon → check idle again → drain → delete Node → delete server; 'kept' if busy."""
        if s.slurm_node:
            return self._scale_down_slurm(s)
        if self.cluster is not None and s.node:
            try:
                self.cluster.cordon(s.node)
                busy = busy_pods(self.cluster.pods_on_node(s.node), {s.node})
                if busy.get(s.node, 0):
                    self.cluster.uncordon(s.node)
                    self.store.update_instance(s.instance, status="ready", idle_since=None)
                    self.store.append_event(s.workload, "SCALE_DOWN_CANCELLED", "info", None,
                                            {"server": s.server_id, "name": s.name,
                                             "reason": "pods landed on the node"})
                    return "kept"
                self.cluster.drain(s.node)
                self.cluster.delete_node(s.node)
            except ApiError as exc:
                self._note(f"scale-down of {s.name}", exc)
                return "error"
        ok = self.delete_server(s.server_id, s.instance, "scale-down: idle and not in the plan",
                                s.workload, s.name)
        return "deleted" if ok else "error"

    def _scale_down_slurm(self, s: ScaleDown) -> str:
        assert s.slurm_node is not None
        if self.scheduler is not None:
            try:
                fresh = {n.name: n for n in self.scheduler.nodes()}
            except ApiError as exc:
                self._note(f"scale-down of {s.name}", exc)
                return "error"
            node = fresh.get(s.slurm_node)
            if not slurm_idle(node):
                self.store.update_instance(s.instance, status="ready", idle_since=None)
                return "kept"
            # a node Slurm powered down itself needs no POWER_DOWN_FORCE (that would run
            # SuspendProgram again and block the node's resume for SuspendTimeout)
            if node is not None and not node.flags & SLURM_POWERED_OFF:
                try:
                    self.scheduler.update_node(s.slurm_node, state=POWER_DOWN,
                                               reason="scoctl: scale-down")
                except ApiError as exc:
                    self._note(f"power down Slurm node {s.slurm_node}", exc)
                    return "error"
            power_release(self.store, [s.slurm_node], "scale-down", suspend=False)
        ok = self.delete_server(s.server_id, s.instance, "scale-down: idle and not in the plan",
                                s.workload, s.name)
        return "deleted" if ok else "error"

    def run(self) -> RegionOutcome:
        snapshot = self.snapshot()
        decision = decide(snapshot, policy_of(self.config), self.clock.now())
        if self.dry_run:
            return RegionOutcome(self.region.name, decision, errors=tuple(self.errors),
                                 servers=snapshot.servers)
        self.record(decision)
        deleted: list[str] = []
        for d in decision.deletions:
            if self.deletion(d) and d.server_id:
                deleted.append(d.name)
        scaled: list[str] = []
        kept: list[str] = []
        for s in decision.scale_downs:
            outcome = self.scale_down(s)
            (scaled if outcome == "deleted" else kept if outcome == "kept" else []).append(s.name)
        return RegionOutcome(self.region.name, decision, tuple(deleted), tuple(scaled),
                             tuple(kept), tuple(self.errors), servers=snapshot.servers)


def run_reconcile(config: Config, store: Store, clock: Clock, *, region: str | None = None,
                  dry_run: bool = False, teardown: bool = True,
                  clouds: Mapping[str, Cloud] | None = None,
                  connect: Callable[[Config, Region], Cloud] | None = None,
                  cluster: Cluster | None = None, scheduler: BatchScheduler | None = None,
                  discover: bool = True) -> ReconcileResult:
    """Reconcile every region (or `region`) and tear down failed workloads.

    Clouds come from `clouds` (by region name), else `connect(config, region)`, else the
    config's clouds.yaml entry with the region's token budget. With `discover`, a Kubernetes
    cluster and Slurm not passed in are built from the config when it uses them.

    A region whose Nova cannot be read is skipped and reported in `errors`; the other regions
    and the teardown still run. API failures never raise: the caller picks the exit code from
    `errors`. ConfigError (an unusable clouds.yaml entry) does raise.
    """
    started = time.perf_counter()
    regions = [config.region(region)] if region else list(config.regions)
    calls: dict[str, int] = {}
    errors: list[str] = []
    owned: list[Any] = []
    if discover:
        from scoctl.adapters.factory import cluster_for, scheduler_for

        if cluster is None and uses_kubernetes(config):
            try:
                cluster = cluster_for(config)
                owned.append(cluster)
            except ScoctlError as exc:
                errors.append(f"kubernetes: {exc}")
        if scheduler is None and uses_slurm(config):
            scheduler = scheduler_for(config)
    if connect is None:
        def connect(config: Config, reg: Region) -> Cloud:
            from scoctl.adapters.factory import cloud_for
            from scoctl.host.budget import budget_for

            return cloud_for(config, reg, budget=budget_for(config, reg))

    outcomes: list[RegionOutcome] = []
    try:
        for reg in regions:
            def count(outcome: str, _region: str = reg.name) -> None:
                key = f"{_region}:{outcome}"
                calls[key] = calls.get(key, 0) + 1

            try:
                cloud = (clouds or {}).get(reg.name) or connect(config, reg)
                worker = _Region(config, store, clock, reg, cloud, cluster, scheduler, dry_run,
                                 count)
                outcome = worker.run()
            except ApiError as exc:
                count("error")
                errors.append(f"{reg.name}: Nova: {exc}")
                continue
            outcomes.append(outcome)
            errors.extend(outcome.errors)
        errors.extend(prune_or_report(store, cluster, clock, dry_run=dry_run))  # join tokens
        torn: tuple[str, ...] = ()
        if teardown and not dry_run:
            torn = _teardown(config, store, cluster, errors)
    finally:
        for item in owned:
            item.close()
    return ReconcileResult(regions=tuple(outcomes), torn_down=torn if not dry_run else (),
                           errors=tuple(errors), dry_run=dry_run,
                           seconds=time.perf_counter() - started, calls=calls)


def _teardown(config: Config, store: Store, cluster: Cluster | None,
              errors: list[str]) -> tuple[str, ...]:
    """Failed deployment / inference workloads through the watch stage's one teardown path.

    A workload is done once a ``TEARDOWN`` event without failures follows its failure (watch
    may have written it already); one with failures is retried on the next pass.
    """
    if cluster is None:
        return ()
    from scoctl.stages.teardown import TEARDOWN_TOKEN, TORN_DOWN_KINDS, teardown_workload

    done: list[str] = []
    for row in store.workloads():
        if row.status != "failed" or row.kind not in TORN_DOWN_KINDS or row.source != "k8s":
            continue
        previous = [e for e in store.events(workload=row.slug, since=row.updated)
                    if e.token == TEARDOWN_TOKEN]
        if any(not e.detail.get("failed") for e in previous):
            continue
        result = teardown_workload(store, cluster, row,
                                   workload_label=config.kubernetes.workload_label)
        if result.errors:
            errors.append(f"teardown of {row.slug}: {'; '.join(result.errors)}")
        else:
            done.append(row.slug)
    return tuple(sorted(done))


# -- Slurm power saving ---------------------------------------------------------------------


def node_shape(node: SlurmNode, config: Config) -> dict[str, int]:
    """A Slurm node's shape as a claim counts it: cpu millicores, memory bytes, GPUs."""
    gpu_resource = config.slurm_gpu_resource
    shape = {"cpu": node.cpus * 1000, "memory": node.memory_mb * 2**20}
    gpus = node.gpus(gres_map=config.slurm.gres_map, gpu_resource=gpu_resource)
    if gpus:
        shape[gpu_resource] = gpus
    return shape


def _claim_for(store: Store, workload: str, nodes: Sequence[str],
               shapes: Mapping[str, Mapping[str, int]], contract: str, tolerates: bool) -> bool:
    requests: dict[str, int] = {}
    largest: dict[str, int] = {}
    for name in nodes:
        for res, amount in shapes.get(name, {}).items():
            requests[res] = requests.get(res, 0) + amount
            largest[res] = max(largest.get(res, 0), amount)
    _, changed = store.put_claim(workload, contract=contract, requests=requests,
                                 largest_pod=largest, pods=len(nodes), source="slurm",
                                 tolerates_reclaimable=tolerates, nodes=list(nodes))
    return changed


def power_resume(config: Config, store: Store, scheduler: BatchScheduler,
                 names: Sequence[str], *, workload: str | None = None,
                 jobs: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Slurm asked to resume `names`: add them to their workloads' claims (one server per node
    name follows from plan and acquire). Returns the nodes added per workload.

    The workload is `workload`, else the one tracking a job of the resume file that runs on
    the node (`jobs[node] = job id`), else the config's Slurm workload for the node's
    partition, else ``slurm-<partition>``.
    """
    known = {n.name: n for n in scheduler.nodes()}
    shapes = store.node_shapes()
    by_workload: dict[str, list[str]] = {}
    for name in names:
        node = known.get(name)
        if node is None:
            log.warning("slurm resume: unknown node %s", name)
            continue
        shapes[name] = node_shape(node, config)
        target = workload
        job = (jobs or {}).get(name)
        if target is None and job:
            row = store.workload_by_job(job)
            target = row.slug if row else None
        if target is None:
            for spec in config.workloads:
                if spec.source == "slurm" and spec.partition in node.partitions:
                    target = spec.name
                    break
        if target is None:
            target = f"slurm-{node.partitions[0] if node.partitions else 'cloud'}"
        by_workload.setdefault(target, []).append(name)
    with store.transaction():
        store.save_node_shapes({name: shapes[name] for name in names if name in known})
        store.clear_suspended(names)
        for slug, added in sorted(by_workload.items()):
            wanted = config.workload(slug)
            old = store.claim(slug)
            nodes = sorted(set(old.nodes if old else ()) | set(added))
            _claim_for(store, slug, nodes, shapes, wanted.contract if wanted else
                       (old.contract if old else "T1"),
                       wanted.tolerates_reclaimable if wanted else True)
            store.append_event(slug, "SLURM_NODES_RESUME", "info", None,
                               {"nodes": ",".join(sorted(added))})
    return by_workload


def power_release(store: Store, names: Iterable[str], reason: str, *,
                  suspend: bool = True) -> dict[str, list[str]]:
    """Slurm handed `names` back (suspended, or a resume that failed): drop them from their
    claims and, with `suspend`, mark them so the next reconcile deletes their servers.
    Returns the nodes dropped per workload."""
    wanted = set(names)
    shapes = store.node_shapes()
    dropped: dict[str, list[str]] = {}
    with store.transaction():
        for claim in store.claims():
            gone = sorted(set(claim.nodes) & wanted)
            if not gone:
                continue
            keep = sorted(set(claim.nodes) - wanted)
            _claim_for(store, claim.workload, keep, shapes, claim.contract,
                       claim.tolerates_reclaimable)
            dropped[claim.workload] = gone
            store.append_event(claim.workload, "SLURM_NODES_RELEASED", "info", None,
                               {"nodes": ",".join(gone), "reason": reason})
        if suspend:
            instances = store.instances()
            live = {i.node_name for i in instances if i.node_name and i.status in LIVE}
            store.mark_suspended(wanted & live)
            now = store.now()
            for inst in instances:
                if inst.node_name in wanted and inst.status in LIVE and not inst.idle_since:
                    store.update_instance(inst.id, idle_since=now)
    return dropped
