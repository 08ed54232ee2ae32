"""The reconcile stage (placement steps 12-14, DD-0018 teardown): fleet truth into the state.

read: per region, the servers tagged ``sco:managed`` (ERROR ones, and tracked ones the list
misses, read by id: list views may omit faults), the Kubernetes nodes and the pods on them, the
Slurm nodes, the state's instances and launch intents, the plan targets · decide:
`scoctl.core.reconcile.decide` (pure) · record: the decision in one transaction (adoptions,
state changes, exclusions, events, workloads to re-plan) · act: the addresses of Slurm nodes
whose servers turned ACTIVE, then deletes and scale-downs through the region's token budget,
each outcome recorded as it lands; then the teardown of failed deployment / inference
workloads through the watch stage's one teardown path.

Slurm CLOUD nodes this pass powers down (a failed launch, a scale-down) are returned in
`released`: their demand leaves the claims when the composer hands them to the Slurm power stage
(`scoctl.runner.compose.reconcile_and_release`). Reconcile calls no other stage.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum, auto
from typing import TYPE_CHECKING, Any

from scoctl.clock import Clock
from scoctl.config.schema import Config, Region
from scoctl.core import pause
from scoctl.core.clockstep import ages_now
from scoctl.core.demand import must_move
from scoctl.core.model import (
    GangRecord,
    InstanceRecord,
    InstanceUpdate,
    NewEvent,
    NodeRelease,
    PlanWorkloadRecord,
)
from scoctl.core.model.problems import Api, Problem
from scoctl.core.model.vocabulary import (
    TAG_MANAGED,
    DisruptionReason,
    InstanceStatus,
    PauseScope,
    ServerStatus,
    WorkloadStatus,
)
from scoctl.core.reconcile import (
    LIVE,
    SLURM_POWERED_OFF,
    Decision,
    Deletion,
    DriftView,
    LabelPatch,
    NodeAddress,
    Policy,
    ScaleDown,
    Snapshot,
    decide,
    slurm_idle,
)
from scoctl.core.slurm_power import POWER_DOWN
from scoctl.core.timefmt import rfc3339
from scoctl.errors import (
    ApiError,
    ConfigError,
    EvictionRefused,
    NotLeader,
    ScoctlError,
    StateUnavailable,
    StillTerminating,
)
from scoctl.host.clockstep import seen_steps
from scoctl.host.discovery import host_hints
from scoctl.services import controls
from scoctl.services import drift as drift_inputs
from scoctl.services.buffers import record_short
from scoctl.services.gangs import forget_gangs, gang_claims, record_gang, record_of
from scoctl.services.join_tokens import prune_or_report
from scoctl.services.leadership import FencedCloud
from scoctl.services.rebalance import planned_moves
from scoctl.state import Store
from scoctl.state.coordination import check_fence, intents_held

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import PodInfo, ServerInfo, SlurmNode

log = logging.getLogger(__name__)

SCALE_DOWN_REASON = "scale-down: idle and not in the plan"
# the disruptions whose scale-down is called off when work landed on the unit meanwhile
CALLED_OFF_WHEN_BUSY = frozenset({DisruptionReason.EMPTY})


class ScaleDownOutcome(Enum):
    """How one scale-down ended this pass."""

    DELETED = auto()  # the server is deleted (or being deleted)
    KEPT = auto()  # pods landed on it meanwhile: back in service
    WAITING = auto()  # its pods still terminate or budgets hold them: the next pass goes on
    FAILED = auto()  # a call failed (a problem says which): the next pass goes on


@dataclass(frozen=True)
class RegionOutcome:
    """What reconcile decided and did in one region."""

    region: str
    decision: Decision
    deleted: tuple[str, ...] = ()
    scaled_down: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()  # scale-downs called off: the node got work meanwhile
    problems: tuple[Problem, ...] = ()
    released: tuple[NodeRelease, ...] = ()  # Slurm nodes powered down: out of their claims
    servers: tuple[ServerInfo, ...] = ()  # the listing it read (the notice stage reads it too)


@dataclass(frozen=True)
class ReconcileResult:
    regions: tuple[RegionOutcome, ...]
    torn_down: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    dry_run: bool = False
    seconds: float = 0.0
    calls: Mapping[str, int] = field(default_factory=dict)
    pruned: Mapping[str, int] = field(default_factory=dict)  # rows per table (retention)
    # a region whose lease this runner lost mid-pass (the others were served): the composer
    # raises it once the rest is recorded
    refused: NotLeader | None = field(default=None, compare=False)

    @property
    def errors(self) -> tuple[str, ...]:
        """The problems, as a person reads them."""
        return tuple(str(p) for p in self.problems)

    @property
    def changed(self) -> bool:
        """True when this pass changed the state or the world."""
        return any(not r.decision.empty for r in self.regions) or bool(self.torn_down)

    @property
    def released(self) -> tuple[NodeRelease, ...]:
        """The Slurm nodes this pass powered down, whose demand leaves their claims."""
        return tuple(item for r in self.regions for item in r.released)


def policy_of(config: Config) -> Policy:
    """The reconciler's knobs from the config."""
    t = config.timeouts
    return Policy(launch_timeout=t.launch, launch_settle=t.launch_settle,
                  registration_timeout=t.registration,
                  idle_timeout=t.idle, negative_cache=t.negative_cache,
                  orphan_grace=t.orphan_grace, gc_orphans=config.gc_orphans,
                  budgets=config.disruption.budgets,
                  workload_budgets={w.name: w.disruption.budgets for w in config.workloads
                                    if w.disruption is not None},
                  disruption=config.disruption,
                  workload_disruption={w.name: w.disruption for w in config.workloads
                                       if w.disruption is not None})


def rate_horizon(config: Config) -> float:
    """How far back the budgets' rates look (seconds): the longest `rate.per` of any budget."""
    settings = [config.disruption, *(w.disruption for w in config.workloads if w.disruption)]
    return max([b.rate.per for s in settings for b in s.budgets if b.rate is not None],
               default=0.0)


def removal_reason(unit: ScaleDown) -> str:
    """What the deletion of a scaled-down unit records as its reason."""
    if unit.reason is DisruptionReason.EMPTY:
        return SCALE_DOWN_REASON
    return f"disruption: {unit.reason}"


def busy_pods(pods: Iterable[PodInfo], nodes: set[str]) -> dict[str, int]:
    """Pods that make a node busy (`core.demand.must_move`), per node."""
    out: dict[str, int] = {}
    for pod in pods:
        if pod.node_name in nodes and must_move(pod):
            out[pod.node_name] = out.get(pod.node_name, 0) + 1
    return out


def _targets(plans: Mapping[str, PlanWorkloadRecord]) -> dict[str, dict[str, int]]:
    return {name: {u.pool: u.units for u in plan.pools} for name, plan in plans.items()}


class _Region:
    """One region's read → decide → record → act."""

    def __init__(self, config: Config, store: Store, clock: Clock, region: Region, cloud: Cloud,
                 cluster: Cluster | None, scheduler: BatchScheduler | None, dry_run: bool,
                 count: Callable[[str], None],
                 hurry: Callable[[], bool] | None = None) -> None:
        self.config, self.store, self.clock, self.region = config, store, clock, region
        self.cloud, self.cluster, self.scheduler = cloud, cluster, scheduler
        self.dry_run = dry_run
        self.count = count
        self.hurry = hurry
        self.problems: list[Problem] = []
        self.released: list[NodeRelease] = []

    def _note(self, api: Api, what: str, exc: BaseException) -> None:
        self.problems.append(Problem.of(exc, api=api, region=self.region.name, what=what))
        log.warning("reconcile %s: %s: %s", self.region.name, what, exc)

    # -- read ------------------------------------------------------------------------------

    def servers(self, tracked: Sequence[InstanceRecord]) -> list[ServerInfo]:
        listed = {s.id: s for s in self.cloud.servers(tags=[TAG_MANAGED])}
        self.count("read")
        for server in list(listed.values()):
            if server.status == ServerStatus.ERROR and server.fault_message is None:
                detail = self.cloud.server(server.id)  # list views may omit the fault
                self.count("read")
                if detail is not None:
                    listed[server.id] = detail
        for inst in tracked:
            if inst.id in listed or inst.status not in LIVE | {
                    InstanceStatus.DRAINING, InstanceStatus.DELETING, InstanceStatus.ERROR}:
                continue
            detail = self.cloud.server(inst.id)  # before calling it gone, ask for it by id
            self.count("read")
            if detail is not None and TAG_MANAGED in detail.tags:
                listed[detail.id] = detail
        return list(listed.values())

    def snapshot(self) -> Snapshot:
        store, config = self.store, self.config
        tracked = list(store.instances(region=self.region.name))
        servers = self.servers(tracked)  # a Nova failure ends this region's pass (raised)
        k8s_nodes = None
        busy: dict[str, int] = {}
        on_nodes: dict[str, list[PodInfo]] = {}
        if self.cluster is not None:
            try:
                k8s_nodes = tuple(self.cluster.nodes())
                # by the Nodes' own names: the decision matches them to servers by identity
                names = {n.name for n in k8s_nodes}
                pods = list(self.cluster.pods())
                busy = busy_pods(pods, names)
                for pod in pods:  # what each node runs, for consolidation's fit
                    if pod.node_name in names:
                        on_nodes.setdefault(pod.node_name, []).append(pod)
            except ApiError as exc:
                k8s_nodes = None
                self._note("kubernetes",
                           "Kubernetes nodes unreadable (nothing turns ready or idle)", exc)
        slurm_nodes = None
        if self.scheduler is not None:
            try:
                slurm_nodes = tuple(self.scheduler.nodes())
            except ApiError as exc:
                self._note("slurm", "Slurm nodes unreadable (nothing turns ready or idle)", exc)
        plans = store.plans()
        since = rfc3339(self.clock.now() - timedelta(seconds=rate_horizon(config)))
        return Snapshot(
            region=self.region.name, servers=tuple(servers), instances=tuple(tracked),
            launches=tuple(launch for launch in store.launches()
                           if launch.region == self.region.name),
            k8s_nodes=k8s_nodes, busy_pods=busy, slurm_nodes=slurm_nodes,
            suspended=store.suspended_nodes(), targets=_targets(plans),
            tiers={p.name: p.tier for p in config.pools},
            orphans_seen=store.orphans_seen(self.region.name),
            intents_held=intents_held(store, self.region.name, self.clock.monotonic()),
            disrupted=tuple(store.disrupted(since)),
            pods={name: tuple(pods) for name, pods in on_nodes.items()},
            pools=frozenset(p.name for p in config.pools if p.region == self.region.name),
            excluded=frozenset(e.pool for e in store.exclusions()),
            blocks=tuple(store.disruption_blocks()),
            drift=self.drift_view(tracked),
            rebalance_moves=planned_moves(store.rebalances()),
            gangs=self.gangs(tracked, plans), gang_policy=config.gang.policy(),
            paused=self.paused())

    def paused(self) -> str:
        """What pauses voluntary disruptions now (`scoctl pause --disruptions`), or ""; a
        pause whose time is up is dropped here (`RESUMED`), unless this is a dry-run."""
        now = self.clock.now()
        held = (pause.active(self.store.pauses(), now) if self.dry_run
                else controls.lapse(self.store, now))
        found = held.get(PauseScope.DISRUPTIONS)
        return pause.describe(found) if found else ""

    def gangs(self, tracked: Sequence[InstanceRecord],
              plans: Mapping[str, PlanWorkloadRecord]) -> dict[str, GangRecord]:
        """The record of each gang claim this region serves: planned in its pools, or
        holding instances here (design: Gangs)."""
        claims = gang_claims(self.store)
        if not claims:
            return {}
        pools = {p.name for p in self.config.pools if p.region == self.region.name}
        here = {i.workload for i in tracked if i.workload}
        records = self.store.gangs()
        return {name: record_of(records, claim) for name, claim in claims.items()
                if name in here or (name in plans
                                    and {u.pool for u in plans[name].pools} & pools)}

    def drift_view(self, tracked: Sequence[InstanceRecord]) -> DriftView | None:
        """What drift compares against (design: Drift, `services.drift.view`); None (drift not
        checked this pass) when the region launches nothing or the template is unreadable."""
        if self.region.launch is None:
            return None
        try:
            template = self.config.user_data_template()
        except ConfigError as exc:
            self._note("scoctl", "user-data template unreadable (drift not checked)", exc)
            return None
        name = self.region.launch.image
        try:
            image = self.cloud.image_id(name)  # by id: an image uploaded again is a new spec
        except ConfigError as exc:  # Nova answered: the region lacks it (no outage)
            self._note("config", f"image {name!r} (regions[].launch.image): drift halted",
                       exc)
            return drift_inputs.view(self.config, self.store, self.region, tracked, template,
                                     unresolved_image=name)
        except ApiError as exc:
            self._note("nova", f"image {name!r} not resolved (drift not checked)", exc)
            return None
        if self.store.image_ids(self.region.name).get(name) != image:
            self.store.save_image_id(self.region.name, name, image)  # what `status` compares
        return drift_inputs.view(self.config, self.store, self.region, tracked, template, image)

    # -- record ----------------------------------------------------------------------------

    def record(self, decision: Decision) -> None:
        store = self.store
        with store.transaction():
            check_fence(store, self.region.name)  # what a deposed leader saw is not recorded
            for inst in decision.new_instances:
                store.upsert_instance(inst)
            for update in decision.updates:
                store.update_instance(update)
            for launch in decision.launch_updates:
                store.update_launch(launch.launch_id, status=launch.status, error=launch.error)
            for ex in decision.exclusions:
                store.exclude(ex.pool, ex.reason, ex.until)
            for event in decision.events:
                store.append_event(NewEvent(event.workload, event.token, event.level,
                                            dict(event.detail)))
            if decision.dirty:
                by_reason: dict[str, set[str]] = {}
                for name, reason in decision.dirty.items():
                    by_reason.setdefault(reason, set()).add(name)
                for reason, names in sorted(by_reason.items()):
                    store.mark_dirty(names, reason)
            if decision.block_workloads:
                store.save_disruption_blocks(decision.block_workloads, decision.blocks)
            if store.orphans_seen(self.region.name) != dict(decision.orphans_seen):
                store.save_orphans_seen(self.region.name, decision.orphans_seen)
            for gang in decision.gangs:  # before the deletes, as every record (design: Gangs)
                record_gang(store, gang, now=self.clock.now().timestamp(),
                            negative_cache=self.config.timeouts.negative_cache,
                            pools=self.config.pools, flavors=self.config.flavors)

    # -- act -------------------------------------------------------------------------------

    def delete_server(self, server_id: str, instance: str | None, reason: str,
                      workload: str | None, name: str) -> bool:
        try:
            self.cloud.delete(server_id)
            self.count("delete")
        except ApiError as exc:
            self.count("delete_error")
            self._note("nova", f"delete {name}", exc)
            return False
        with self.store.transaction():
            check_fence(self.store, self.region.name)  # a record after a call (design: Runners)
            if instance is None:
                self.store.append_event(NewEvent(workload, "INSTANCE_DELETED", "info", {
                    "server": server_id, "name": name, "reason": reason}))
                return True
            self.store.update_instance(InstanceUpdate(instance, status=InstanceStatus.DELETING))
        try:
            after = self.cloud.server(server_id)
            self.count("read")
        except ApiError:
            return True  # the next pass confirms it
        if after is None or after.status == ServerStatus.DELETED:
            self.confirm_deleted(instance, reason)
        return True

    def confirm_deleted(self, instance: str, reason: str) -> None:
        inst = self.store.instance(instance)
        if inst is None:
            return
        with self.store.transaction():
            self.store.update_instance(InstanceUpdate(instance, status=InstanceStatus.DELETED))
            self.store.append_event(NewEvent(inst.workload, "INSTANCE_DELETED", "info",
                                             {"server": inst.id, "name": inst.name,
                                              "pool": inst.pool, "reason": reason,
                                              **({"disruption": inst.disruption}
                                                 if inst.disruption else {})}))
            if inst.node_name:
                self.store.clear_suspended([inst.node_name])

    def power_down(self, node: str, reason: str) -> None:
        if self.scheduler is None:
            return
        try:
            self.scheduler.update_node(node, state=POWER_DOWN, reason=reason)
        except ApiError as exc:
            self._note("slurm", f"power down Slurm node {node}", exc)
        self.released.append(NodeRelease(node, reason))

    def set_address(self, target: NodeAddress) -> None:
        """Give a Slurm node its server's address (a failure leaves slurmctld to DNS, or to
        the address slurmd registers from with ``cloud_reg_addrs``)."""
        if self.scheduler is None:
            return
        try:
            self.scheduler.set_node_address(target.node, address=target.address,
                                            hostname=target.hostname)
        except ApiError as exc:
            self._note("slurm", f"set the address of Slurm node {target.node}", exc)

    def patch_labels(self, patch: LabelPatch) -> None:
        """Meta drift (design: Drift): the config's labels onto a Node in place."""
        if self.cluster is None:
            return
        try:
            self.cluster.label_node(patch.node, dict(patch.labels))
        except ApiError as exc:
            self._note("kubernetes", f"label node {patch.node}", exc)

    def deletion(self, removal: Deletion) -> bool:
        if removal.node and self.cluster is not None:
            try:
                self.cluster.delete_node(removal.node)
            except ApiError as exc:
                self._note("kubernetes", f"delete node {removal.node}", exc)
        done = True
        if removal.server_id:
            done = self.delete_server(removal.server_id, removal.instance, removal.reason,
                                      removal.workload, removal.name)
        if removal.slurm_node:
            self.power_down(removal.slurm_node, f"scoctl: {removal.reason}")
        return done

    def back_in_service(self, unit: ScaleDown) -> None:
        """A scale-down called off: the unit is ready again, its disruption ended (design:
        Disruption: no longer in flight)."""
        self.store.update_instance(InstanceUpdate(
            unit.instance, status=InstanceStatus.READY, idle_since=None, disruption=None))

    def scale_down(self, unit: ScaleDown) -> ScaleDownOutcome:
        """cordon → check idle again → drain → delete Node → delete server; KEPT if busy,
        WAITING while its evicted pods still terminate (`DRAIN_TIMED_OUT`) or disruption budgets
        still refuse their eviction (`DRAIN_BLOCKED`). An `underutilized` unit (design: Disruption,
        consolidation) is drained busy: its pods move to the workload's kept units through the
        Eviction API (PodDisruptionBudgets respected); an expired one, replaced already,
        too."""
        if unit.slurm_node:
            return self._scale_down_slurm(unit)
        if self.cluster is not None and unit.node:
            try:
                self.cluster.cordon(unit.node)
                # a pod already Terminating (an earlier pass's drain) is no new work: the
                # drain below waits for it
                busy = busy_pods([p for p in self.cluster.pods_on_node(unit.node)
                                  if not p.deleting], {unit.node})
                if busy.get(unit.node, 0) and unit.reason in CALLED_OFF_WHEN_BUSY:
                    self.cluster.uncordon(unit.node)
                    self.back_in_service(unit)
                    self.store.append_event(NewEvent(unit.workload, "SCALE_DOWN_CANCELLED", "info",
                                                     {"server": unit.server_id, "name": unit.name,
                                                      "reason": "pods landed on the node"}))
                    return ScaleDownOutcome.KEPT
                # evicted pods terminate for up to their grace period: the server is deleted
                # only once they are gone; new demand waiting ends the wait (`hurry`): the
                # unit stays draining and the next pass waits on, after the demand's launch
                timeout = self.config.timeouts.drain
                if self.hurry is None:  # no `until` then: a Cluster need not take one
                    self.cluster.drain(unit.node, timeout=timeout)
                else:
                    self.cluster.drain(unit.node, timeout=timeout, until=self.hurry)
                self.cluster.delete_node(unit.node)
            except EvictionRefused as exc:  # a PodDisruptionBudget holds pods: no outage, the
                # unit stays draining and the next pass evicts again
                log.info("reconcile %s: scale-down of %s: %s", self.region.name, unit.name, exc)
                self.store.append_event(NewEvent(unit.workload, "DRAIN_BLOCKED", "info", {
                    "server": unit.server_id, "name": unit.name, "node": unit.node,
                    "pods": list(exc.pods), "retry_after": exc.delay}))
                return ScaleDownOutcome.WAITING
            except StillTerminating as exc:  # the unit stays draining: the next pass waits on
                if exc.cut_short:  # not timed out: the pods may be within their grace period
                    log.info("reconcile %s: scale-down of %s: %s (the wait yields to new "
                             "demand)", self.region.name, unit.name, exc)
                    return ScaleDownOutcome.WAITING
                log.warning("reconcile %s: scale-down of %s: %s", self.region.name, unit.name,
                            exc)
                self.store.append_event(NewEvent(unit.workload, "DRAIN_TIMED_OUT", "warning", {
                    "server": unit.server_id, "name": unit.name, "node": unit.node,
                    "pods": list(exc.pods), "waited_seconds": round(exc.waited, 1)}))
                return ScaleDownOutcome.WAITING
            except ApiError as exc:
                self._note("kubernetes", f"scale-down of {unit.name}", exc)
                return ScaleDownOutcome.FAILED
        ok = self.delete_server(unit.server_id, unit.instance, removal_reason(unit),
                                unit.workload, unit.name)
        return ScaleDownOutcome.DELETED if ok else ScaleDownOutcome.FAILED

    def _scale_down_slurm(self, unit: ScaleDown) -> ScaleDownOutcome:
        assert unit.slurm_node is not None
        if self.scheduler is not None:
            try:
                fresh = {n.name: n for n in self.scheduler.nodes()}
            except ApiError as exc:
                self._note("slurm", f"scale-down of {unit.name}", exc)
                return ScaleDownOutcome.FAILED
            node = fresh.get(unit.slurm_node)
            if not slurm_idle(node):
                if unit.reason not in CALLED_OFF_WHEN_BUSY:
                    # drained (no new jobs): removed once its running jobs end
                    self._drain_slurm(unit.slurm_node, node, unit.reason)
                    return ScaleDownOutcome.WAITING
                self.back_in_service(unit)
                return ScaleDownOutcome.KEPT
            # a node Slurm powered down itself needs no POWER_DOWN_FORCE (that would run
            # SuspendProgram again and block the node's resume for SuspendTimeout)
            if node is not None and not node.flags & SLURM_POWERED_OFF:
                try:
                    self.scheduler.update_node(unit.slurm_node, state=POWER_DOWN,
                                               reason="scoctl: scale-down")
                except ApiError as exc:
                    self._note("slurm", f"power down Slurm node {unit.slurm_node}", exc)
                    return ScaleDownOutcome.FAILED
            self.released.append(NodeRelease(unit.slurm_node, "scale-down"))
        ok = self.delete_server(unit.server_id, unit.instance, removal_reason(unit),
                                unit.workload, unit.name)
        return ScaleDownOutcome.DELETED if ok else ScaleDownOutcome.FAILED

    def _drain_slurm(self, name: str, node: SlurmNode | None,
                     reason: DisruptionReason = DisruptionReason.UNDERUTILIZED) -> None:
        """Slurm consolidation and drift: DRAIN the node (no new jobs; the running ones
        finish); a drifted node's reason is ``sco: drifted`` (design: Drift)."""
        if self.scheduler is None or node is None or "DRAIN" in node.flags:
            return
        text = "sco: drifted" if reason is DisruptionReason.DRIFTED else f"scoctl: {reason}"
        try:
            self.scheduler.update_node(name, state="DRAIN", reason=text)
        except ApiError as exc:
            self._note("slurm", f"drain Slurm node {name}", exc)

    def run(self) -> RegionOutcome:
        snapshot = self.snapshot()
        # ages without the time of day's forward steps: a step never fires a timeout early
        steps = seen_steps(self.config.budget_dir, self.clock)
        decision = decide(snapshot, policy_of(self.config), ages_now(self.clock.now(), steps))
        if self.dry_run:
            return RegionOutcome(self.region.name, decision, problems=tuple(self.problems),
                                 servers=snapshot.servers)
        self.record(decision)
        for patch in decision.label_patches:
            self.patch_labels(patch)
        for target in decision.addresses:
            self.set_address(target)
        deleted: list[str] = []
        for removal in decision.deletions:
            if self.deletion(removal) and removal.server_id:
                deleted.append(removal.name)
        scaled: list[str] = []
        kept: list[str] = []
        for unit in decision.scale_downs:
            outcome = self.scale_down(unit)
            if outcome is ScaleDownOutcome.DELETED:
                scaled.append(unit.name)
            elif outcome is ScaleDownOutcome.KEPT:
                kept.append(unit.name)
        return RegionOutcome(self.region.name, decision, tuple(deleted), tuple(scaled),
                             tuple(kept), tuple(self.problems), tuple(self.released),
                             servers=snapshot.servers)


def run_reconcile(config: Config, store: Store, clock: Clock, *, region: str | None = None,
                  dry_run: bool = False, teardown: bool = True,
                  clouds: Mapping[str, Cloud] | None = None,
                  connect: Callable[[Config, Region], Cloud] | None = None,
                  cluster: Cluster | None = None, scheduler: BatchScheduler | None = None,
                  discover: bool = True,
                  leads: Callable[[str], bool] | None = None,
                  hurry: Callable[[], bool] | None = None) -> ReconcileResult:
    """Reconcile every region (or `region`) and tear down failed workloads.

    Clouds come from `clouds` (by region name), else `connect(config, region)`, else the
    config's clouds.yaml entry with the region's token budget. With `discover`, a Kubernetes
    cluster and Slurm not passed in are built from the config when it uses them.

    A region whose Nova cannot be read is skipped and reported in `errors`; the other regions
    and the teardown still run. API failures never raise: the caller picks the exit code from
    `errors`. ConfigError (an unusable clouds.yaml entry) does raise. With `leads`, regions
    this runner does not lead are left to their leader (design: Runners). With `hurry`, a
    scale-down's drain stops waiting for its pods once `hurry` answers True (the controller:
    new demand is waiting), leaving the unit draining for the next pass.
    """
    started = clock.monotonic()
    regions = [config.region(region)] if region else list(config.regions)
    regions = [r for r in regions if leads is None or dry_run or leads(r.name)]
    calls: dict[str, int] = {}
    problems: list[Problem] = []
    owned: list[Any] = []
    if discover:
        from scoctl.adapters.factory import cluster_for, scheduler_for

        sources = config.sources(host_hints(config))
        if cluster is None and "k8s" in sources:
            try:
                cluster = cluster_for(config)
                owned.append(cluster)
            except ScoctlError as exc:
                problems.append(Problem.of(exc, api="kubernetes"))
        if scheduler is None and "slurm" in sources:
            scheduler = scheduler_for(config)
    if connect is None:
        def connect(config: Config, reg: Region) -> Cloud:
            from scoctl.adapters.factory import cloud_for
            from scoctl.services.leadership import budget_for

            return cloud_for(config, reg, budget=budget_for(config, reg))

    outcomes: list[RegionOutcome] = []
    refused: NotLeader | None = None
    try:
        for reg in regions:
            def count(outcome: str, _region: str = reg.name) -> None:
                key = f"{_region}:{outcome}"
                calls[key] = calls.get(key, 0) + 1

            try:
                cloud = FencedCloud((clouds or {}).get(reg.name) or connect(config, reg),
                                    reg.name, store)
                worker = _Region(config, store, clock, reg, cloud, cluster, scheduler, dry_run,
                                 count, hurry)
                outcome = worker.run()
            except StateUnavailable:  # the state's outage, not Nova's: the stage ends
                raise
            except ApiError as exc:
                count("error")
                problems.append(Problem.of(exc, api="nova", region=reg.name, what="Nova"))
                continue
            except NotLeader as exc:  # deposed in this region: the others are still served
                refused = refused or exc
                problems.append(Problem.of(exc, api="state", region=reg.name))
                continue
            outcomes.append(outcome)
            problems.extend(outcome.problems)
        problems.extend(prune_or_report(store, cluster, clock, dry_run=dry_run))  # join tokens
        if not dry_run and outcomes:
            forget_gangs(store, gang_claims(store))  # gangs whose claim ended
        if not dry_run and outcomes:
            record_short(config, store, clock.now())  # buffers still unmet (design: Buffers)
        torn: tuple[str, ...] = ()
        if teardown and not dry_run:
            torn = _teardown(config, store, cluster, problems)
    finally:
        for item in owned:
            item.close()
    return ReconcileResult(regions=tuple(outcomes), torn_down=torn if not dry_run else (),
                           problems=tuple(problems), dry_run=dry_run,
                           seconds=clock.monotonic() - started, calls=calls,
                           refused=refused)


def _teardown(config: Config, store: Store, cluster: Cluster | None,
              problems: list[Problem]) -> tuple[str, ...]:
    """Failed deployment / inference workloads through the watch stage's one teardown path.

    A workload is done once a ``TEARDOWN`` event without failures follows its failure (watch
    may have written it already); one with failures is retried on the next pass.
    """
    if cluster is None:
        return ()
    from scoctl.services.teardown import TEARDOWN_TOKEN, TORN_DOWN_KINDS, teardown_workload

    done: list[str] = []
    for row in store.workloads():
        if (row.status != WorkloadStatus.FAILED or row.kind not in TORN_DOWN_KINDS
                or row.source != "k8s"):
            continue
        previous = [e for e in store.events(workload=row.slug, since=row.updated)
                    if e.token == TEARDOWN_TOKEN]
        if any(not e.detail.get("failed") for e in previous):
            continue
        result = teardown_workload(store, cluster, row,
                                   workload_label=config.kubernetes.workload_label)
        if result.errors:
            problems.append(Problem("kubernetes", None, f"teardown of {row.slug}",
                                    "; ".join(result.errors)))
        else:
            done.append(row.slug)
    return tuple(sorted(done))
