"""The reconciler's decision (DESIGN §7), pure: what Nova, Kubernetes and Slurm hold in, the
changes to make out.

`decide(snapshot, policy, now)` reads plain values only — the region's servers tagged
``sco:managed`` (ERROR ones already read by id, so their fault is known), the Kubernetes nodes
and how many non-DaemonSet pods each holds, the Slurm nodes, the state's instances and
in-flight launch intents, the plan targets and the known workloads — and returns a `Decision`:
instance rows to add (adoptions) or change, launch intents to settle, servers to delete (and
why), scale-downs to carry out, pools to exclude, events, workloads to re-plan and orphans.

No I/O, no clock, no logging: time comes in as `now`. Every change is a transition, so a
second `decide` over the world the first one produced returns an empty decision (a second
reconcile in a row changes nothing).

Lifecycle of an instance: ``requested → building → active → ready``, then ``draining →
deleting → deleted``, or ``error``; a reclaim notice takes it through ``noticed`` (the notice
stage, `scoctl.core.notice`) to ``deleting``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from scoctl.core.demand import NodeInfo
from scoctl.core.diff import disruption_allowance, surplus
from scoctl.core.model import InstanceRecord, LaunchRecord, ServerInfo, SlurmNode
from scoctl.core.timefmt import parse_rfc3339, rfc3339
from scoctl.errors import QuotaExceeded

MANAGED_TAG = "sco:managed"
LIVE = frozenset({"requested", "building", "active", "ready"})
RECLAIMABLE_TAINT = ("reclaimable", "true", "NoSchedule")
# Slurm flags that mean the node is not up (yet, or any more)
SLURM_NOT_UP = frozenset({"POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "NOT_RESPONDING",
                          "POWER_DOWN"})
SLURM_IDLE_STATES = frozenset({"idle"})
# Slurm flags of a node that is powered down or on its way there
SLURM_POWERED_OFF = frozenset({"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN"})


@dataclass(frozen=True)
class Policy:
    """The reconciler's knobs (seconds), from the config's `timeouts` and friends."""

    launch_timeout: float = 300.0
    registration_timeout: float = 900.0
    idle_timeout: float = 600.0
    negative_cache: float = 180.0
    orphan_grace: float = 1800.0
    gc_orphans: bool = False
    disruption_budget: float = 0.10


@dataclass(frozen=True)
class Snapshot:
    """Everything `decide` looks at, for one region.

    `servers` are the region's servers tagged ``sco:managed``. `k8s_nodes` / `slurm_nodes` are
    None when that system is not in use (then nothing is ever "ready" through it).
    `busy_pods[node]` counts the pods on a Kubernetes node that are not DaemonSet, mirror or
    finished pods. `suspended` names Slurm nodes that Slurm's SuspendProgram or
    ResumeFailProgram handed back. `orphans_seen[server id]` is when an orphan was first seen.
    `tiers[pool]` is ``committed`` or ``reclaimable``.
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
    workloads: frozenset[str] = frozenset()
    tiers: Mapping[str, str] = field(default_factory=dict)
    orphans_seen: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class InstanceUpdate:
    """Change these fields of the instance row `id`."""

    id: str
    fields: Mapping[str, Any]


@dataclass(frozen=True)
class LaunchUpdate:
    """Settle a launch intent: ``recorded`` (servers adopted) or ``failed``."""

    launch_id: str
    status: str
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


@dataclass(frozen=True)
class Exclusion:
    pool: str
    reason: str
    until: str


@dataclass(frozen=True)
class Event:
    workload: str | None
    token: str
    level: str
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Orphan:
    """A server tagged ``sco:managed`` whose launch and workload scoctl does not know."""

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
    exclusions: tuple[Exclusion, ...] = ()
    events: tuple[Event, ...] = ()
    dirty: Mapping[str, str] = field(default_factory=dict)
    adoptions: tuple[str, ...] = ()
    orphans: tuple[Orphan, ...] = ()
    orphans_seen: Mapping[str, str] = field(default_factory=dict)
    held: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """True when nothing would change (orphans only reported, not new)."""
        return not (self.new_instances or self.updates or self.launch_updates
                    or self.deletions or self.scale_downs or self.exclusions or self.events
                    or self.dirty)


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
    if labels.get("sco/managed") != "true":
        return False
    if workload and labels.get("sco/workload") != workload:
        return False
    if pool and labels.get("sco/pool") != pool:
        return False
    if reclaimable:
        return any((t.key, t.value, t.effect) == RECLAIMABLE_TAINT for t in node.taints)
    return True


def slurm_up(node: SlurmNode | None) -> bool:
    """A Slurm node counts as up: known, not down, not powered (or powering) down or up."""
    if node is None:
        return False
    if node.state in ("down", "unknown", "future") or "DOWN" in node.flags:
        return False
    return not node.flags & SLURM_NOT_UP


def slurm_idle(node: SlurmNode | None) -> bool:
    """Idle for scale-down: no job on it, or powered down by power saving."""
    if node is None:
        return False
    if node.powered_down or "POWERING_DOWN" in node.flags:
        return True
    return node.state in SLURM_IDLE_STATES and "POWERING_UP" not in node.flags


def _nova_status(server: ServerInfo) -> str:
    return server.status.upper()


class _Builder:
    """Collects the decision while the rules run (local to one `decide` call)."""

    def __init__(self) -> None:
        self.new: list[InstanceRecord] = []
        self.updates: dict[str, dict[str, Any]] = {}
        self.launches: dict[str, LaunchUpdate] = {}
        self.deletions: list[Deletion] = []
        self.scale_downs: list[ScaleDown] = []
        self.exclusions: dict[str, Exclusion] = {}
        self.events: list[Event] = []
        self.dirty: dict[str, str] = {}
        self.adopted: list[str] = []
        self.orphans: list[Orphan] = []

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


def decide(snapshot: Snapshot, policy: Policy, now: datetime) -> Decision:
    """The reconcile decision for one region (see the module docstring for the rules)."""
    b = _Builder()
    stamp = rfc3339(now)
    by_id = {s.id: s for s in snapshot.servers if MANAGED_TAG in s.tags}
    instances = {i.id: i for i in snapshot.instances if i.region == snapshot.region}
    launches = {launch.launch_id: launch for launch in snapshot.launches
                if launch.region == snapshot.region}
    nodes_by_name: dict[str, NodeInfo] = {}
    nodes_by_provider: dict[str, NodeInfo] = {}
    for node in snapshot.k8s_nodes or ():
        nodes_by_name[node.name] = node
        if node.provider_id:
            nodes_by_provider[node.provider_id.rsplit("/", 1)[-1]] = node
    slurm = {n.name: n for n in snapshot.slurm_nodes or ()}

    def k8s_node(inst: InstanceRecord) -> NodeInfo | None:
        return nodes_by_provider.get(inst.id) or nodes_by_name.get(inst.name)

    def ready(inst: InstanceRecord) -> bool | None:
        """Registered and up; None when the system that would say so was not read."""
        if inst.node_name:
            if snapshot.slurm_nodes is None:
                return None
            return slurm_up(slurm.get(inst.node_name))
        if snapshot.k8s_nodes is None:
            return None
        return k8s_ready(k8s_node(inst), workload=inst.workload, pool=inst.pool,
                         reclaimable=snapshot.tiers.get(inst.pool or "") == "reclaimable")

    def node_of(inst: InstanceRecord) -> str | None:
        if inst.node_name and snapshot.slurm_nodes is not None:
            return None
        node = k8s_node(inst)
        return node.name if node is not None else None

    def power_down(name: str | None, server_id: str = "") -> str | None:
        """The Slurm node to put back to powered-down, unless Slurm has it powered (or
        powering) down already — POWER_DOWN_FORCE would run SuspendProgram again and keep the
        node from resuming for SuspendTimeout — or another live instance (a fallback launch)
        now serves that node name."""
        if not name or snapshot.slurm_nodes is None:
            return None
        known = slurm.get(name)
        if known is not None and known.flags & SLURM_POWERED_OFF:
            return None
        for other in instances.values():
            status = b.updates.get(other.id, {}).get("status", other.status)
            if other.id != server_id and other.node_name == name and status in LIVE:
                return None
        return name

    def delete(inst: InstanceRecord, reason: str, *, power: bool = True,
               **fields: Any) -> None:
        """Delete the instance's server; a failed Slurm launch also powers its node down
        (`power`; not on a retried delete — the first one did, and the name may be served
        again — nor for a node Slurm handed back itself)."""
        b.update(inst, **fields)
        b.deletions.append(Deletion(
            server_id=inst.id, name=inst.name, reason=reason, workload=inst.workload,
            pool=inst.pool, instance=inst.id, node=node_of(inst),
            slurm_node=power_down(inst.node_name, inst.id) if power else None))

    # 1. adopt servers scoctl launched but never recorded (crash between intent and record)
    adopted_launches: set[str] = set()
    for server in sorted(by_id.values(), key=lambda s: s.name):
        if server.id in instances:
            continue
        tags = server_tags(server)
        launch = launches.get(tags.get("launch", ""))
        workload = tags.get("workload") or (launch.workload if launch else None)
        if launch is None and workload not in snapshot.workloads:
            continue  # an orphan: handled below
        node_name = None
        if launch is not None and launch.node_names:
            node_name = server.name if server.name in launch.node_names else launch.node_names[0]
        generation = tags.get("gen")
        record = InstanceRecord(
            id=server.id, name=server.name, region=snapshot.region, workload=workload,
            pool=tags.get("pool") or (launch.pool if launch else None),
            generation=int(generation) if generation and generation.isdigit() else
            (launch.generation if launch else None),
            launch_id=launch.launch_id if launch else tags.get("launch"),
            status="requested", created=launch.created if launch else stamp, updated=stamp,
            node_name=node_name)
        b.new.append(record)
        instances[record.id] = record
        if launch is not None and launch.launch_id not in adopted_launches:
            adopted_launches.add(launch.launch_id)
            b.adopted.append(launch.launch_id)
            if launch.status != "recorded":
                b.launches[launch.launch_id] = LaunchUpdate(launch.launch_id, "recorded")
            b.event(workload, "LAUNCH_ADOPTED", launch=launch.launch_id, pool=launch.pool)

    # 2. launch intents with no server after the launch timeout: failed, units freed
    for launch in launches.values():
        if launch.status not in ("intent", "called") or launch.launch_id in adopted_launches:
            continue
        if any(i.launch_id == launch.launch_id for i in instances.values()):
            b.launches[launch.launch_id] = LaunchUpdate(launch.launch_id, "recorded")
            continue
        if _age(now, launch.created) >= policy.launch_timeout:
            b.launches[launch.launch_id] = LaunchUpdate(
                launch.launch_id, "failed", "no server carries its sco:launch tag after the "
                f"launch timeout ({policy.launch_timeout:g}s)")
            b.event(launch.workload, "LAUNCH_TIMEOUT", "warning", launch=launch.launch_id,
                    pool=launch.pool, servers=0)
            b.mark_dirty(launch.workload, "launch failed")
            for name in launch.node_names:
                if power_down(name):
                    b.deletions.append(Deletion(server_id="", name=name,
                                                reason="launch failed", workload=launch.workload,
                                                pool=launch.pool, slurm_node=name))

    # 3. every tracked instance against its server
    for inst in sorted(instances.values(), key=lambda i: (i.workload or "", i.name)):
        _track(b, inst, by_id.get(inst.id), snapshot, policy, now, stamp, ready, delete,
               power_down)

    # 4. orphans: tagged by scoctl, unknown launch and workload
    seen: dict[str, str] = {}
    for server in sorted(by_id.values(), key=lambda s: s.name):
        if server.id in instances:
            continue
        first = snapshot.orphans_seen.get(server.id, stamp)
        seen[server.id] = first
        tags = server_tags(server)
        gone = _nova_status(server) == "DELETED"
        remove = (policy.gc_orphans and not gone
                  and _age(now, first) >= policy.orphan_grace)
        b.orphans.append(Orphan(server.id, server.name, first, tags.get("workload"), remove))
        if server.id not in snapshot.orphans_seen:
            b.event(tags.get("workload"), "ORPHAN_FOUND", "warning", server=server.id,
                    name=server.name, gc=policy.gc_orphans)
        if remove:
            b.deletions.append(Deletion(server_id=server.id, name=server.name,
                                        reason="orphan past its grace period",
                                        workload=tags.get("workload")))

    # 5. scale-down of idle units the plan no longer needs, under the disruption budget
    deleting: set[str] = {d.instance for d in b.deletions if d.instance}
    held = _held(instances, b.updates, deleting)
    _scale_down(b, instances, held, deleting, snapshot, policy, now, stamp, slurm)

    return Decision(
        new_instances=tuple(b.new),
        updates=tuple(InstanceUpdate(k, v) for k, v in sorted(b.updates.items())),
        launch_updates=tuple(b.launches[k] for k in sorted(b.launches)),
        deletions=tuple(b.deletions),
        scale_downs=tuple(b.scale_downs),
        exclusions=tuple(b.exclusions[k] for k in sorted(b.exclusions)),
        events=tuple(b.events),
        dirty=dict(sorted(b.dirty.items())),
        adoptions=tuple(b.adopted),
        orphans=tuple(b.orphans),
        orphans_seen=seen,
        held={w: dict(p) for w, p in sorted(held.items())},
    )


def _track(b: _Builder, inst: InstanceRecord, server: ServerInfo | None, snapshot: Snapshot,
           policy: Policy, now: datetime, stamp: str,
           ready: Callable[[InstanceRecord], bool | None],
           delete: Callable[..., None],
           power_down: Callable[[str | None, str], str | None]) -> None:
    """The lifecycle rules for one tracked instance."""
    status = inst.status
    if status in ("deleted", "noticed"):
        return  # a noticed instance is the notice stage's until its end (DESIGN §14)
    if server is None or _nova_status(server) == "DELETED":
        if status in ("deleting", "draining") or status == "error":
            b.update(inst, status="deleted")
            b.event(inst.workload, "INSTANCE_DELETED", server=inst.id, name=inst.name,
                    pool=inst.pool)
            return
        # it was live and nobody here deleted it: reclaimed
        b.update(inst, status="deleted", fault=inst.fault or "gone (reclaimed)")
        b.event(inst.workload, "INSTANCE_RECLAIMED", "warning", server=inst.id,
                name=inst.name, pool=inst.pool, was=status)
        b.mark_dirty(inst.workload, "units lost to a reclaim")
        node = power_down(inst.node_name, inst.id)
        if node:
            b.deletions.append(Deletion(server_id="", name=inst.name, reason="reclaimed",
                                        workload=inst.workload, pool=inst.pool,
                                        slurm_node=node))
        return
    nova = _nova_status(server)
    if status == "deleting":
        # Nova accepted the delete; retry only if the server lingers past the launch timeout
        if _age(now, inst.updated) >= policy.launch_timeout:
            delete(inst, "delete retried: the server is still there", power=False)
        return
    if status == "draining":
        return  # the scale-down pass carries it on
    if inst.node_name and inst.node_name in snapshot.suspended and status in LIVE:
        # Slurm's SuspendProgram / ResumeFailProgram handed the node back, powered down
        # already: no drain, and no second power-down
        delete(inst, "suspended by Slurm power saving", power=False, status=status)
        return
    if nova == "ERROR":
        if status == "error":
            delete(inst, "delete retried", power=False)  # recorded already; last delete failed
            return
        fault = server.fault_message or f"ERROR (fault {server.fault_code})"
        was_active = inst.active_at is not None or status in ("active", "ready")
        if was_active:
            b.event(inst.workload, "INSTANCE_RECLAIMED", "warning", server=inst.id,
                    name=inst.name, pool=inst.pool, fault=fault)
            b.mark_dirty(inst.workload, "units lost to a reclaim")
            delete(inst, "reclaimed (ERROR after ACTIVE)", status="error", fault=fault)
            return
        if server.fault_error() is QuotaExceeded:
            b.event(inst.workload, "QUOTA_EXCEEDED", "warning", server=inst.id,
                    pool=inst.pool, fault=fault)
            b.mark_dirty(inst.workload, "launch failed on quota")
        else:
            until = rfc3339(now + timedelta(seconds=policy.negative_cache))
            if inst.pool and inst.pool not in b.exclusions:
                b.exclusions[inst.pool] = Exclusion(inst.pool, f"capacity fault: {fault}",
                                                    until)
                b.event(inst.workload, "POOL_EXCLUDED", "warning", pool=inst.pool,
                        until=until, fault=fault)
            b.mark_dirty(inst.workload, f"pool {inst.pool} excluded")
        delete(inst, "launch failed", status="error", fault=fault)
        return
    if status == "error":
        delete(inst, "delete retried", power=False)
        return
    if nova == "BUILD":
        if status == "requested":
            b.update(inst, status="building")
        if _age(now, inst.created) >= policy.launch_timeout:
            b.event(inst.workload, "LAUNCH_TIMEOUT", "warning", server=inst.id,
                    name=inst.name, pool=inst.pool)
            b.mark_dirty(inst.workload, "launch timed out")
            delete(inst, "launch timeout", status="error",
                   fault=f"still BUILD after {policy.launch_timeout:g}s")
        return
    if nova != "ACTIVE":
        return  # SHUTOFF, REBOOT, ...: nothing scoctl decides on
    active_at = inst.active_at or stamp
    if status in ("requested", "building"):
        b.update(inst, status="active", active_at=active_at)
        status = "active"
    if status == "active":
        up = ready(inst)
        if up:
            b.update(inst, status="ready", ready_at=stamp, active_at=active_at)
            b.event(inst.workload, "INSTANCE_READY", server=inst.id, name=inst.name,
                    pool=inst.pool)
        elif up is False and _age(now, active_at) >= policy.registration_timeout:
            b.event(inst.workload, "REGISTRATION_TIMEOUT", "warning", server=inst.id,
                    name=inst.name, pool=inst.pool)
            b.mark_dirty(inst.workload, "node never registered")
            delete(inst, "registration timeout", status="error", active_at=active_at,
                   fault=f"no ready node after {policy.registration_timeout:g}s")
        return


def _held(instances: Mapping[str, InstanceRecord], updates: Mapping[str, Mapping[str, Any]],
          deleting: set[str]) -> dict[str, dict[str, int]]:
    """Live units per workload and pool after this pass's changes."""
    held: dict[str, dict[str, int]] = {}
    for inst in instances.values():
        status = updates.get(inst.id, {}).get("status", inst.status)
        if inst.id in deleting or status not in LIVE | {"draining"}:
            continue
        if inst.workload and inst.pool:
            pools = held.setdefault(inst.workload, {})
            pools[inst.pool] = pools.get(inst.pool, 0) + 1
    return held


def _scale_down(b: _Builder, instances: Mapping[str, InstanceRecord],
                held: Mapping[str, Mapping[str, int]], deleting: set[str],
                snapshot: Snapshot, policy: Policy, now: datetime, stamp: str,
                slurm: Mapping[str, SlurmNode]) -> None:
    def current(inst: InstanceRecord) -> str:
        return str(b.updates.get(inst.id, {}).get("status", inst.status))

    def idle(inst: InstanceRecord) -> bool | None:
        if inst.node_name and snapshot.slurm_nodes is not None:
            return slurm_idle(slurm.get(inst.node_name))
        if snapshot.k8s_nodes is None:
            return None
        return snapshot.busy_pods.get(inst.name, 0) == 0

    # idle_since follows the facts for every ready unit
    for inst in instances.values():
        if inst.id in deleting or current(inst) != "ready":
            continue
        state = idle(inst)
        if state is None:
            continue
        if state and inst.idle_since is None:
            b.update(inst, idle_since=stamp)
        elif not state and inst.idle_since is not None:
            b.update(inst, idle_since=None)

    live = {(w, p): n for w, pools in held.items() for p, n in pools.items()}
    extra = surplus(snapshot.targets, live)
    allowance = {w: disruption_allowance(sum(p.values()), policy.disruption_budget)
                 for w, p in held.items()}
    # a crash mid-drain: finish those first (they count against the budget)
    for inst in sorted(instances.values(), key=lambda i: i.name):
        if current(inst) == "draining" and inst.id not in deleting and inst.workload:
            allowance[inst.workload] = allowance.get(inst.workload, 1) - 1
            b.scale_downs.append(_scale(inst, snapshot))
    for (workload, pool), count in sorted(extra.items()):
        candidates = []
        for inst in instances.values():
            if (inst.workload, inst.pool) != (workload, pool) or inst.id in deleting:
                continue
            if current(inst) != "ready":
                continue
            since = b.updates.get(inst.id, {}).get("idle_since", inst.idle_since)
            if since is None or _age(now, since) < policy.idle_timeout:
                continue
            candidates.append((since, inst.name, inst))
        count -= sum(1 for s in b.scale_downs if (s.workload, s.pool) == (workload, pool))
        for _, _, inst in sorted(candidates)[:max(0, count)]:
            if allowance.get(workload, 0) <= 0:
                break
            allowance[workload] -= 1
            b.update(inst, status="draining")
            b.scale_downs.append(_scale(inst, snapshot))
            b.event(workload, "INSTANCE_SCALE_DOWN", server=inst.id, name=inst.name,
                    pool=pool, idle_since=inst.idle_since)


def _scale(inst: InstanceRecord, snapshot: Snapshot) -> ScaleDown:
    slurm_node = inst.node_name if inst.node_name and snapshot.slurm_nodes is not None else None
    return ScaleDown(instance=inst.id, server_id=inst.id, name=inst.name,
                     workload=inst.workload or "", pool=inst.pool or "",
                     node=None if slurm_node else inst.name, slurm_node=slurm_node)
