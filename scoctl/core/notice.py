"""Reclaim notices (design: Notices), pure: notices, instances, nodes and `now` in, the flow's steps
out.

A notice reaches scoctl as the server metadata key ``sco:reclaim-at`` (RFC 3339, read from the
normal server listing) or as a `NoticeRecord` that ``scoctl notice`` announced through the spool,
for one server or for every server of a pool. For each live instance a notice covers,
`decide` returns, in one `NoticeDecision`:

1. the start: a `NoticedRecord`, the instance status ``noticed``, ``RECLAIM_NOTICED`` (workload,
   server, pool, deadline, lead time), the pool excluded until the deadline plus the capacity
   cool-down, and the workload marked for re-planning, so that the same pass plans and launches
   its replacement (a ``noticed`` unit is not live: `core.fleet.units_of` leaves it out);
2. the drain, every pass: cordon; evict the pods that must move through the Eviction API once
   no unit of the workload is still booting (the replacement is Ready, or none is coming) or
   once ``deadline − 2·drain_margin`` has passed; from ``deadline − drain_margin`` on, delete
   them instead. Slurm: ``DRAIN`` with the reason ``sco: reclaim at T`` (and the node dropped
   from its claim, so no second server is launched under its name), the node's jobs requeued at
   ``deadline − drain_margin``;
3. the end: a `Removal` once the node is empty, or at the deadline whatever is left (never
   before the deadline while work remains); a server the provider took first (gone, or ERROR)
   ends it too; a notice withdrawn before the deadline (metadata key removed) uncordons;
4. ``REPLACEMENT_READY`` once the first unit of the workload launched after the notice is Ready.

No I/O, no clock, no logging: time comes in as `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from scoctl.core.demand import must_move
from scoctl.core.model import (
    ExclusionRecord,
    InstanceRecord,
    NodeInfo,
    NoticedRecord,
    NoticeRecord,
    NoticeSource,
    PodInfo,
    ServerInfo,
    SlurmNode,
)
from scoctl.core.model.vocabulary import META_RECLAIM_AT, InstanceStatus, ServerStatus
from scoctl.core.reconcile import (
    BOOTING,
    LIVE,
    Event,
    node_server_id,
    slurm_power_down,
)
from scoctl.core.text import printable
from scoctl.core.timefmt import parse_rfc3339, rfc3339

CAN_NOTICE = LIVE | {InstanceStatus.NOTICED}
# A reclaim is announced minutes to months ahead; a time farther ahead (9999-12-31, a year
# typed wrong) is a broken reclaimer, not a notice, and would keep a pool excluded for ever.
# A time in the past, however far, is a reclaim due now (design: Notices).
NOTICE_HORIZON = timedelta(days=366)
_LATEST = datetime.max.replace(tzinfo=UTC)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def parse_notice_time(text: str) -> datetime:
    """An RFC 3339 time with its offset (``2026-05-01T12:00:00Z``), in UTC.

    Raises ValueError for anything else, a time without an offset included, and one that has
    no UTC form (``0001-01-01T00:00:00+01:00``).
    """
    value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise ValueError(f"{text!r} is out of range") from exc


def within_horizon(moment: datetime, now: datetime) -> bool:
    """True when a notice time is at most `NOTICE_HORIZON` after `now` (any time before it is
    a reclaim due now)."""
    return moment - now <= NOTICE_HORIZON  # a timedelta holds any two datetimes' gap


def shifted(moment: datetime, delta: timedelta) -> datetime:
    """`moment` + `delta`, saturated at the ends of the calendar instead of raising: a notice
    time an older state holds may sit at either end."""
    try:
        return moment + delta
    except OverflowError:
        return _LATEST if delta > timedelta(0) else _EARLIEST


@dataclass(frozen=True)
class NoticePolicy:
    """The flow's knobs (seconds): `drain_margin` before the deadline evictions give way to
    deletions and Slurm jobs are requeued; `cooldown` (the capacity cool-down) extends the
    pool's exclusion past the deadline."""

    drain_margin: float
    cooldown: float


@dataclass(frozen=True)
class NoticeSnapshot:
    """What `decide` looks at, for one region.

    `servers` is the region's ``sco:managed`` listing (with metadata; noticed servers the list
    missed read by id). `noticed` holds the open noticed instances and the closed ones still
    waiting for their replacement. `exclusions[pool]` is the end of the exclusion in force.
    `booting_launches` names workloads with launches in flight. `pods[node]` lists the pods
    bound to a noticed Kubernetes node (a node missing there: its pods are unknown);
    `slurm_jobs[node]` the jobs running on a Slurm node. `k8s_nodes` / `slurm_nodes` are None
    when that system was not read. `warned` holds the (server id, ``sco:reclaim-at`` value)
    pairs already reported as outside the horizon (``NOTICE_IGNORED`` in the event log).
    """

    region: str
    servers: tuple[ServerInfo, ...] = ()
    instances: tuple[InstanceRecord, ...] = ()
    announced: tuple[NoticeRecord, ...] = ()
    noticed: tuple[NoticedRecord, ...] = ()
    exclusions: Mapping[str, str] = field(default_factory=dict)
    booting_launches: frozenset[str] = frozenset()
    k8s_nodes: tuple[NodeInfo, ...] | None = None
    pods: Mapping[str, tuple[PodInfo, ...]] = field(default_factory=dict)
    slurm_nodes: tuple[SlurmNode, ...] | None = None
    slurm_jobs: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    warned: frozenset[tuple[str, str]] = frozenset()


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str
    uid: str = ""  # the pod meant: its eviction carries it as a precondition


@dataclass(frozen=True)
class Drain:
    """This pass's Kubernetes steps for one noticed node."""

    server_id: str
    node: str
    cordon: bool = False
    uncordon: bool = False
    evict: tuple[PodRef, ...] = ()
    delete: tuple[PodRef, ...] = ()


@dataclass(frozen=True)
class SlurmStep:
    """This pass's Slurm steps for one noticed node: `drain_reason` for ``State=DRAIN``,
    `release` drops the node from its claim, `requeue` the jobs to requeue, `resume` undoes the
    drain of a withdrawn notice, `power_down` puts the node of a server the provider took back
    to powered-down."""

    server_id: str
    node: str
    drain_reason: str | None = None
    release: bool = False
    requeue: tuple[int, ...] = ()
    resume: bool = False
    power_down: bool = False


@dataclass(frozen=True)
class Removal:
    """Delete a noticed server (`why`: empty, deadline or error) with its Kubernetes Node, put
    its Slurm node back to powered-down (`slurm_node`; None when reconcile's rule,
    `core.reconcile.slurm_power_down`, says not to); once the delete is accepted, record
    `row` (closed), the instance status ``deleting`` and `event` (``INSTANCE_RECLAIMED``)."""

    server_id: str
    name: str
    why: str
    row: NoticedRecord
    event: Event
    node: str | None = None
    slurm_node: str | None = None


@dataclass(frozen=True)
class NoticeDecision:
    """What one pass of the notice flow changes in one region."""

    rows: tuple[NoticedRecord, ...] = ()
    statuses: Mapping[str, InstanceStatus] = field(default_factory=dict)
    exclusions: tuple[ExclusionRecord, ...] = ()
    dirty: Mapping[str, str] = field(default_factory=dict)
    events: tuple[Event, ...] = ()
    drains: tuple[Drain, ...] = ()
    slurm: tuple[SlurmStep, ...] = ()
    removals: tuple[Removal, ...] = ()
    expired: tuple[tuple[str, str], ...] = ()
    warnings: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """True when the pass would change nothing."""
        return not (self.rows or self.statuses or self.exclusions or self.dirty or self.events
                    or self.drains or self.slurm or self.removals or self.expired)


@dataclass(frozen=True)
class Notice:
    """The notice in force for one instance: the earliest of its sources."""

    deadline: datetime
    source: NoticeSource
    reason: str = ""
    # when the notice was given (``scoctl notice``'s own time); None for a metadata key,
    # which carries no time of its own: scoctl's first sight stands for it then
    given: datetime | None = None


def metadata_notice(server: ServerInfo) -> tuple[Notice | None, str | None]:
    """The server's ``sco:reclaim-at`` notice, and a problem when the value does not parse."""
    raw = server.metadata.get(META_RECLAIM_AT)
    if raw is None or not raw.strip():
        return None, None
    try:
        return Notice(parse_notice_time(raw), "metadata"), None
    except ValueError:
        return None, (f"server {server.name} ({server.id}): {META_RECLAIM_AT}={raw!r} is not "
                      "an RFC 3339 time; notice ignored")


def node_of(inst: InstanceRecord, nodes: Iterable[NodeInfo]) -> NodeInfo | None:
    """The instance's Kubernetes Node, by identity (`core.reconcile.node_server_id`: the
    providerID, else the ``sco/instance`` label; never by name alone)."""
    return next((node for node in nodes if node_server_id(node) == inst.id), None)


def movable(pods: Iterable[PodInfo]) -> list[PodInfo]:
    """The pods a drain must move (`core.demand.must_move`)."""
    return [p for p in pods if must_move(p)]


def _seconds(later: datetime, earlier: datetime) -> float:
    return round((later - earlier).total_seconds(), 3)


class _Builder:
    """Collects the decision while the rules run (local to one `decide` call)."""

    def __init__(self, snapshot: NoticeSnapshot, policy: NoticePolicy, now: datetime) -> None:
        self.snapshot, self.policy, self.now = snapshot, policy, now
        self.stamp = rfc3339(now)
        self.rows: dict[tuple[str, str], NoticedRecord] = {}
        self.statuses: dict[str, InstanceStatus] = {}
        self.exclusions: dict[str, ExclusionRecord] = {}
        self.dirty: dict[str, str] = {}
        self.events: list[Event] = []
        self.drains: list[Drain] = []
        self.slurm: list[SlurmStep] = []
        self.removals: list[Removal] = []
        self.warnings: list[str] = []

    def event(self, workload: str | None, token: str, level: str = "info",
              **detail: Any) -> None:
        self.events.append(Event(workload, token, level, detail))

    def save(self, row: NoticedRecord) -> NoticedRecord:
        self.rows[(row.server_id, row.noticed_at)] = row
        return row

    def exclude(self, row: NoticedRecord) -> None:
        """Keep new units out of the pool until the deadline plus the cool-down."""
        if not row.pool:
            return
        until = shifted(parse_rfc3339(row.deadline), timedelta(seconds=self.policy.cooldown))
        current = self.exclusions.get(row.pool)
        known = current.until if current else self.snapshot.exclusions.get(row.pool)
        if known is not None and parse_rfc3339(known) >= until:
            return
        self.exclusions[row.pool] = ExclusionRecord(
            row.pool, f"reclaim notice: {row.name} at {row.deadline}", rfc3339(until))
        self.event(row.workload, "POOL_EXCLUDED", "warning", pool=row.pool, until=rfc3339(until),
                   reason=f"reclaim notice for {row.name}")

    def build(self, expired: Iterable[tuple[str, str]]) -> NoticeDecision:
        return NoticeDecision(
            rows=tuple(self.rows[k] for k in sorted(self.rows)),
            statuses=dict(sorted(self.statuses.items())),
            exclusions=tuple(self.exclusions[k] for k in sorted(self.exclusions)),
            dirty=dict(sorted(self.dirty.items())), events=tuple(self.events),
            drains=tuple(self.drains), slurm=tuple(self.slurm), removals=tuple(self.removals),
            expired=tuple(sorted(expired)), warnings=tuple(self.warnings))


class _Notices:
    """The notices in force for the region's instances, from all three sources; a time outside
    the horizon (`within_horizon`) is none: a tracked server's is in `refused`, an announced
    one in `beyond`."""

    def __init__(self, snapshot: NoticeSnapshot, now: datetime) -> None:
        self.servers = {s.id: s for s in snapshot.servers}
        self.problems: list[str] = []
        self.by_server: dict[str, NoticeRecord] = {}
        self.by_pool: dict[str, NoticeRecord] = {}
        self.beyond: list[NoticeRecord] = []
        for notice in snapshot.announced:
            if notice.region != snapshot.region:
                continue
            if not within_horizon(parse_rfc3339(notice.deadline), now):
                self.beyond.append(notice)
                continue
            (self.by_server if notice.kind == "server" else self.by_pool)[notice.target] = notice
        tracked = {i.id for i in snapshot.instances if i.region == snapshot.region}
        self.metadata: dict[str, Notice] = {}
        self.refused: dict[str, str] = {}
        for server in snapshot.servers:
            found, problem = metadata_notice(server)
            if found is not None and not within_horizon(found.deadline, now):
                if server.id in tracked:
                    self.refused[server.id] = printable(server.metadata[META_RECLAIM_AT])
            elif found is not None:
                self.metadata[server.id] = found
            if problem:
                self.problems.append(problem)

    def of(self, inst: InstanceRecord) -> Notice | None:
        found = [self.metadata[inst.id]] if inst.id in self.metadata else []
        announced = self.by_server.get(inst.id)
        if announced is not None:
            found.append(Notice(parse_rfc3339(announced.deadline), "server", announced.reason,
                                given=_given(announced)))
        pool = self.by_pool.get(inst.pool or "")
        if pool is not None and parse_rfc3339(inst.created) <= parse_rfc3339(pool.deadline):
            found.append(Notice(parse_rfc3339(pool.deadline), "pool", pool.reason,
                                given=_given(pool)))
        return min(found, key=lambda n: n.deadline) if found else None


def _given(notice: NoticeRecord) -> datetime | None:
    """When ``scoctl notice`` gave `notice` (its spool file's time), None if unreadable."""
    try:
        return parse_rfc3339(notice.received)
    except ValueError:
        return None


def metadata_refusals(snapshot: NoticeSnapshot, now: datetime) -> dict[str, str]:
    """The tracked servers whose ``sco:reclaim-at`` is outside the horizon, with that value:
    the stage looks up which were reported already (`NoticeSnapshot.warned`) before
    `decide`."""
    return dict(_Notices(snapshot, now).refused)


def held_ids(snapshot: NoticeSnapshot, now: datetime) -> frozenset[str]:
    """The instances the flow holds this pass (open rows and notices newly in force): the stage
    reads the pods of their nodes before `decide`."""
    notices = _Notices(snapshot, now)
    held = {row.server_id for row in snapshot.noticed if row.outcome is None}
    held |= {i.id for i in snapshot.instances
             if i.status in CAN_NOTICE and notices.of(i) is not None}
    return frozenset(held)


def decide(snapshot: NoticeSnapshot, policy: NoticePolicy, now: datetime) -> NoticeDecision:
    """One pass of the notice flow for one region (see the module docstring for the rules)."""
    b = _Builder(snapshot, policy, now)
    notices = _Notices(snapshot, now)
    b.warnings.extend(notices.problems)
    _refusals(b, notices)
    instances = {i.id: i for i in snapshot.instances if i.region == snapshot.region}
    _replacements(b, instances.values())
    open_rows = {row.server_id: b.rows.get((row.server_id, row.noticed_at), row)
                 for row in snapshot.noticed if row.outcome is None}
    for inst in sorted(instances.values(), key=lambda i: (i.workload or "", i.name)):
        row = open_rows.pop(inst.id, None)
        notice = notices.of(inst)
        if row is None and notice is not None and inst.status in CAN_NOTICE:
            row = _begin(b, inst, notice)
        elif row is None:
            if inst.status == InstanceStatus.NOTICED:  # yet no notice is open: back in service
                b.statuses[inst.id] = _in_service(inst)
            continue
        _carry(b, inst, row, notice, notices.servers.get(inst.id))
    for row in open_rows.values():  # the state no longer tracks it: it is gone
        b.save(replace(row, outcome="gone", closed_at=b.stamp))
    return b.build(_expired(snapshot, policy, now, instances, notices, b))


def _refusals(b: _Builder, notices: _Notices) -> None:
    """One ``NOTICE_IGNORED`` per server and ``sco:reclaim-at`` value outside the horizon: the
    value stays on the server, and the passes after this one know it was said."""
    workloads = {i.id: i.workload for i in b.snapshot.instances}
    for server_id, value in sorted(notices.refused.items()):
        if (server_id, value) in b.snapshot.warned:
            continue
        why = f"more than {NOTICE_HORIZON.days} days from now (the notice horizon)"
        b.event(workloads.get(server_id), "NOTICE_IGNORED", "warning", server=server_id,
                value=value, reason=why)
        b.warnings.append(f"server {server_id}: {META_RECLAIM_AT}={value!r} is {why}; notice "
                          "ignored")


def _in_service(inst: InstanceRecord) -> InstanceStatus:
    """The status an instance goes back to when its notice is withdrawn."""
    return InstanceStatus.READY if inst.ready_at else InstanceStatus.ACTIVE


def _begin(b: _Builder, inst: InstanceRecord, notice: Notice) -> NoticedRecord:
    """A notice newly in force: record it, exclude the pool, re-plan the workload. Its time
    (`noticed_at`, where the lead and the replacement's time are measured from) is the
    notice's own when it has one (``scoctl notice``: when it was given, not when a pass first
    saw it), else this pass's."""
    given = notice.given if notice.given is not None and notice.given <= b.now else None
    lead = max(0.0, _seconds(notice.deadline, given or b.now))
    row = b.save(NoticedRecord(
        server_id=inst.id, region=inst.region, name=inst.name, workload=inst.workload,
        pool=inst.pool, deadline=rfc3339(notice.deadline),
        noticed_at=rfc3339(given) if given is not None else b.stamp,
        source=notice.source, reason=notice.reason))
    b.statuses[inst.id] = InstanceStatus.NOTICED
    b.event(inst.workload, "RECLAIM_NOTICED", "warning", server=inst.id, name=inst.name,
            pool=inst.pool, deadline=row.deadline, lead_seconds=lead, source=notice.source,
            **({"reason": notice.reason} if notice.reason else {}))
    b.exclude(row)
    if inst.workload:
        b.dirty[inst.workload] = "reclaim notice"
    return row


def _carry(b: _Builder, inst: InstanceRecord, row: NoticedRecord, notice: Notice | None,
           server: ServerInfo | None) -> None:
    """One pass of an open notice: gone, withdrawn, moved, then the drain and the removal."""
    deadline = parse_rfc3339(row.deadline)
    if server is None or server.status == ServerStatus.DELETED:
        b.save(replace(row, outcome="gone", closed_at=b.stamp))
        b.statuses[inst.id] = InstanceStatus.DELETED
        b.event(inst.workload, "INSTANCE_RECLAIMED", "warning", **_reclaimed(row, b.now),
                by="provider")
        if _slurm_node(b, inst) is not None and (name := _power_down(b, inst)):
            b.slurm.append(SlurmStep(inst.id, name, power_down=True))
        return
    if notice is None and b.now < deadline:
        _withdraw(b, inst, row)
        return
    if notice is not None and notice.deadline != deadline:
        row = b.save(replace(row, deadline=rfc3339(notice.deadline)))
        deadline = notice.deadline
        b.event(inst.workload, "RECLAIM_NOTICE_MOVED", "warning", server=inst.id,
                name=inst.name, pool=inst.pool, deadline=row.deadline)
    b.exclude(row)  # a no-op while the exclusion holds; back if someone lifted it
    if server.status == ServerStatus.ERROR:
        _remove(b, inst, row, InstanceStatus.ERROR, left=0)  # why: the server went ERROR
        return
    if inst.node_name and b.snapshot.slurm_nodes is not None:
        left = _drain_slurm(b, inst, row, deadline)
    elif inst.node_name:
        left = None
    else:
        left = _drain_k8s(b, inst, row, deadline)
    if left == 0 or b.now >= deadline:
        _remove(b, inst, row, "empty" if left == 0 else "deadline", left=left)


def _withdraw(b: _Builder, inst: InstanceRecord, row: NoticedRecord) -> None:
    b.save(replace(row, outcome="withdrawn", closed_at=b.stamp))
    b.statuses[inst.id] = _in_service(inst)
    b.event(inst.workload, "RECLAIM_WITHDRAWN", server=inst.id, name=inst.name,
            pool=inst.pool, deadline=row.deadline)
    if inst.node_name:
        b.slurm.append(SlurmStep(inst.id, inst.node_name, resume=True))
        return
    node = node_of(inst, b.snapshot.k8s_nodes or ())
    if node is not None and row.cordoned:
        b.drains.append(Drain(inst.id, node.name, uncordon=True))


def _booting(b: _Builder, inst: InstanceRecord, row: NoticedRecord) -> bool:
    """Another unit of the workload is still on its way (the replacement, most likely), or
    the notice is new: the replacement is planned and launched later in this very pass."""
    if row.noticed_at == b.stamp or inst.workload in b.snapshot.booting_launches:
        return True
    return any(other.workload == inst.workload and other.id != inst.id
               and other.status in BOOTING for other in b.snapshot.instances)


def _drain_k8s(b: _Builder, inst: InstanceRecord, row: NoticedRecord,
               deadline: datetime) -> int | None:
    """Cordon, then evict (or, late, delete) the pods that must move. Returns how many are
    left on the node (0: empty; None: unknown, Kubernetes or its pods unread)."""
    if b.snapshot.k8s_nodes is None:
        return None
    node = node_of(inst, b.snapshot.k8s_nodes)
    if node is None:
        return 0  # never registered, or gone already: nothing runs there
    pods = b.snapshot.pods.get(node.name)
    if pods is None:
        return None
    moving = movable(pods)
    cordon = not node.unschedulable
    if cordon and not row.cordoned:
        row = b.save(replace(row, cordoned=True))
    margin = timedelta(seconds=b.policy.drain_margin)
    evict: tuple[PodRef, ...] = ()
    delete: tuple[PodRef, ...] = ()
    if moving and b.now >= shifted(deadline, -margin):
        delete = tuple(PodRef(p.namespace, p.name) for p in moving)
        if not row.drain_forced:
            b.save(replace(row, drain_forced=True))
            b.event(inst.workload, "DRAIN_FORCED", "warning", server=inst.id, name=inst.name,
                    node=node.name, pods=len(delete), deadline=row.deadline)
    elif moving and (not _booting(b, inst, row) or b.now >= shifted(deadline, -2 * margin)):
        evict = tuple(PodRef(p.namespace, p.name, p.uid) for p in moving if not p.deleting)
    if cordon or evict or delete:
        b.drains.append(Drain(inst.id, node.name, cordon=cordon, evict=evict, delete=delete))
    return len(moving)


def _drain_slurm(b: _Builder, inst: InstanceRecord, row: NoticedRecord,
                 deadline: datetime) -> int:
    """DRAIN the node (once), drop it from its claim, requeue its jobs at deadline − margin.
    Returns how many jobs still run there."""
    name = inst.node_name or ""
    node = _slurm_node(b, inst)
    jobs = tuple(sorted(b.snapshot.slurm_jobs.get(name, ())))
    drain = (f"sco: reclaim at {row.deadline}"
             if node is not None and "DRAIN" not in node.flags and not node.powered_down
             else None)
    release = row.noticed_at == b.stamp
    requeue: tuple[int, ...] = ()
    if jobs and not row.requeued and b.now >= shifted(
            deadline, -timedelta(seconds=b.policy.drain_margin)):
        requeue = jobs
        b.save(replace(row, requeued=True))
        b.event(inst.workload, "SLURM_JOBS_REQUEUED", "warning", server=inst.id, node=name,
                jobs=",".join(str(j) for j in jobs), deadline=row.deadline)
    if drain or release or requeue:
        b.slurm.append(SlurmStep(inst.id, name, drain_reason=drain, release=release,
                                 requeue=requeue))
    return len(jobs)


def _slurm_node(b: _Builder, inst: InstanceRecord) -> SlurmNode | None:
    if not inst.node_name:
        return None
    return next((n for n in b.snapshot.slurm_nodes or () if n.name == inst.node_name), None)


def _power_down(b: _Builder, inst: InstanceRecord) -> str | None:
    """The instance's Slurm node to power down as its server goes: reconcile's one rule
    (`core.reconcile.slurm_power_down`), over the statuses this pass gave so far."""
    current = (replace(i, status=b.statuses[i.id]) if i.id in b.statuses else i
               for i in b.snapshot.instances)
    return slurm_power_down(inst.node_name, inst.id, b.snapshot.slurm_nodes, current)


def _reclaimed(row: NoticedRecord, now: datetime) -> dict[str, Any]:
    """The detail of a noticed ``INSTANCE_RECLAIMED``."""
    deadline, noticed = parse_rfc3339(row.deadline), parse_rfc3339(row.noticed_at)
    return {"server": row.server_id, "name": row.name, "pool": row.pool, "noticed": True,
            "deadline": row.deadline, "lead_seconds": max(0.0, _seconds(deadline, noticed)),
            "before_deadline_seconds": _seconds(deadline, now), "evicted": row.evicted,
            "pods_deleted": row.pods_deleted}


def _remove(b: _Builder, inst: InstanceRecord, row: NoticedRecord, why: str,
            left: int | None) -> None:
    row = b.rows.get((row.server_id, row.noticed_at), row)  # with this pass's drain flags
    closed = replace(row, outcome="reclaimed", closed_at=b.stamp)
    detail = {**_reclaimed(closed, b.now), "by": "scoctl", "why": why}
    if left:
        detail["left"] = left
    node = None
    if not inst.node_name:
        found = node_of(inst, b.snapshot.k8s_nodes or ())
        node = found.name if found is not None else None
    b.removals.append(Removal(
        server_id=inst.id, name=inst.name, why=why, row=closed,
        event=Event(inst.workload, "INSTANCE_RECLAIMED", "info", detail), node=node,
        slurm_node=_power_down(b, inst)))


def _replacements(b: _Builder, instances: Iterable[InstanceRecord]) -> None:
    """``REPLACEMENT_READY`` for each notice whose first later unit of the workload is Ready."""
    ready: dict[str, list[InstanceRecord]] = {}
    for inst in instances:
        if inst.workload and inst.ready_at:
            ready.setdefault(inst.workload, []).append(inst)
    for row in b.snapshot.noticed:
        if row.replacement_ready_at or row.outcome == "withdrawn" or not row.workload:
            continue
        noticed = parse_rfc3339(row.noticed_at)
        later = [i for i in ready.get(row.workload, ()) if i.id != row.server_id
                 and parse_rfc3339(i.created) >= noticed]
        if not later:
            continue
        first = min(later, key=lambda i: parse_rfc3339(i.ready_at or ""))
        at = parse_rfc3339(first.ready_at or "")
        b.save(replace(row, replacement_ready_at=rfc3339(at)))
        b.event(row.workload, "REPLACEMENT_READY", server=row.server_id, name=row.name,
                replacement=first.id, seconds=_seconds(at, noticed),
                before_deadline=at < parse_rfc3339(row.deadline))


def _expired(snapshot: NoticeSnapshot, policy: NoticePolicy, now: datetime,
             instances: Mapping[str, InstanceRecord], notices: _Notices,
             b: _Builder) -> list[tuple[str, str]]:
    """Announced notices to forget: past the deadline and the cool-down, outside the horizon
    (stored by an older scoctl) or for a server this region neither tracks nor lists (both
    ignored with a warning, unless the flow carried that server's notice: it is gone)."""
    out: list[tuple[str, str]] = []
    cooldown = timedelta(seconds=policy.cooldown)
    # the servers whose notice the flow carried: its record, this pass's or a stored one
    handled = {row.server_id for row in snapshot.noticed} | {sid for sid, _ in b.rows}
    for notice in notices.beyond:
        out.append((notice.kind, notice.target))
        b.event(None, "NOTICE_IGNORED", "warning", **{notice.kind: notice.target},
                deadline=notice.deadline,
                reason=f"more than {NOTICE_HORIZON.days} days from now (the notice horizon)")
    for notice in snapshot.announced:
        if notice.region != snapshot.region or notice in notices.beyond:
            continue
        if now >= shifted(parse_rfc3339(notice.deadline), cooldown):
            out.append((notice.kind, notice.target))
        elif (notice.kind == "server" and notice.target not in instances
              and notice.target not in notices.servers):
            out.append((notice.kind, notice.target))
            if notice.target not in handled:  # a notice carried out is done, not ignored
                b.event(None, "NOTICE_IGNORED", "warning", server=notice.target,
                        deadline=notice.deadline, reason="not a server scoctl manages")
    return out


LEAD_BUCKETS = (15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
READY_BUCKETS = (5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)


@dataclass(frozen=True)
class ReclaimFigures:
    """What the reclaim metrics count: every notice scoctl acted on, its lead time (notice →
    deadline) and, where it came, the time from notice to the replacement's Ready."""

    notices: int
    lead_seconds: tuple[float, ...]
    replacement_ready_seconds: tuple[float, ...]


def reclaim_figures(rows: Iterable[NoticedRecord]) -> ReclaimFigures:
    """The figures over every noticed instance, open and closed."""
    leads, ready = [], []
    count = 0
    for row in rows:
        count += 1
        noticed = parse_rfc3339(row.noticed_at)
        leads.append(max(0.0, _seconds(parse_rfc3339(row.deadline), noticed)))
        if row.replacement_ready_at:
            ready.append(max(0.0, _seconds(parse_rfc3339(row.replacement_ready_at), noticed)))
    return ReclaimFigures(count, tuple(leads), tuple(ready))


def histogram(values: Iterable[float], buckets: Iterable[float]) -> list[tuple[str, int]]:
    """Cumulative ``(le, count)`` pairs as Prometheus writes them, ending with ``+Inf`` (what
    the metrics textfile's histogram writer takes, as `core.latency.cumulative` gives)."""
    seen = tuple(values)
    return [("+Inf" if bound == float("inf") else f"{bound:g}",
             sum(1 for v in seen if v <= bound)) for bound in (*buckets, float("inf"))]
