"""The reconciler's decision (design: Reconciler), pure: what Nova, Kubernetes and Slurm hold in,
the
changes to make out.

`decide(snapshot, policy, now)` reads plain values only — the region's servers tagged
``sco:managed`` (ERROR ones already read by id, so their fault is known), the Kubernetes nodes
and how many non-DaemonSet pods each holds, the Slurm nodes, the state's instances and
launches (a server untracked is adopted only when its `sco:launch` names one of them, else it
is an orphan), the plan targets — and returns a `Decision`:
instance rows to add (adoptions) or change, launch intents to settle, servers to delete (and
why), scale-downs to carry out, pools to exclude, events, workloads to re-plan, orphans, and
the addresses to give Slurm nodes whose servers just turned ACTIVE.

No I/O, no clock, no logging: time comes in as `now`. Every change is a transition, so a
second `decide` over the world the first one produced returns an empty decision (a second
reconcile in a row changes nothing).

Lifecycle of an instance: ``requested → building → active → ready``, then ``draining →
deleting → deleted``, or ``error``; a reclaim notice takes it through ``noticed`` (the notice
stage, `scoctl.core.notice`) to ``deleting``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from scoctl.core import disruption, drift
from scoctl.core.budgets import Allowance, holding
from scoctl.core.clockstep import held_back
from scoctl.core.constraints import opted_out
from scoctl.core.demand import effective_request, is_node_bound
from scoctl.core.disruption import Blocked, Disruption, Unit
from scoctl.core.faults import fault_text, is_quota_fault, judge_fault
from scoctl.core.gang import (
    MEMBER_STATES,
    GangDecision,
    Member,
    gang_booked,
    gang_pass,
    report_up,
)
from scoctl.core.model import (
    DisruptionBlock,
    ExclusionRecord,
    GangRecord,
    InstanceRecord,
    InstanceUpdate,
    LaunchRecord,
    NodeInfo,
    PodInfo,
    ServerInfo,
    SlurmNode,
)
from scoctl.core.model.disruption import Budget, DisruptionSettings
from scoctl.core.model.gangs import GangPolicy
from scoctl.core.model.vocabulary import (
    LABEL_INSTANCE,
    LABEL_MANAGED,
    LABEL_POOL,
    LABEL_WORKLOAD,
    TAG_MANAGED,
    DisruptionReason,
    InstanceStatus,
    LaunchStatus,
    ServerStatus,
)
from scoctl.core.spec import LaunchSpec, hash_of
from scoctl.core.timefmt import parse_rfc3339, rfc3339

LIVE = frozenset({InstanceStatus.REQUESTED, InstanceStatus.BUILDING, InstanceStatus.ACTIVE,
                  InstanceStatus.READY})
BOOTING = frozenset({InstanceStatus.REQUESTED, InstanceStatus.BUILDING,
                     InstanceStatus.ACTIVE})  # live, not Ready yet
RECLAIMABLE_TAINT = ("reclaimable", "true", "NoSchedule")
OPENSTACK_PROVIDER = "openstack://"
# Slurm flags that mean the node is not up (yet, or any more)
SLURM_NOT_UP = frozenset({"POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "NOT_RESPONDING",
                          "POWER_DOWN"})
SLURM_IDLE_STATES = frozenset({"idle"})
# Slurm flags of a node that is powered down or on its way there
SLURM_POWERED_OFF = frozenset({"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"})


def slurm_power_down(name: str | None, server_id: str,
                     slurm_nodes: Sequence[SlurmNode] | None,
                     instances: Iterable[InstanceRecord]) -> str | None:
    """The Slurm node to put back to powered-down when server `server_id` that served `name`
    goes, or None: not when Slurm was not read (`slurm_nodes` None), not when Slurm has it
    powered (or powering) down already — POWER_DOWN_FORCE would run SuspendProgram again and
    keep the node from resuming for SuspendTimeout — and not when another live instance (a
    fallback launch, a replacement) now serves that node name."""
    if not name or slurm_nodes is None:
        return None
    known = next((n for n in slurm_nodes if n.name == name), None)
    if known is not None and known.flags & SLURM_POWERED_OFF:
        return None
    for other in instances:
        if other.id != server_id and other.node_name == name and other.status in LIVE:
            return None
    return name


@dataclass(frozen=True)
class Policy:
    """The reconciler's knobs (seconds), from the config's `timeouts`, `gc_orphans` and
    `disruption` budgets (top level; `workload_budgets` for the workloads that override them).
    No defaults here: the config (`scoctl.config.schema.Timeouts`,
    `scoctl.core.model.disruption.DisruptionSettings`) is the one place that says what an
    unset knob means."""

    launch_timeout: float
    launch_settle: float
    registration_timeout: float
    idle_timeout: float
    negative_cache: float
    orphan_grace: float
    gc_orphans: bool
    budgets: tuple[Budget, ...]
    workload_budgets: Mapping[str, tuple[Budget, ...]]
    # the rest of the `disruption` block (expiry, repair), top level and per workload
    disruption: DisruptionSettings = field(default_factory=DisruptionSettings)
    workload_disruption: Mapping[str, DisruptionSettings] = field(default_factory=dict)

    def settings_of(self, workload: str) -> DisruptionSettings:
        """The `disruption` settings of `workload`."""
        return self.workload_disruption.get(workload, self.disruption)


@dataclass(frozen=True)
class DriftView:
    """What drift (design: Drift, `core.drift`) compares against: see `Snapshot.drift`."""

    specs: Mapping[tuple[str, str], LaunchSpec] = field(default_factory=dict)
    known: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # hash -> `spec.stored`
    node_labels: Mapping[tuple[str, str], Mapping[str, str]] | None = None
    noted: frozenset[str] = frozenset()
    halted: frozenset[tuple[str, str]] = frozenset()
    resumed: Mapping[str, str] = field(default_factory=dict)
    # the rows, deleted ones included, launched on the current specs while units drifted:
    # the failed replacements in a row are counted over them
    launched: tuple[InstanceRecord, ...] = ()
    # (workload, hash)s of replacements a reverted rollout left: ordinary units (Drift)
    kept: frozenset[tuple[str, str]] = frozenset()
    # the launch image the region does not have (None: it resolved): every rollout halts
    unresolved_image: str | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything `decide` looks at, for one region.

    `servers` are the region's servers tagged ``sco:managed``. `k8s_nodes` / `slurm_nodes` are
    None when that system is not in use (then nothing is ever "ready" through it); a
    Kubernetes Node belongs to the server `node_server_id` names. `busy_pods[node name]` counts
    the pods on a Kubernetes node that are not DaemonSet, mirror or finished pods. `suspended`
    names Slurm nodes that Slurm's SuspendProgram or ResumeFailProgram handed back.
    `orphans_seen[server id]` is when an orphan (a server whose `sco:launch` names no launch in
    `launches`) was first seen. `tiers[pool]` is
    ``committed`` or ``reclaimable``. `intents_held`: another runner's launch call may still
    be in flight (this runner took the region less than the longest call ago, design: Runners), so
    no intent is failed yet.
    """

    region: str
    servers: tuple[ServerInfo, ...] = ()
    instances: tuple[InstanceRecord, ...] = ()
    launches: tuple[LaunchRecord, ...] = ()
    k8s_nodes: tuple[NodeInfo, ...] | None = None
    busy_pods: Mapping[str, int] = field(default_factory=dict)
    slurm_nodes: tuple[SlurmNode, ...] | None = None
    suspended: frozenset[str] = frozenset()
    targets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    tiers: Mapping[str, str] = field(default_factory=dict)
    orphans_seen: Mapping[str, str] = field(default_factory=dict)
    intents_held: bool = False
    # design: Disruption: instances of every region with a disruption in flight or recently started
    # (`Store.disrupted`; this region's rows are read from `instances`), the pods on each
    # Kubernetes node (consolidation), the region's pools, the pools excluded now, and the
    # (workload, reason)s a budget held back at the last pass
    disrupted: tuple[InstanceRecord, ...] = ()
    pods: Mapping[str, tuple[PodInfo, ...]] = field(default_factory=dict)
    pools: frozenset[str] | None = None
    excluded: frozenset[str] = frozenset()
    blocks: tuple[DisruptionBlock, ...] = ()
    # design: Drift: each (workload, pool)'s current launch spec (None: drift is not checked),
    # the specs seen before by hash (to name the fields that changed), the Node labels the
    # config wants per (workload, pool) (None: meta drift is not checked), the units whose
    # UNIT_DRIFTED is recorded, the (workload, hashes) whose DRIFT_ROLLOUT_HALTED is, and when
    # each workload's rollout was last resumed (`scoctl drift resume`)
    drift: DriftView | None = None
    # design: Rebalance: the units a planned rebalance moves (server ids), started as `rebalanced`
    rebalance_moves: tuple[str, ...] = ()
    # design: Gangs: the record of each gang claim served in this region (sized to the claim),
    # and the config's gang policy (None: no gang is followed)
    gangs: Mapping[str, GangRecord] = field(default_factory=dict)
    gang_policy: GangPolicy | None = None
    # an operator's pause of disruptions (`scoctl pause --disruptions`): what holds them, or
    # "" — no voluntary disruption starts; those in flight go on, reclaim notices too
    paused: str = ""


@dataclass(frozen=True)
class LaunchUpdate:
    """Settle a launch intent: ``recorded`` (servers adopted) or ``failed``."""

    launch_id: str
    status: LaunchStatus
    error: str | None = None


@dataclass(frozen=True)
class Deletion:
    """Delete a server now (no drain: it never ran work, or it is gone already).

    `node` is the Kubernetes Node to delete with it, `slurm_node` the Slurm node to put back
    to powered-down (``POWER_DOWN_FORCE``, never DOWN). `instance` is None for orphans.
    """

    server_id: str
    name: str
    reason: str
    workload: str | None = None
    pool: str | None = None
    instance: str | None = None
    node: str | None = None
    slurm_node: str | None = None


@dataclass(frozen=True)
class ScaleDown:
    """Remove an idle unit the plan no longer needs: cordon → check idle again → drain →
    delete the Node → delete the server (Slurm: check idle → power down → delete)."""

    instance: str
    server_id: str
    name: str
    workload: str
    pool: str
    node: str | None = None
    slurm_node: str | None = None
    # why (design: Disruption): `empty` and `expired` units are checked idle again after the cordon
    # (work that landed meanwhile calls it off), `underutilized` ones are drained busy
    reason: DisruptionReason = DisruptionReason.EMPTY


@dataclass(frozen=True)
class NodeAddress:
    """Tell Slurm how to reach CLOUD node `node` now that its server is ACTIVE: the server's
    `address` as NodeAddr and its name as NodeHostname (Nova names the guest after it), so
    slurmctld needs no DNS for it."""

    node: str
    address: str
    hostname: str


@dataclass(frozen=True)
class LabelPatch:
    """Patch these labels onto Kubernetes Node `node` (meta drift, design: Drift)."""

    node: str
    labels: Mapping[str, str | None]  # None: remove the label


@dataclass(frozen=True)
class Event:
    workload: str | None
    token: str
    level: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Orphan:
    """A server tagged ``sco:managed`` whose launch scoctl does not know (whatever its
    workload tag says): reported, deleted only with `gc_orphans` after the grace period."""

    server_id: str
    name: str
    first_seen: str
    workload: str | None
    delete: bool


@dataclass(frozen=True)
class Decision:
    """What one reconcile pass changes. `empty` when the world already matches the state."""

    new_instances: tuple[InstanceRecord, ...] = ()
    updates: tuple[InstanceUpdate, ...] = ()
    launch_updates: tuple[LaunchUpdate, ...] = ()
    deletions: tuple[Deletion, ...] = ()
    scale_downs: tuple[ScaleDown, ...] = ()
    exclusions: tuple[ExclusionRecord, ...] = ()
    events: tuple[Event, ...] = ()
    dirty: Mapping[str, str] = field(default_factory=dict)
    adoptions: tuple[str, ...] = ()
    orphans: tuple[Orphan, ...] = ()
    orphans_seen: Mapping[str, str] = field(default_factory=dict)
    held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    blocked: tuple[Blocked, ...] = ()  # disruptions the budget holds back: nothing changes
    addresses: tuple[NodeAddress, ...] = ()
    # the budget blocks now, per (workload, reason), of the workloads this region decided on
    # (`block_workloads`): stored to write DISRUPTION_BLOCKED once per change
    blocks: tuple[DisruptionBlock, ...] = ()
    block_workloads: tuple[str, ...] = ()
    label_patches: tuple[LabelPatch, ...] = ()  # meta drift (design: Drift)
    # design: Gangs: each gang whose record changes or whose members are deleted this pass
    gangs: tuple[GangDecision, ...] = ()
    # the disruptions an operator's pause held back (`Snapshot.paused`): nothing changes
    paused: tuple[Disruption, ...] = ()
    # the disruptions started this pass, in order, and the room the budgets left each
    # (`reconcile --dry-run --explain`)
    started: tuple[Disruption, ...] = ()
    allowed: Mapping[str, Allowance] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing would change in the state (orphans only reported, not new; the
        node addresses given again each pass of a boot change nothing there)."""
        return not (self.new_instances or self.updates or self.launch_updates
                    or self.deletions or self.scale_downs or self.exclusions or self.events
                    or self.dirty or self.label_patches or self.gangs)


def server_tags(server: ServerInfo) -> dict[str, str]:
    """The ``sco:key=value`` tags of a server (metadata fills what tags lack)."""
    out: dict[str, str] = {}
    for key, value in server.metadata.items():
        if key.startswith("sco:") and value:
            out[key[4:]] = value
    for tag in server.tags:
        if tag.startswith("sco:") and "=" in tag:
            key, _, value = tag[4:].partition("=")
            out[key] = value
    return out


def _age(now: datetime, since: str | None) -> float:
    if not since:
        return 0.0
    return (now - parse_rfc3339(since)).total_seconds()


def k8s_ready(node: NodeInfo | None, *, workload: str | None, pool: str | None,
              reclaimable: bool) -> bool:
    """A Kubernetes node counts as ready: Ready, scoctl's labels, and the reclaimable taint on
    reclaimable pools."""
    if node is None or not node.ready:
        return False
    labels = node.labels
    if labels.get(LABEL_MANAGED) != "true":
        return False
    if workload and labels.get(LABEL_WORKLOAD) != workload:
        return False
    if pool and labels.get(LABEL_POOL) != pool:
        return False
    if reclaimable:
        return any((t.key, t.value, t.effect) == RECLAIMABLE_TAINT for t in node.taints)
    return True


def node_server_id(node: NodeInfo) -> str | None:
    """The Nova server behind a Kubernetes Node (design: Reconciler): its ``spec.providerID``
    (``openstack:///<server id>``, with or without a region part), else its
    ``sco/instance=<server id>`` label; None for a Node that names no server. A Node is never
    matched to a server by its name: clouds name Nodes ``<server>.novalocal`` or by IP."""
    provider = node.provider_id
    if provider.startswith(OPENSTACK_PROVIDER):
        server_id = provider[len(OPENSTACK_PROVIDER):].strip("/").rsplit("/", 1)[-1]
        if server_id:
            return server_id
    return node.labels.get(LABEL_INSTANCE) or None  # set by the node's join script


def slurm_up(node: SlurmNode | None) -> bool:
    """A Slurm node counts as up: known, not down, not powered (or powering) down or up."""
    if node is None:
        return False
    if node.state in ("down", "unknown", "future") or "DOWN" in node.flags:
        return False
    return not node.flags & SLURM_NOT_UP


def slurm_unhealthy(node: SlurmNode | None) -> bool:
    """A Slurm node is unhealthy (design: Disruption): DOWN or NOT_RESPONDING (not merely powered
    down, which power saving does); a node Slurm does not list is not judged."""
    if node is None:
        return False
    return node.state == "down" or "DOWN" in node.flags or "NOT_RESPONDING" in node.flags


def slurm_idle(node: SlurmNode | None) -> bool:
    """Idle for scale-down: no job on it, or powered down by power saving."""
    if node is None:
        return False
    if node.powered_down or "POWERING_DOWN" in node.flags:
        return True
    return node.state in SLURM_IDLE_STATES and "POWERING_UP" not in node.flags


def intent_lapsed(launch: LaunchRecord, now: datetime, settle: float) -> bool:
    """Whether an in-flight launch intent that no server carries the ``sco:launch`` tag of is
    failed at `now`: `settle` seconds (``timeouts.launch_settle``) have passed since its call
    ended (``updated``; after a crash before the call, since the intent was written). Its units
    are then free to launch again; a server that shows up later still names a known launch and
    is adopted, never taken for an orphan."""
    return _age(now, launch.updated or launch.created) >= settle


def lapsed_intent(launch: LaunchRecord, settle: float) -> tuple[LaunchUpdate, Event]:
    """The launch update and the event that fail an intent `intent_lapsed` says is lapsed
    (acquire and reconcile record the same)."""
    return (LaunchUpdate(launch.launch_id, LaunchStatus.FAILED,
                         f"no server carries its sco:launch tag {settle:g}s after the call"),
            Event(launch.workload, "LAUNCH_TIMEOUT", "warning",
                  {"launch": launch.launch_id, "pool": launch.pool, "servers": 0,
                   "settle": settle}))


class _Pass:
    """One `decide` call: the snapshot indexed for lookups, and the changes collected while
    the rules run. Every rule is a small function over it; nothing here leaves the call."""

    def __init__(self, snapshot: Snapshot, policy: Policy, now: datetime) -> None:
        self.snapshot, self.policy, self.now, self.stamp = snapshot, policy, now, rfc3339(now)
        self.servers = {s.id: s for s in snapshot.servers if TAG_MANAGED in s.tags}
        self.instances = {i.id: i for i in snapshot.instances if i.region == snapshot.region}
        self.launches = {launch.launch_id: launch for launch in snapshot.launches
                         if launch.region == snapshot.region}
        self.nodes_by_server: dict[str, NodeInfo] = {}
        for node in snapshot.k8s_nodes or ():
            server_id = node_server_id(node)
            if server_id:
                self.nodes_by_server.setdefault(server_id, node)
        self.slurm = {n.name: n for n in snapshot.slurm_nodes or ()}
        # the decision as it grows
        self.new: list[InstanceRecord] = []
        self.updates: dict[str, dict[str, Any]] = {}
        self.launch_updates: dict[str, LaunchUpdate] = {}
        self.deletions: list[Deletion] = []
        self.scale_downs: list[ScaleDown] = []
        self.exclusions: dict[str, ExclusionRecord] = {}
        self.events: list[Event] = []
        self.dirty: dict[str, str] = {}
        self.adopted: list[str] = []
        self.orphans: list[Orphan] = []
        self.addresses: list[NodeAddress] = []
        self.gang_addresses: dict[str, dict[str, NodeAddress]] = {}  # held: workload → server
        self.blocks: list[DisruptionBlock] = []
        self.block_workloads: set[str] = set()
        self.label_patches: list[LabelPatch] = []
        self.gangs: list[GangDecision] = []
        self.paused: tuple[Disruption, ...] = ()
        self.started: tuple[Disruption, ...] = ()
        self.allowed: Mapping[str, Allowance] = {}

    # -- recording ---------------------------------------------------------------------------

    def update(self, inst: InstanceRecord, **fields: Any) -> None:
        changed = {k: v for k, v in fields.items() if getattr(inst, k) != v}
        if changed:
            self.updates.setdefault(inst.id, {}).update(changed)

    def event(self, workload: str | None, token: str, level: str = "info",
              **detail: Any) -> None:
        self.events.append(Event(workload, token, level, detail))

    def mark_dirty(self, workload: str | None, reason: str) -> None:
        if workload:
            self.dirty.setdefault(workload, reason)

    def status(self, inst: InstanceRecord) -> InstanceStatus:
        """The instance's status after this pass's changes so far."""
        return InstanceStatus(self.updates.get(inst.id, {}).get("status", inst.status))

    def age(self, since: str | None) -> float:
        return _age(self.now, since)

    # -- what the nodes say ------------------------------------------------------------------

    def k8s_node(self, inst: InstanceRecord) -> NodeInfo | None:
        """The instance's Kubernetes Node, matched by identity (never by name)."""
        return self.nodes_by_server.get(inst.id)

    def slurm_in_view(self, inst: InstanceRecord) -> bool:
        """The instance is a Slurm node and Slurm was read."""
        return bool(inst.node_name) and self.snapshot.slurm_nodes is not None

    def ready(self, inst: InstanceRecord) -> bool | None:
        """Registered and up; None when the system that would say so was not read."""
        if inst.node_name:
            if self.snapshot.slurm_nodes is None:
                return None
            return slurm_up(self.slurm.get(inst.node_name))
        if self.snapshot.k8s_nodes is None:
            return None
        return k8s_ready(self.k8s_node(inst), workload=inst.workload, pool=inst.pool,
                         reclaimable=self.snapshot.tiers.get(inst.pool or "") == "reclaimable")

    def idle(self, inst: InstanceRecord) -> bool | None:
        """Idle for scale-down; None when the system that would say so was not read."""
        if self.slurm_in_view(inst):
            return slurm_idle(self.slurm.get(inst.node_name or ""))
        if self.snapshot.k8s_nodes is None:
            return None
        node = self.k8s_node(inst)
        return node is None or self.snapshot.busy_pods.get(node.name, 0) == 0

    def node_of(self, inst: InstanceRecord) -> str | None:
        """The Kubernetes Node to delete with the instance's server."""
        if self.slurm_in_view(inst):
            return None
        node = self.k8s_node(inst)
        return node.name if node is not None else None

    def power_down(self, name: str | None, server_id: str = "") -> str | None:
        """The Slurm node to put back to powered-down (`slurm_power_down`), with the statuses
        this pass gave the instances so far."""
        if not name:
            return None
        serving = [replace(other, status=self.status(other)) for other in self.instances.values()
                   if other.node_name == name]
        return slurm_power_down(name, server_id, self.snapshot.slurm_nodes, serving)

    # -- actions -----------------------------------------------------------------------------

    def delete(self, inst: InstanceRecord, reason: str, *, power: bool = True,
               **fields: Any) -> None:
        """Delete the instance's server; a failed Slurm launch also powers its node down
        (`power`; not on a retried delete — the first one did, and the name may be served
        again — nor for a node Slurm handed back itself)."""
        self.update(inst, **fields)
        self.deletions.append(Deletion(
            server_id=inst.id, name=inst.name, reason=reason, workload=inst.workload,
            pool=inst.pool, instance=inst.id, node=self.node_of(inst),
            slurm_node=self.power_down(inst.node_name, inst.id) if power else None))

    def power_down_only(self, name: str, reason: str, workload: str | None,
                        pool: str | None) -> None:
        """Put a Slurm node back to powered-down when no server is left to delete."""
        self.deletions.append(Deletion(server_id="", name=name, reason=reason,
                                       workload=workload, pool=pool, slurm_node=name))

    def scale(self, inst: InstanceRecord,
              reason: DisruptionReason = DisruptionReason.EMPTY) -> ScaleDown:
        slurm_node = inst.node_name if self.slurm_in_view(inst) else None
        return ScaleDown(instance=inst.id, server_id=inst.id, name=inst.name,
                         workload=inst.workload or "", pool=inst.pool or "",
                         node=None if slurm_node else self.node_of(inst),
                         slurm_node=slurm_node, reason=reason)

    def unhealthy(self, inst: InstanceRecord) -> bool | None:
        """The unit's node is unhealthy (design: Disruption): a Kubernetes Node not Ready (NotReady,
        Unknown) or gone, a Slurm node DOWN or NOT_RESPONDING; None when not read."""
        if inst.node_name:
            if self.snapshot.slurm_nodes is None:
                return None
            return slurm_unhealthy(self.slurm.get(inst.node_name))
        if self.snapshot.k8s_nodes is None:
            return None
        node = self.k8s_node(inst)
        return node is None or not node.ready

    def value(self, inst: InstanceRecord, name: str) -> Any:
        """A field of the instance after this pass's changes so far."""
        return self.updates.get(inst.id, {}).get(name, getattr(inst, name))

    def decision(self, orphans_seen: Mapping[str, str], held: Mapping[str, Mapping[str, int]],
                 blocked: tuple[Blocked, ...]) -> Decision:
        return Decision(
            new_instances=tuple(self.new),
            updates=tuple(InstanceUpdate(k, **v) for k, v in sorted(self.updates.items())),
            launch_updates=tuple(self.launch_updates[k] for k in sorted(self.launch_updates)),
            deletions=tuple(self.deletions), scale_downs=tuple(self.scale_downs),
            exclusions=tuple(self.exclusions[k] for k in sorted(self.exclusions)),
            events=tuple(self.events), dirty=dict(sorted(self.dirty.items())),
            adoptions=tuple(self.adopted), orphans=tuple(self.orphans),
            orphans_seen=orphans_seen,
            held={w: dict(p) for w, p in sorted(held.items())}, blocked=blocked,
            addresses=tuple(self.addresses), blocks=tuple(self.blocks),
            block_workloads=tuple(sorted(self.block_workloads)),
            label_patches=tuple(self.label_patches), gangs=tuple(self.gangs),
            paused=self.paused, started=self.started, allowed=self.allowed)


def decide(snapshot: Snapshot, policy: Policy, now: datetime) -> Decision:
    """The reconcile decision for one region (see the module docstring for the rules):
    adopt the servers of crashed launches, settle launch intents, track every instance, report
    orphans, then scale down idle units the plan no longer needs."""
    p = _Pass(snapshot, policy, now)
    adopted = _adopt(p)
    _settle_intents(p, adopted)
    for inst in sorted(p.instances.values(), key=lambda i: (i.workload or "", i.name)):
        _track(p, inst, p.servers.get(inst.id))
    seen = _orphans(p)
    _gangs(p)
    deleting = {d.instance for d in p.deletions if d.instance}
    held = _held(p, deleting)
    _follow_idle(p, deleting)
    blocked = _disrupt(p, held, deleting)
    return p.decision(seen, held, blocked)


def _gangs(p: _Pass) -> None:
    """Gangs (design: Gangs, `core.gang.gang_pass`) over the statuses this pass gave their
    members: a failed member or a gang not Ready by the deadline deletes every member;
    all Ready is `GANG_PROVISIONED`. Only decisions that change something are kept. A Slurm
    gang's nodes are reported up (their addresses) only once every member has booted
    (`core.gang.report_up`): slurmctld never reaches part of a gang."""
    gang_policy = p.snapshot.gang_policy
    if gang_policy is None:
        return
    deleting = {d.instance for d in p.deletions if d.instance}
    for name, record in sorted(p.snapshot.gangs.items()):
        mine = sorted((i for i in p.instances.values() if i.workload == name),
                      key=lambda i: i.id)
        members = [Member(i.id, i.pool or "", p.status(i), p.value(i, "fault") or "")
                   for i in mine if p.status(i) in MEMBER_STATES]
        decision = _gang_pass(p, record, members, gang_policy)
        held = p.gang_addresses.get(name, {})
        if held and not decision.delete:
            p.addresses.extend(held[sid] for sid in report_up(members, record.size)
                               if sid in held)
        if decision.record == record and not decision.delete and not decision.events:
            continue
        p.gangs.append(decision)
        reasons = {str(e.detail.get("pool")): str(e.detail.get("reason"))
                   for e in decision.events if e.token == "GANG_FAILED"}
        for inst in mine:
            if inst.id in decision.delete and inst.id not in deleting:
                p.delete(inst, f"gang failed: {reasons.get(inst.pool or '', 'a member failed')}",
                         status=InstanceStatus.DELETING)


def _gang_pass(p: _Pass, record: GangRecord, members: list[Member],
               policy: GangPolicy) -> GangDecision:
    """`gang_pass` with its deadline reckoned without the forward clock steps seen since the
    launch (`core.clockstep`: a step never tears a booting gang down); what it stamps is the
    time of day."""
    now = p.now.timestamp()
    steps = getattr(p.now, "steps", ())
    if record.launched_at is None or not steps:
        return gang_pass(record, members, policy, now)
    aged = now - held_back(steps, datetime.fromtimestamp(record.launched_at, UTC))
    decision = gang_pass(record, members, policy, aged)
    out = decision.record
    out = replace(out, launched_at=now) if out.launched_at == aged else out
    out = replace(out, failed_at=now) if out.failed_at == aged else out
    out = replace(out, provisioned_at=now) if out.provisioned_at == aged else out
    return replace(decision, record=out)


def _booked(p: _Pass) -> set[str]:
    """Gang workloads whose Ready gang is still within its booking (no idle scale-down)."""
    gang_policy = p.snapshot.gang_policy
    if gang_policy is None:
        return set()
    now = p.now.timestamp()
    return {name for name, record in p.snapshot.gangs.items()
            if gang_booked(record, gang_policy, now)}


def _adopted_record(p: _Pass, server: ServerInfo, tags: Mapping[str, str],
                    launch: LaunchRecord) -> InstanceRecord:
    node_name = None
    if launch.node_names:
        node_name = server.name if server.name in launch.node_names else launch.node_names[0]
    generation = tags.get("gen")
    return InstanceRecord(
        id=server.id, name=server.name, region=p.snapshot.region,
        workload=tags.get("workload") or launch.workload, pool=tags.get("pool") or launch.pool,
        generation=int(generation) if generation and generation.isdigit() else
        launch.generation, launch_id=launch.launch_id, status=InstanceStatus.REQUESTED,
        created=launch.created, updated=p.stamp, node_name=node_name)


def _adopt(p: _Pass) -> set[str]:
    """Servers of a launch scoctl recorded but whose servers it never recorded (a crash
    between intent and record) become instances; returns the launches adopted. A server whose
    `sco:launch` names no known launch is an orphan whatever its workload tag (`_orphans`)."""
    adopted: set[str] = set()
    for server in sorted(p.servers.values(), key=lambda s: s.name):
        if server.id in p.instances or server.status == ServerStatus.DELETED:
            continue  # a server on its way out is never adopted (its row may be deleted)
        tags = server_tags(server)
        launch = p.launches.get(tags.get("launch", ""))
        if launch is None:
            continue  # no known intent: an orphan (design: Reconciler), never adopted
        record = _adopted_record(p, server, tags, launch)
        workload = record.workload
        p.new.append(record)
        p.instances[record.id] = record
        if launch.launch_id not in adopted:
            adopted.add(launch.launch_id)
            p.adopted.append(launch.launch_id)
            if launch.status == LaunchStatus.FAILED:
                # failed before its servers appeared, its units launched again: the launch
                # stays failed, and its units are surplus (`_scale_down`, reason `late`)
                p.event(workload, "LATE_LAUNCH_ADOPTED", "warning", launch=launch.launch_id,
                        pool=launch.pool)
                continue
            if launch.status != LaunchStatus.RECORDED:
                p.launch_updates[launch.launch_id] = LaunchUpdate(launch.launch_id,
                                                                  LaunchStatus.RECORDED)
            p.event(workload, "LAUNCH_ADOPTED", launch=launch.launch_id, pool=launch.pool)
    return adopted


def _settle_intents(p: _Pass, adopted: set[str]) -> None:
    """Launch intents with no server after the settle window fail (`intent_lapsed`: their
    units are freed for the next acquire); intents whose servers are recorded are settled as
    recorded."""
    settle = p.policy.launch_settle
    for launch in p.launches.values():
        if launch.status not in (LaunchStatus.INTENT, LaunchStatus.CALLED) \
                or launch.launch_id in adopted:
            continue
        if any(i.launch_id == launch.launch_id for i in p.instances.values()):
            p.launch_updates[launch.launch_id] = LaunchUpdate(launch.launch_id,
                                                              LaunchStatus.RECORDED)
            continue
        if p.snapshot.intents_held or not intent_lapsed(launch, p.now, settle):
            continue
        update, event = lapsed_intent(launch, settle)
        p.launch_updates[launch.launch_id] = update
        p.events.append(event)
        p.mark_dirty(launch.workload, "launch failed")
        for name in launch.node_names:
            if p.power_down(name):
                p.power_down_only(name, "launch failed", launch.workload, launch.pool)


def _track(p: _Pass, inst: InstanceRecord, server: ServerInfo | None) -> None:
    """The lifecycle rules for one tracked instance."""
    status = inst.status
    if status in (InstanceStatus.DELETED, InstanceStatus.NOTICED):
        return  # a noticed instance is the notice stage's until its end (design: Notices)
    if server is None or server.status == ServerStatus.DELETED:
        _track_gone(p, inst)
    elif status == InstanceStatus.DELETING:
        # Nova accepted the delete; retry only if the server lingers past the launch timeout
        if p.age(inst.updated) >= p.policy.launch_timeout:
            p.delete(inst, "delete retried: the server is still there", power=False)
    elif status == InstanceStatus.DRAINING:
        return  # the scale-down pass carries it on
    elif inst.node_name and inst.node_name in p.snapshot.suspended and status in LIVE:
        # Slurm's SuspendProgram / ResumeFailProgram handed the node back, powered down
        # already: no drain, and no second power-down
        p.delete(inst, "suspended by Slurm power saving", power=False, status=status)
    elif server.status == ServerStatus.ERROR:
        _track_error(p, inst, server)
    elif status == InstanceStatus.ERROR:
        p.delete(inst, "delete retried", power=False)
    elif server.status == ServerStatus.BUILD:
        _track_build(p, inst)
    elif server.status == ServerStatus.ACTIVE:
        _track_active(p, inst, server)
    # SHUTOFF, REBOOT, ...: nothing scoctl decides on


def _track_gone(p: _Pass, inst: InstanceRecord) -> None:
    """No server any more: deleted as asked, or — when it was live — reclaimed."""
    if inst.status in (InstanceStatus.DELETING, InstanceStatus.DRAINING, InstanceStatus.ERROR):
        p.update(inst, status=InstanceStatus.DELETED)
        p.event(inst.workload, "INSTANCE_DELETED", server=inst.id, name=inst.name,
                pool=inst.pool, **({"reason": inst.disruption} if inst.disruption else {}))
        return
    # it was live and nobody here deleted it: reclaimed
    p.update(inst, status=InstanceStatus.DELETED, fault=inst.fault or "gone (reclaimed)")
    p.event(inst.workload, "INSTANCE_RECLAIMED", "warning", server=inst.id, name=inst.name,
            pool=inst.pool, was=inst.status)
    p.mark_dirty(inst.workload, "units lost to a reclaim")
    node = p.power_down(inst.node_name, inst.id)
    if node:
        p.power_down_only(node, "reclaimed", inst.workload, inst.pool)


def _track_error(p: _Pass, inst: InstanceRecord, server: ServerInfo) -> None:
    """ERROR: a reclaim after ACTIVE, else a launch fault judged by `core.faults`."""
    if inst.status == InstanceStatus.ERROR:
        p.delete(inst, "delete retried", power=False)  # recorded already; last delete failed
        return
    fault = fault_text(server)
    if inst.active_at is not None or inst.status in (InstanceStatus.ACTIVE,
                                                     InstanceStatus.READY):
        p.event(inst.workload, "INSTANCE_RECLAIMED", "warning", server=inst.id,
                name=inst.name, pool=inst.pool, fault=fault)
        p.mark_dirty(inst.workload, "units lost to a reclaim")
        p.delete(inst, "reclaimed (ERROR after ACTIVE)", status=InstanceStatus.ERROR,
                 fault=fault)
        return
    verdict = judge_fault(workload=inst.workload, pool=inst.pool, region=p.snapshot.region,
                          fault=fault, quota=is_quota_fault(server), launch=inst.launch_id,
                          servers=1, now=p.now, negative_cache=p.policy.negative_cache)
    if verdict.exclusion is None or verdict.exclusion.pool not in p.exclusions:
        if verdict.exclusion is not None:
            p.exclusions[verdict.exclusion.pool] = verdict.exclusion
        p.event(inst.workload, verdict.token, "warning", **verdict.detail)
    p.mark_dirty(inst.workload, verdict.replan)
    p.delete(inst, "launch failed", status=InstanceStatus.ERROR, fault=verdict.fault)


def _track_build(p: _Pass, inst: InstanceRecord) -> None:
    """BUILD: building, until the launch timeout deletes it."""
    if inst.status == InstanceStatus.REQUESTED:
        p.update(inst, status=InstanceStatus.BUILDING)
    timeout = p.policy.launch_timeout
    if p.age(inst.created) >= timeout:
        p.event(inst.workload, "LAUNCH_TIMEOUT", "warning", server=inst.id, name=inst.name,
                pool=inst.pool)
        p.mark_dirty(inst.workload, "launch timed out")
        p.delete(inst, "launch timeout", status=InstanceStatus.ERROR,
                 fault=f"still BUILD after {timeout:g}s")


def _track_active(p: _Pass, inst: InstanceRecord, server: ServerInfo) -> None:
    """ACTIVE: active, then ready once its node is up — or deleted after the registration
    timeout when the node never came. A Slurm node whose server is ACTIVE and that is not up
    yet (powering up, not registered) is given the server's address on every pass until it
    is up: the update is idempotent, so an ``scontrol`` that failed, a server acquire already
    recorded ACTIVE (no transition for reconcile to see) and a slurmctld restart that forgot
    the address all heal on the next pass, and it ends with the boot. A gang member's address
    waits for the whole gang (`_gangs`)."""
    active_at = inst.active_at or p.stamp
    status = inst.status
    up = p.ready(inst)
    if status in (InstanceStatus.REQUESTED, InstanceStatus.BUILDING):
        p.update(inst, status=InstanceStatus.ACTIVE, active_at=active_at)
        status = InstanceStatus.ACTIVE
    if status != InstanceStatus.ACTIVE:
        return
    timeout = p.policy.registration_timeout
    if up:
        p.update(inst, status=InstanceStatus.READY, ready_at=p.stamp, active_at=active_at)
        p.event(inst.workload, "INSTANCE_READY", server=inst.id, name=inst.name, pool=inst.pool,
                ready_at=p.stamp)
    elif up is False and p.age(active_at) >= timeout:
        p.event(inst.workload, "REGISTRATION_TIMEOUT", "warning", server=inst.id,
                name=inst.name, pool=inst.pool)
        p.mark_dirty(inst.workload, "node never registered")
        p.delete(inst, "registration timeout", status=InstanceStatus.ERROR, active_at=active_at,
                 fault=f"no ready node after {timeout:g}s")
    elif up is False and inst.node_name and server.address:
        address = NodeAddress(inst.node_name, server.address, server.name)
        gang = inst.workload if p.snapshot.gang_policy is not None else None
        if gang and gang in p.snapshot.gangs:
            p.gang_addresses.setdefault(gang, {})[inst.id] = address  # see _gangs
        else:
            p.addresses.append(address)


def _orphans(p: _Pass) -> dict[str, str]:
    """Servers tagged by scoctl whose launch is unknown (not adopted): reported, deleted after
    the grace period only with `gc_orphans`. Returns when each was first seen. A server on
    its way out (DELETED: Nova lists a deleted server for a moment) is no orphan: its
    instance row, when scoctl deleted it, is deleted already and no longer read."""
    seen: dict[str, str] = {}
    policy = p.policy
    for server in sorted(p.servers.values(), key=lambda s: s.name):
        if server.id in p.instances or server.status == ServerStatus.DELETED:
            continue
        first = p.snapshot.orphans_seen.get(server.id, p.stamp)
        seen[server.id] = first
        workload = server_tags(server).get("workload")
        remove = policy.gc_orphans and p.age(first) >= policy.orphan_grace
        p.orphans.append(Orphan(server.id, server.name, first, workload, remove))
        if server.id not in p.snapshot.orphans_seen:
            p.event(workload, "ORPHAN_FOUND", "warning", server=server.id, name=server.name,
                    gc=policy.gc_orphans)
        if remove:
            p.deletions.append(Deletion(server_id=server.id, name=server.name,
                                        reason="orphan past its grace period",
                                        workload=workload))
    return seen


def _failed_launch(p: _Pass, inst: InstanceRecord) -> bool:
    """`inst` is a unit of a launch failed before its servers appeared (`_adopt`)."""
    launch = p.launches.get(inst.launch_id or "")
    return launch is not None and launch.status == LaunchStatus.FAILED


def _held(p: _Pass, deleting: set[str]) -> dict[str, dict[str, int]]:
    """Live units per workload and pool after this pass's changes."""
    held: dict[str, dict[str, int]] = {}
    for inst in p.instances.values():
        if inst.id in deleting or p.status(inst) not in LIVE | {InstanceStatus.DRAINING}:
            continue
        if p.status(inst) in LIVE and p.value(inst, "disruption"):
            continue  # retiring (awaiting its replacement): neither coverage nor surplus
        if inst.workload and inst.pool:
            pools = held.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    return held


def _follow_idle(p: _Pass, deleting: set[str]) -> None:
    """`idle_since` and `unhealthy_since` follow the facts for every ready unit."""
    for inst in p.instances.values():
        if inst.id in deleting or p.status(inst) != InstanceStatus.READY:
            continue
        sick = p.unhealthy(inst)
        if sick and inst.unhealthy_since is None:
            p.update(inst, unhealthy_since=p.stamp)
        elif sick is False and inst.unhealthy_since is not None:
            p.update(inst, unhealthy_since=None)
        idle = p.idle(inst)
        if idle is None:
            continue
        if idle and inst.idle_since is None:
            p.update(inst, idle_since=p.stamp)
        elif not idle and inst.idle_since is not None:
            p.update(inst, idle_since=None)


def _in_flight(p: _Pass) -> list[Disruption]:
    """Every disruption in flight of the workloads (design: Disruption): this region's instances
    with
    a reason and not deleted, after this pass's changes (a draining row without one, a
    scale-down a crash left half done, counts as `empty`), its noticed ones (`noticed`), and
    the other regions' (`Snapshot.disrupted`)."""
    out: dict[str, Disruption] = {}
    for inst in p.snapshot.disrupted:
        if inst.region != p.snapshot.region:
            out.update({d.server_id: d for d in disruption.in_flight_of([inst])})
    for inst in sorted(p.instances.values(), key=lambda i: i.name):
        status, reason = p.status(inst), p.value(inst, "disruption")
        if not inst.workload or status == InstanceStatus.DELETED:
            continue
        if reason:
            reason = DisruptionReason(reason)
        elif status == InstanceStatus.DRAINING:
            reason = DisruptionReason.EMPTY
        elif status == InstanceStatus.NOTICED:
            reason = DisruptionReason.NOTICED
        else:
            continue
        out[inst.id] = Disruption(inst.id, inst.name, inst.workload, inst.pool or "", reason,
                                  disruption.REPLACE_FIRST[reason])
    return list(out.values())


def _starts(p: _Pass) -> dict[str, list[tuple[datetime, DisruptionReason]]]:
    """When each workload's recent disruptions started (every region: the budgets' rates)."""
    rows = {i.id: i for i in p.snapshot.disrupted}
    rows.update(p.instances)
    return disruption.starts_of(rows.values())


def _units(p: _Pass, deleting: set[str], only: Collection[str] | None = None) -> list[Unit]:
    """The ready units no disruption holds yet, as the candidate rules see them (of `only`'s
    server ids, when given). Each pod's effective request is worked out once, and once per
    shared container value (the adapter builds one per pod template, as intake's memo)."""
    out: list[Unit] = []
    memo: dict[tuple[int, int], dict[str, int]] = {}
    for inst in p.instances.values():
        if only is not None and inst.id not in only:
            continue
        if not (inst.workload and inst.pool) or inst.id in deleting \
                or p.status(inst) != InstanceStatus.READY or p.value(inst, "disruption"):
            continue
        slurm = p.slurm_in_view(inst)
        node = None if slurm else p.k8s_node(inst)
        pods = p.snapshot.pods.get(node.name, ()) if node is not None else ()
        used: dict[str, int] = {}
        movable: list[dict[str, int]] = []
        for pod in pods:
            if pod.phase in ("Succeeded", "Failed"):
                continue  # neither uses the node nor moves (`must_move`)
            if pod.pod_requests or pod.overhead:
                request = effective_request(pod)
            else:
                key = (id(pod.containers), id(pod.init_containers))
                request = memo.get(key) or memo.setdefault(key, effective_request(pod))
            for name, amount in request.items():
                used[name] = used.get(name, 0) + amount
            used["pods"] = used.get("pods", 0) + 1
            if not pod.deleting and not is_node_bound(pod):  # `must_move` of a live pod
                movable.append(request)
        out.append(Unit(
            inst.id, inst.name, inst.workload, inst.pool, p.value(inst, "idle_since"),
            created=inst.created, unhealthy_since=p.value(inst, "unhealthy_since"),
            allocatable=dict(node.allocatable) if node is not None and node.ready
            and not node.unschedulable else {},
            used=used, movable=tuple(movable), slurm=slurm))
    return out


def _retire(p: _Pass, deleting: set[str]) -> None:
    """Replace-before-remove (design: Disruption): a unit disrupted for a reason that is replaced
    first (expired, unhealthy) stays in service, out of coverage, while its replacement
    comes; it is removed once that leaves the workload at least its planned units in this
    region that are ready and healthy (`REPLACEMENT_READY {old, new}`): an expired unit is
    cordoned and drained, an unhealthy one (its kubelet or slurmd gone) deleted with its
    node. Unhealthy ones go first (they hold no ready unit), then by start."""
    targets, pools = p.snapshot.targets, p.snapshot.pools
    by_workload: dict[str, list[InstanceRecord]] = {}
    for inst in p.instances.values():
        if inst.workload and inst.id not in deleting and p.status(inst) == InstanceStatus.READY:
            by_workload.setdefault(inst.workload, []).append(inst)
    for workload, insts in sorted(by_workload.items()):
        retiring = [i for i in insts if p.value(i, "disruption")
                    and disruption.REPLACE_FIRST[DisruptionReason(p.value(i, "disruption"))]]
        if not retiring:
            continue
        want = sum(n for pool, n in targets.get(workload, {}).items()
                   if pools is None or pool in pools)
        healthy = [i for i in insts if p.value(i, "unhealthy_since") is None]
        named = disruption.replacements(
            _retirees(p, workload, retiring),
            [i for i in healthy if not p.value(i, "disruption")])
        count = len(healthy)
        order = sorted(retiring, key=lambda i: (p.value(i, "unhealthy_since") is None,
                                                p.value(i, "disruption_at") or "", i.name))
        for inst in order:
            sick = p.value(inst, "unhealthy_since") is not None
            left = count - (0 if sick else 1)
            if left < want:
                break
            count = left
            new = named.get(inst.id)
            reason = DisruptionReason(p.value(inst, "disruption"))
            p.event(workload, "REPLACEMENT_READY", old=inst.id, new=new, name=inst.name,
                    pool=inst.pool, reason=reason)
            if reason is DisruptionReason.UNHEALTHY:
                p.delete(inst, "unhealthy: replaced", status=InstanceStatus.DELETING,
                         power=False)
            else:
                p.update(inst, status=InstanceStatus.DRAINING)
                p.scale_downs.append(p.scale(inst, reason))


def _retirees(p: _Pass, workload: str, retiring: Sequence[InstanceRecord]
              ) -> list[InstanceRecord]:
    """`workload`'s units replaced first: those `retiring` now and those retired before
    (draining, deleting or deleted since; every region), each with when its disruption
    started — what `disruption.replacements` matches replacements to."""
    rows = {i.id: i for i in p.snapshot.disrupted if i.workload == workload}
    rows.update({i.id: i for i in p.instances.values() if i.workload == workload})
    out = [replace(i, disruption_at=p.value(i, "disruption_at")) for i in retiring]
    mine = {i.id for i in retiring}
    for inst in rows.values():
        reason = inst.disruption
        if inst.id in mine or not reason or not inst.disruption_at \
                or not disruption.REPLACE_FIRST[DisruptionReason(reason)] \
                or inst.status not in (InstanceStatus.DRAINING, InstanceStatus.DELETING,
                                       InstanceStatus.DELETED):
            continue
        out.append(inst)
    return out


def _unhealthy_pools(p: _Pass, units: Sequence[Unit]) -> set[str]:
    """Pools with too many unhealthy units at once (design: Disruption): `POOL_UNHEALTHY`, the pool
    excluded for the negative cache (as a capacity fault is), no repair there."""
    limits = {u.workload: p.policy.settings_of(u.workload).repair_max_unhealthy for u in units}
    sick = disruption.unhealthy_pools(units, max_unhealthy=limits)
    until = rfc3339(p.now + timedelta(seconds=p.policy.negative_cache))
    for pool, (count, total) in sick.items():
        if pool in p.snapshot.excluded or pool in p.exclusions:
            continue
        reason = f"POOL_UNHEALTHY: {count} of {total} units unhealthy"
        workloads = tuple(sorted({u.workload for u in units if u.pool == pool}))
        p.exclusions[pool] = ExclusionRecord(pool, reason, until, workloads)
        p.event(None, "POOL_UNHEALTHY", "warning", pool=pool, unhealthy=count, units=total,
                until=until)
        for name in workloads:
            p.mark_dirty(name, "pool unhealthy")
    return set(sick)


def _disrupt(p: _Pass, held: Mapping[str, Mapping[str, int]],
             deleting: set[str]) -> tuple[Blocked, ...]:
    """The disruptions (design: Disruption): scale-downs in flight go on (draining), units awaiting
    their replacement are removed once it is ready (`_retire`); then the candidates — `late`,
    `empty`, `unhealthy`, `underutilized`, `expired`, `rebalanced` (a planned rebalance's
    moves), `drifted`, in that order — go through the budgets
    (`core.disruption.plan`: counted in flight, rates over the recorded starts). Returns the
    ones the budgets hold back, and records the blocks that changed."""
    for inst in sorted(p.instances.values(), key=lambda i: i.name):
        if p.status(inst) == InstanceStatus.DRAINING and inst.id not in deleting and inst.workload:
            reason = p.value(inst, "disruption")
            p.scale_downs.append(p.scale(inst, DisruptionReason(reason) if reason
                                         else DisruptionReason.EMPTY))
    drifted = _drift(p, deleting)  # before `_retire`: a reverted or halted rollout ends first
    _retire(p, deleting)
    deleting = {d.instance for d in p.deletions if d.instance}
    in_flight = _in_flight(p)
    units = _units(p, deleting)
    late = [Unit(inst.id, inst.name, inst.workload, inst.pool)
            for inst in p.instances.values()
            if inst.workload and inst.pool and inst.id not in deleting
            and not p.value(inst, "disruption")
            and p.status(inst) in LIVE and _failed_launch(p, inst)]
    targets = p.snapshot.targets
    # the rules' surplus counts units in `held`, which leaves out units awaiting replacement
    draining = [d for d in in_flight if not d.replace_first]
    candidates = disruption.late(late, targets=targets, held=held, in_flight=draining)
    chosen = {c.server_id for c in candidates}
    booked = _booked(p)  # a Ready gang waiting for its job is kept (design: Gangs)
    candidates += disruption.empty(
        [u for u in units if u.server_id not in chosen and u.workload not in booked],
        targets=targets,
        held=held, in_flight=[*draining, *candidates], now=p.now,
        idle_timeout=p.policy.idle_timeout)
    sick_pools = _unhealthy_pools(p, units)
    names = {u.workload for u in units}
    candidates += disruption.unhealthy(
        [u for u in units if u.server_id not in {c.server_id for c in candidates}], now=p.now,
        repair_after={w: p.policy.settings_of(w).repair_after for w in names},
        excluded=sick_pools)
    chosen = {c.server_id for c in candidates}
    candidates += disruption.underutilized(units, targets=targets, held=held,
                                           in_flight=draining, chosen=candidates)
    chosen = {c.server_id for c in candidates}
    candidates += disruption.expired(
        [u for u in units if u.server_id not in chosen], now=p.now,
        expire_after={w: p.policy.settings_of(w).expire_after for w in names})
    chosen = {c.server_id for c in candidates}
    ready = {u.server_id: u for u in units}
    candidates += tuple(  # Rebalance: a planned rebalance's moves in its order, replaced first
        Disruption(u.server_id, u.name, u.workload, u.pool, DisruptionReason.REBALANCED,
                   disruption.REPLACE_FIRST[DisruptionReason.REBALANCED])
        for u in (ready.get(s) for s in p.snapshot.rebalance_moves)
        if u is not None and u.server_id not in chosen)
    chosen = {c.server_id for c in candidates}
    candidates += tuple(d for d in drifted if d.server_id not in chosen)
    registered: dict[str, int] = {w: sum(pools.values()) for w, pools in held.items()}
    for d in in_flight:  # retiring units are registered still
        if d.replace_first and d.server_id in p.instances \
                and p.status(p.instances[d.server_id]) in LIVE:
            registered[d.workload] = registered.get(d.workload, 0) + 1
    candidates = opted_out(candidates, p.snapshot.pods,  # Constraints: pods that opt out
                           lambda c: p.node_of(p.instances[c.server_id]))
    if p.snapshot.paused:  # an operator's pause: none starts, the budgets' blocks stand
        p.paused = tuple(candidates)
        return ()
    decided = disruption.plan(
        candidates, in_flight=in_flight, registered=registered,
        budgets=p.policy.budgets, workload_budgets=p.policy.workload_budgets, now=p.now,
        starts=_starts(p))
    p.started, p.allowed = decided.start, decided.allowed
    for unit in decided.start:
        _start(p, unit)
    _record_blocks(p, decided.blocked, {*held, *names, *(c.workload for c in candidates)})
    return decided.blocked


def _start(p: _Pass, unit: Disruption) -> None:
    """Start one disruption: recorded on the instance (in flight from now), then acted on."""
    inst = p.instances[unit.server_id]
    reason = unit.reason
    p.update(inst, disruption=reason.value, disruption_at=p.stamp)
    p.event(unit.workload, "DISRUPTION_STARTED", server=inst.id, name=inst.name,
            pool=unit.pool, reason=reason)
    if reason is DisruptionReason.EXPIRED:
        p.event(unit.workload, "UNIT_EXPIRED", server=inst.id, name=inst.name, pool=unit.pool,
                created=inst.created)
    elif reason is DisruptionReason.UNHEALTHY:
        p.event(unit.workload, "UNIT_UNHEALTHY", "warning", server=inst.id, name=inst.name,
                pool=unit.pool, since=p.value(inst, "unhealthy_since"))
    if unit.replace_first:
        p.mark_dirty(unit.workload, f"unit {reason}: replacing it")
        return  # `_retire` removes it once its replacement is ready
    if p.status(inst) != InstanceStatus.READY:  # never joined: nothing to drain
        p.delete(inst, "late launch: above the plan")
        p.event(unit.workload, "INSTANCE_SCALE_DOWN", server=inst.id, name=inst.name,
                pool=unit.pool, reason=reason)
        return
    p.update(inst, status=InstanceStatus.DRAINING)
    p.scale_downs.append(p.scale(inst, reason))
    p.event(unit.workload, "INSTANCE_SCALE_DOWN", server=inst.id, name=inst.name,
            pool=unit.pool, idle_since=inst.idle_since, reason=reason)


def _record_blocks(p: _Pass, blocked: Sequence[Blocked], workloads: Iterable[str]) -> None:
    """The budget blocks now, per (workload, reason); `DISRUPTION_BLOCKED` for each that was
    not blocked at the last pass, or was held by another budget or until another time (once
    per change: a block by the units in flight that turns into one by the rate is told).
    Its detail names the budget (`budget`: its index; `limit`: what of it holds, the units
    in flight or the rate, `units` its count) and `until` when time alone lifts it (absent:
    when a disruption in flight ends)."""
    before = {(b.workload, b.reason): b for b in p.snapshot.blocks}
    now: dict[tuple[str, str], DisruptionBlock] = {}
    for held in blocked:
        d = held.disruption
        key = (d.workload, d.reason.value)
        if key in now:
            continue
        until = rfc3339(held.until) if held.until is not None else None
        now[key] = DisruptionBlock(d.workload, d.reason.value, held.index, until)
        if before.get(key) != now[key]:
            budget = held.budget
            p.event(d.workload, "DISRUPTION_BLOCKED", reason=d.reason, budget=held.index,
                    by=held.by, limit=holding(budget, held.by), units=str(budget.units),
                    **({"until": until} if until is not None else {}), server=d.server_id)
    touched = set(workloads) | {w for w, _ in now}
    if {k: v for k, v in before.items() if k[0] in touched} != now:
        p.blocks = [now[k] for k in sorted(now)]
        p.block_workloads = touched


def _drift(p: _Pass, deleting: set[str]) -> tuple[Disruption, ...]:
    """Drift (design: Drift, `core.drift`): Node labels the config changed are patched in place
    (`DRIFT_PATCHED`); each ready unit whose spec hash no longer matches is recorded once
    (`UNIT_DRIFTED {server, fields}`); a drifted unit awaiting its replacement whose spec
    matches again (the config reverted) or whose workload's rollout halted
    (`DRIFT_ROLLOUT_HALTED`, once per workload and hashes) goes back in service. Returns the
    `drifted` candidates for the budgets, in replacement order, within each rollout's room
    (one at a time while its canary soaks, none when halted)."""
    view = p.snapshot.drift
    if view is None:
        return ()
    _patch_meta(p, view, deleting)
    ready = [i for i in p.instances.values()
             if i.id not in deleting and p.status(i) == InstanceStatus.READY]
    found = drift.drifted(ready, view.specs, view.known, view.kept)
    for d in found:
        if d.server_id not in view.noted:
            p.event(d.workload, "UNIT_DRIFTED", server=d.server_id, name=d.name, pool=d.pool,
                    fields=list(d.fields), spec=p.instances[d.server_id].spec_hash,
                    to=hash_of(view.specs[(d.workload, d.pool)]))
    flying = [i for i in ready if p.value(i, "disruption") == DisruptionReason.DRIFTED]
    if not found and not flying:
        return ()
    rows = [replace(i, status=p.status(i)) for i in p.instances.values()]
    rows += [i for i in view.launched if i.id not in p.instances]
    rollouts: dict[str, drift.Rollout] = {}
    for name in sorted({d.workload for d in found} | {i.workload or "" for i in flying}):
        knobs = p.policy.settings_of(name).drift
        r = drift.held(drift.rollout(name, drift.current_hashes(name, view.specs), rows,
                                     now=p.now, soak=knobs.soak, halt_after=knobs.halt_after,
                                     resumed=view.resumed.get(name)),
                       view.unresolved_image)
        rollouts[name] = r
        key = (name, ",".join(r.hashes))
        if r.phase is drift.Phase.HALTED and key not in view.halted:
            missing = {} if view.unresolved_image is None else {
                "image": view.unresolved_image,
                "why": f"image {view.unresolved_image} not found in region {p.snapshot.region}"}
            p.event(name, "DRIFT_ROLLOUT_HALTED", "warning", failures=r.failures,
                    hashes=list(r.hashes), halt_after=knobs.halt_after, **missing)
    still = {d.server_id for d in found}
    for inst in flying:
        halted = rollouts[inst.workload or ""].phase is drift.Phase.HALTED
        if inst.id in still and not halted:
            continue
        p.update(p.instances[inst.id], disruption=None, disruption_at=None)
        p.event(inst.workload, "DRIFT_ENDED", server=inst.id, name=inst.name, pool=inst.pool,
                why="halted" if halted else "reverted")
        p.mark_dirty(inst.workload, "drift rollout ended")
    if not still:
        return ()
    units = _units(p, deleting, still)
    return drift.candidates(units, found, rollouts, _in_flight(p))


def _patch_meta(p: _Pass, view: DriftView, deleting: set[str]) -> None:
    """Meta drift (design: Drift): the labels a ready unit's Node lacks or holds otherwise than
    the config's `pools[].labels` and `workloads[].node_labels` say, patched in place."""
    if view.node_labels is None:
        return
    for inst in sorted(p.instances.values(), key=lambda i: i.name):
        if inst.id in deleting or p.status(inst) != InstanceStatus.READY \
                or p.slurm_in_view(inst) or not (inst.workload and inst.pool):
            continue
        node = p.k8s_node(inst)
        want = view.node_labels.get((inst.workload, inst.pool))
        if node is None or want is None:
            continue
        patch = drift.meta_patches(node.labels, want, drift.given_keys(inst.labels))
        if patch:
            p.label_patches.append(LabelPatch(node.name, patch))
            p.event(inst.workload, "DRIFT_PATCHED", server=inst.id, name=inst.name,
                    node=node.name, labels={k: v for k, v in patch.items() if v is not None},
                    removed=sorted(k for k, v in patch.items() if v is None))
        else:  # recorded once the Node carries it: a failed patch is tried again, removals too
            p.update(inst, labels=drift.label_keys(want))
