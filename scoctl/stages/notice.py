"""The notice stage (design: Notices): drain and replace an instance before its capacity goes.

read: the spool's notice folder (what ``scoctl notice`` dropped); per region the servers tagged
``sco:managed`` — the listing the caller made already (reconcile's), else one listing; their
metadata carries ``sco:reclaim-at``, and a noticed server the list misses is read by id before
it is called gone — the state's instances, noticed instances, announced notices, exclusions
and launches in flight; only while something is noticed, the Kubernetes nodes and the pods of
the noticed nodes, the Slurm nodes and jobs · decide: `scoctl.core.notice.decide` (pure) ·
record: the decision in one transaction (noticed rows, ``noticed`` statuses, pool exclusions,
workloads to re-plan, events) · act: cordon, evict (a PodDisruptionBudget's 429 is retried
within the pass, then on the next one) or delete pods, Slurm DRAIN / requeue, server deletes
through the region's token budget (never the disruption budget) — each outcome recorded as it
lands.

`scoctl run` runs it after reconcile, on the server listing reconcile just made (no listing of
its own, no call per server), and plans and acquires again when a new notice needs it, so the
replacement is launched in the same pass; Slurm nodes noticed (`NoticeResult.release`) leave
their claims first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scoctl.clock import Clock, rfc3339
from scoctl.config.schema import Config, Region, is_url, parse_duration
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES
from scoctl.core.intake.slurm import expand_hostlist
from scoctl.core.model import (
    InstanceUpdate,
    NewEvent,
    NodeRelease,
    NoticedRecord,
    NoticeRecord,
    ServerInfo,
    SlurmJob,
)
from scoctl.core.model.problems import Api, Problem
from scoctl.core.model.vocabulary import TAG_MANAGED, InstanceStatus
from scoctl.core.notice import (
    CAN_NOTICE,
    NOTICE_HORIZON,
    Drain,
    NoticeDecision,
    NoticePolicy,
    NoticeSnapshot,
    Removal,
    SlurmStep,
    decide,
    held_ids,
    metadata_refusals,
    node_of,
    parse_notice_time,
    within_horizon,
)
from scoctl.core.slurm_power import POWER_DOWN
from scoctl.core.text import printable
from scoctl.errors import (
    ApiError,
    ConfigError,
    NotLeader,
    ScoctlError,
    StateUnavailable,
    TemporaryError,
    UsageError,
)
from scoctl.host.spool import (
    NOTICE_KIND,
    SpoolEvent,
    discard,
    notice_dir,
    pending_events,
    write_event,
)
from scoctl.services.leadership import FencedCloud
from scoctl.state import Store, open_store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster

log = logging.getLogger(__name__)

NOTICE_TOKEN = "RECLAIM_NOTICE"
WITHDRAW_TOKEN = "RECLAIM_NOTICE_WITHDRAWN"  # `scoctl notice --withdraw`
# A refused eviction is tried again within the pass, this far apart (as kubectl drain does): the
# pod evicted a moment ago is often back and Ready by then, and the budget allows the next one.
# A region's pass waits this many times at most, all its noticed nodes together (3 s), so that
# many nodes held by budgets never hold the pass; what is still refused waits for the next pass.
EVICTION_RETRIES = 6
EVICTION_RETRY_S = 0.5
RUNNING_JOB_STATES = frozenset({"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED"})


@dataclass(frozen=True)
class RegionNotices:
    """What the notice stage decided and did in one region."""

    region: str
    decision: NoticeDecision
    evicted: int = 0
    refused: int = 0  # pods whose eviction was still refused (a PodDisruptionBudget) at the end
    pods_deleted: int = 0
    deleted: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True)
class NoticeResult:
    """What one notice pass did. The composer acts on two of its answers: `replan` (workloads
    a new notice marked for re-planning: plan and acquire again in this pass) and `release`
    (Slurm nodes noticed this pass: drop them from their claims, so that no second server is
    launched under a name that is still in use)."""

    regions: tuple[RegionNotices, ...] = ()
    spooled: int = 0
    problems: tuple[Problem, ...] = ()
    replan: Mapping[str, str] = field(default_factory=dict)
    release: tuple[NodeRelease, ...] = ()
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
        return bool(self.spooled) or any(not r.decision.empty for r in self.regions)


def policy_of(config: Config) -> NoticePolicy:
    """The flow's knobs from the config: `timeouts.drain_margin`, and `timeouts.negative_cache`
    as the capacity cool-down."""
    return NoticePolicy(drain_margin=config.timeouts.drain_margin,
                        cooldown=config.timeouts.negative_cache)


def withdrawal_from_spool(event: SpoolEvent) -> tuple[str, str] | None:
    """The (kind, target) a ``scoctl notice --withdraw`` file takes back (None: not one)."""
    kind, target = event.detail.get("kind"), event.detail.get("target")
    if event.token != WITHDRAW_TOKEN or kind not in ("server", "pool") or not target:
        return None
    return str(kind), str(target)


def notice_from_spool(event: SpoolEvent) -> NoticeRecord | None:
    """The notice a spool file carries (None: not one ``scoctl notice`` writes)."""
    detail = event.detail
    kind, target, region = detail.get("kind"), detail.get("target"), detail.get("region")
    if event.token != NOTICE_TOKEN or kind not in ("server", "pool") or not target or not region:
        return None
    try:
        deadline = rfc3339(parse_notice_time(str(detail.get("at", ""))))
    except ValueError:
        return None
    return NoticeRecord(kind=kind, target=str(target), region=str(region), deadline=deadline,
                        received=event.ts, reason=str(detail.get("reason") or ""))


def ingest_spool(config: Config, store: Store) -> int:
    """Record the notices ``scoctl notice`` spooled, and forget those it withdrew (in the
    order they were spooled; the next decision then uncordons what a withdrawn notice held).
    Each file is removed once committed. Returns how many files took effect."""
    events = list(pending_events(notice_dir(config.spool), NOTICE_KIND))
    if not events:
        return 0
    recorded = 0
    with store.transaction():
        for event in events:
            notice, withdrawn = notice_from_spool(event), withdrawal_from_spool(event)
            if notice is not None:
                store.add_notice(notice)
            elif withdrawn is not None:
                store.drop_notices([withdrawn])
            else:
                log.warning("notice spool: %s is not a reclaim notice; ignored", event.path.name)
                continue
            recorded += 1
    for event in events:
        discard(event)
    return recorded


@dataclass(frozen=True)
class Spooled:
    """A notice ``scoctl notice`` dropped into the spool."""

    kind: str
    target: str
    name: str
    region: str
    deadline: str  # empty for a withdrawal
    reason: str
    path: str
    withdraw: bool = False

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "target": self.target, "name": self.name,
                "region": self.region, "deadline": self.deadline, "reason": self.reason,
                "withdraw": self.withdraw, "spooled": self.path}


def deadline_of(text: str, now: datetime) -> datetime:
    """``--at``: an RFC 3339 time with its offset, or ``+DURATION`` from `now`.

    Raises UsageError naming the option, also for a time beyond the notice horizon
    (`scoctl.core.notice.NOTICE_HORIZON` from now).
    """
    try:
        if text.strip().startswith("+"):
            deadline = now + timedelta(seconds=parse_duration(text.strip()[1:]))
        else:
            deadline = parse_notice_time(text)
    except (ValueError, OverflowError):
        raise UsageError(f"--at {text!r}: not an RFC 3339 time with its offset "
                         "(2026-05-01T12:00:00Z) nor +DURATION (+90s, +5m)") from None
    if not within_horizon(deadline, now):
        raise UsageError(f"--at {text!r}: more than {NOTICE_HORIZON.days} days from now, "
                         "beyond the notice horizon")
    return deadline


def _managed_server(config: Config, state: Path | str, server: str
                    ) -> tuple[str, str, str, str]:
    """(id, name, region, workload) of the server scoctl manages under this id or name.

    The state answers first; an id it does not know is looked up in Nova to tell an unknown
    server from one scoctl does not manage. Raises UsageError (either), ApiError (Nova down).
    """
    if is_url(state) or Path(state).exists():  # read only: an older schema is refused
        with open_store(state, migrate=False,
                        password_file=config.state_password_file) as store:
            rows = [i for i in store.instances(include_deleted=True) if server in (i.id, i.name)]
        if rows:
            inst = max(rows, key=lambda i: i.created)
            if inst.status not in CAN_NOTICE:
                raise UsageError(f"--server {server}: scoctl's server {inst.name} is "
                                 f"{inst.status}: nothing is left to reclaim")
            return inst.id, inst.name, inst.region, inst.workload or ""
    from scoctl.adapters.factory import cloud_for

    for region in config.regions:
        found = cloud_for(config, region).server(server)
        if found is None:
            continue
        if TAG_MANAGED not in found.tags:
            raise UsageError(f"--server {server}: server {found.name} is not one scoctl "
                             f"manages (no {TAG_MANAGED} tag): scoctl never touches it")
        return found.id, found.name, region.name, ""
    raise UsageError(f"--server {server}: unknown server (neither in the state nor in Nova)")


def announce(config: Config, state: Path | str, clock: Clock, *, server: str | None,
             pool: str | None, at: str, reason: str = "", withdraw: bool = False) -> Spooled:
    """Check a notice and drop it into the spool's notice folder (no lock, no state write).
    With `withdraw`, the notice ``scoctl notice`` gave this server or pool is taken back: its
    instances are uncordoned and back in service at the next pass (a ``sco:reclaim-at`` key
    on a server is the reclaimer's, and stays in force).

    Raises UsageError on bad input (nothing is written): neither or both of `server` and
    `pool`, an unknown pool or server, a server scoctl does not manage, an `at` that does not
    parse (or any `at` with `withdraw`), a `reason` the spool's reader would drop (too long;
    its control characters are escaped); ApiError when Nova cannot be asked; ScoctlError when
    the spool is not writable.
    """
    if (server is None) == (pool is None):
        raise UsageError("give --server ID or --pool POOL (one of them)")
    if withdraw and at:
        raise UsageError("--withdraw takes no --at: it takes the notice back")
    if not at and not withdraw:
        raise UsageError("--at is required: the time of the reclaim")
    deadline = "" if withdraw else rfc3339(deadline_of(at, clock.now()))
    if pool is not None:
        spec = next((p for p in config.pools if p.name == pool), None)
        if spec is None:
            raise UsageError(f"--pool {pool}: no such pool in {config.source_name}")
        kind, target, name, region, workload = "pool", pool, pool, spec.region, ""
    else:
        assert server is not None
        target, name, region, workload = _managed_server(config, state, server)
        kind = "server"
    reason = printable(reason)
    detail = {"kind": kind, "target": target, "name": name, "region": region, "reason": reason}
    if not withdraw:
        detail["at"] = deadline
    try:
        path = write_event(notice_dir(config.spool), ts=rfc3339(clock.now()),
                           token=WITHDRAW_TOKEN if withdraw else NOTICE_TOKEN,
                           workload=workload, detail=detail, kind=NOTICE_KIND)
    except ConfigError as exc:  # all else is checked above: the free text is too long
        raise UsageError(f"--reason: {exc}") from None
    except OSError as exc:
        raise ScoctlError(f"cannot write to the spool {config.spool}: {exc}") from exc
    return Spooled(kind, target, name, region, deadline, reason, str(path), withdraw)


def running_jobs(jobs: Sequence[SlurmJob]) -> dict[str, tuple[int, ...]]:
    """Job ids per Slurm node, of the jobs that run there."""
    out: dict[str, list[int]] = {}
    for job in jobs:
        if job.state not in RUNNING_JOB_STATES or not job.nodes:
            continue
        for name in expand_hostlist(job.nodes):
            out.setdefault(name, []).append(job.job_id)
    return {name: tuple(ids) for name, ids in out.items()}


def with_drained(removal: Removal, evicted: int, deleted: int) -> Removal:
    """`removal` with the pods this pass's drain evicted and deleted added to its row and to
    its ``INSTANCE_RECLAIMED`` detail (the decision counted only the earlier passes')."""
    if not evicted and not deleted:
        return removal
    row = replace(removal.row, evicted=removal.row.evicted + evicted,
                  pods_deleted=removal.row.pods_deleted + deleted)
    detail = {**removal.event.detail, "evicted": row.evicted, "pods_deleted": row.pods_deleted}
    return replace(removal, row=row, event=replace(removal.event, detail=detail))


class _Region:
    """One region's read → decide → record → act."""

    def __init__(self, config: Config, store: Store, clock: Clock, region: Region, cloud: Cloud,
                 cluster: Cluster | None, scheduler: BatchScheduler | None,
                 servers: Sequence[ServerInfo] | None) -> None:
        self.config, self.store, self.clock, self.region = config, store, clock, region
        self.cloud, self.cluster, self.scheduler = cloud, cluster, scheduler
        self.listed = servers
        self.problems: list[Problem] = []
        self.counts = {"evicted": 0, "refused": 0, "pods_deleted": 0}
        self.retries_left = EVICTION_RETRIES  # for every node of this pass together

    def _note(self, api: Api, what: str, exc: BaseException) -> None:
        self.problems.append(Problem.of(exc, api=api, region=self.region.name, what=what))
        log.warning("notice %s: %s: %s", self.region.name, what, exc)

    # -- read ------------------------------------------------------------------------------

    def snapshot(self) -> NoticeSnapshot:
        store, name = self.store, self.region.name
        now = self.clock.now()
        t = self.config.timeouts
        awaiting = rfc3339(now - timedelta(seconds=t.launch + t.registration))
        servers = {s.id: s for s in (self.listed if self.listed is not None
                                     else self.cloud.servers(tags=[TAG_MANAGED]))}
        noticed = tuple(store.noticed(region=name, awaiting_since=awaiting))
        for row in noticed:
            if row.outcome is None and row.server_id not in servers:
                found = self.cloud.server(row.server_id)  # before calling it gone
                if found is not None:
                    servers[found.id] = found
        snapshot = NoticeSnapshot(
            region=name, servers=tuple(servers.values()),
            instances=tuple(store.instances(region=name)), announced=tuple(store.notices()),
            noticed=noticed, exclusions={e.pool: e.until for e in store.exclusions()},
            booting_launches=frozenset(launch.workload for launch in
                                       store.launches(status=IN_FLIGHT_LAUNCHES)
                                       if launch.region == name))
        refused = metadata_refusals(snapshot, now)
        if refused:
            snapshot = replace(snapshot, warned=self._warned(snapshot, refused))
        held = held_ids(snapshot, now)
        return self._nodes(snapshot, held) if held else snapshot

    def _warned(self, snapshot: NoticeSnapshot, refused: Mapping[str, str]
                ) -> frozenset[tuple[str, str]]:
        """Which refused ``sco:reclaim-at`` values the event log says were reported already
        (read only while some server carries one: its workload's events since it was made)."""
        said: set[tuple[str, str]] = set()
        for inst in snapshot.instances:
            value = refused.get(inst.id)
            if value is None:
                continue
            for event in self.store.events(workload=inst.workload, since=inst.created):
                if (event.token == "NOTICE_IGNORED" and event.detail.get("server") == inst.id
                        and event.detail.get("value") == value):
                    said.add((inst.id, value))
                    break
        return frozenset(said)

    def _nodes(self, snapshot: NoticeSnapshot, held: frozenset[str]) -> NoticeSnapshot:
        """The nodes of the held instances, and what runs on them."""
        held_instances = [i for i in snapshot.instances if i.id in held]
        k8s_nodes, pods = None, {}
        if self.cluster is not None and any(not i.node_name for i in held_instances):
            try:
                k8s_nodes = tuple(self.cluster.nodes())
                for inst in held_instances:
                    node = None if inst.node_name else node_of(inst, k8s_nodes)
                    if node is not None:
                        pods[node.name] = tuple(self.cluster.pods_on_node(node.name))
            except ApiError as exc:
                k8s_nodes = None
                self._note("kubernetes", "Kubernetes nodes unreadable (no drain this pass)", exc)
        slurm_nodes, jobs = None, {}
        if self.scheduler is not None and any(i.node_name for i in held_instances):
            try:
                slurm_nodes = tuple(self.scheduler.nodes())
                jobs = running_jobs(self.scheduler.jobs())
            except ApiError as exc:
                slurm_nodes = None
                self._note("slurm", "Slurm unreadable (no drain this pass)", exc)
        return replace(snapshot, k8s_nodes=k8s_nodes, pods=pods, slurm_nodes=slurm_nodes,
                       slurm_jobs=jobs)

    # -- record ----------------------------------------------------------------------------

    def record(self, decision: NoticeDecision) -> None:
        store = self.store
        with store.transaction():
            for row in decision.rows:
                store.save_noticed(row)
            for inst, status in decision.statuses.items():
                store.update_instance(InstanceUpdate(inst, status=status))
            for ex in decision.exclusions:
                store.exclude(ex.pool, ex.reason, ex.until)
            for event in decision.events:
                store.append_event(NewEvent(event.workload, event.token, event.level,
                                            dict(event.detail)))
            by_reason: dict[str, set[str]] = {}
            for workload, reason in decision.dirty.items():
                by_reason.setdefault(reason, set()).add(workload)
            for reason, names in sorted(by_reason.items()):
                store.mark_dirty(names, reason)
            if decision.expired:
                store.drop_notices(decision.expired)
        for warning in decision.warnings:
            log.warning("notice %s: %s", self.region.name, warning)

    # -- act -------------------------------------------------------------------------------

    def drain(self, step: Drain) -> tuple[int, int]:
        """Cordon / uncordon, evict, delete: returns (evicted, deleted) pods."""
        assert self.cluster is not None
        cluster, evicted, deleted = self.cluster, 0, 0
        try:
            if step.cordon:
                cluster.cordon(step.node)
            if step.uncordon:
                cluster.uncordon(step.node)
        except ApiError as exc:
            self._note("kubernetes", f"cordon of node {step.node}", exc)
            return 0, 0
        pending = list(step.evict)
        for attempt in range(EVICTION_RETRIES + 1):
            if attempt:
                if self.retries_left <= 0:
                    break
                self.retries_left -= 1
                self.clock.sleep(EVICTION_RETRY_S)
            refused = []
            for pod in pending:
                try:
                    evicted += int(cluster.evict(pod.namespace, pod.name, pod.uid or None))
                except TemporaryError as exc:  # a PodDisruptionBudget said 429
                    refused.append(pod)
                    log.debug("notice: eviction of %s/%s refused for now: %s", pod.namespace,
                              pod.name, exc)
                except ApiError as exc:
                    self._note("kubernetes", f"evict {pod.namespace}/{pod.name}", exc)
            pending = refused
            if not pending:
                break
        self.counts["refused"] += len(pending)  # the next pass tries them again
        grace = int(self.config.timeouts.drain_margin // 2)
        for pod in step.delete:
            try:
                deleted += int(cluster.delete_pod(pod.namespace, pod.name, grace_seconds=grace))
            except ApiError as exc:
                self._note("kubernetes", f"delete pod {pod.namespace}/{pod.name}", exc)
        return evicted, deleted

    def slurm(self, step: SlurmStep) -> None:
        assert self.scheduler is not None
        scheduler = self.scheduler
        try:
            if step.drain_reason:
                scheduler.update_node(step.node, state="DRAIN", reason=step.drain_reason)
            for job in step.requeue:
                scheduler.requeue(job)
            if step.resume:
                scheduler.update_node(step.node, state="RESUME")
            if step.power_down:
                scheduler.update_node(step.node, state=POWER_DOWN,
                                      reason="scoctl: reclaimed after a notice")
        except ApiError as exc:
            self._note("slurm", f"Slurm node {step.node}", exc)

    def remove(self, removal: Removal) -> bool:
        """Delete the Node and the server; on success record the reclaim."""
        if removal.node and self.cluster is not None:
            try:
                self.cluster.delete_node(removal.node)
            except ApiError as exc:
                self._note("kubernetes", f"delete node {removal.node}", exc)
        try:
            self.cloud.delete(removal.server_id)
        except ApiError as exc:
            self._note("nova", f"delete {removal.name}", exc)
            return False
        event = removal.event
        with self.store.transaction():
            self.store.save_noticed(removal.row)
            self.store.update_instance(InstanceUpdate(removal.server_id,
                                                      status=InstanceStatus.DELETING))
            self.store.append_event(NewEvent(event.workload, event.token, event.level,
                                             dict(event.detail)))
        if removal.slurm_node and self.scheduler is not None:
            self.slurm(SlurmStep(removal.server_id, removal.slurm_node, power_down=True))
        return True

    def act(self, decision: NoticeDecision, noticed: Sequence[NoticedRecord]) -> list[str]:
        rows = {row.server_id: row for row in noticed if row.outcome is None}
        rows.update({row.server_id: row for row in decision.rows if row.outcome is None})
        drained: dict[str, tuple[int, int]] = {}  # server id → (evicted, deleted) this pass
        for step in decision.drains:
            if self.cluster is None:
                break
            evicted, deleted = self.drain(step)
            self.counts["evicted"] += evicted
            self.counts["pods_deleted"] += deleted
            row = rows.get(step.server_id)
            if row is not None and (evicted or deleted):
                rows[step.server_id] = row = replace(
                    row, evicted=row.evicted + evicted, pods_deleted=row.pods_deleted + deleted)
                self.store.save_noticed(row)
                before = drained.get(step.server_id, (0, 0))
                drained[step.server_id] = (before[0] + evicted, before[1] + deleted)
        for slurm_step in decision.slurm:
            if self.scheduler is not None:
                self.slurm(slurm_step)
        return [r.name for r in decision.removals
                if self.remove(with_drained(r, *drained.get(r.server_id, (0, 0))))]

    def run(self) -> RegionNotices:
        snapshot = self.snapshot()
        decision = decide(snapshot, policy_of(self.config), self.clock.now())
        self.record(decision)
        deleted = self.act(decision, snapshot.noticed)
        return RegionNotices(self.region.name, decision, evicted=self.counts["evicted"],
                             refused=self.counts["refused"],
                             pods_deleted=self.counts["pods_deleted"], deleted=tuple(deleted),
                             problems=tuple(self.problems))


def run_notices(config: Config, store: Store, clock: Clock, *, region: str | None = None,
                connect: Callable[[Config, Region], Cloud] | None = None,
                clouds: Mapping[str, Cloud] | None = None, cluster: Cluster | None = None,
                scheduler: BatchScheduler | None = None,
                servers: Mapping[str, Sequence[ServerInfo]] | None = None,
                leads: Callable[[str], bool] | None = None) -> NoticeResult:
    """Ingest spooled notices, then carry every region's (or `region`'s) notices one step on.

    Clouds come from `clouds` (by region name), else `connect(config, region)`, else the
    config's clouds.yaml entry with the region's token budget. `servers[region]`, when given,
    is a listing the caller made already (then no listing call is made here); a region missing
    from a given `servers` is one the caller could not list: it is left to the next pass.
    The clock's `sleep` paces the retries of refused evictions within the pass.

    A region whose Nova cannot be read is skipped and reported in `errors`; API failures never
    raise. ConfigError (an unusable clouds.yaml entry) does. With `leads`, regions this runner
    does not lead are left to their leader (design: Runners: it alone cordons, drains and deletes);
    server deletes are fenced (`FencedCloud`) like reconcile's.
    """
    spooled = ingest_spool(config, store)
    if connect is None:
        def connect(config: Config, reg: Region) -> Cloud:
            from scoctl.adapters.factory import cloud_for
            from scoctl.services.leadership import budget_for

            return cloud_for(config, reg, budget=budget_for(config, reg))

    regions = [config.region(region)] if region else list(config.regions)
    outcomes: list[RegionNotices] = []
    problems: list[Problem] = []
    dirty: dict[str, str] = {}
    release: list[NodeRelease] = []
    refused: NotLeader | None = None
    for reg in [r for r in regions if leads is None or leads(r.name)]:
        if servers is not None and reg.name not in servers:
            continue  # the caller's listing of this region failed (and says so): no second try
        try:
            cloud = FencedCloud((clouds or {}).get(reg.name) or connect(config, reg), reg.name,
                                store)
            worker = _Region(config, store, clock, reg, cloud, cluster, scheduler,
                             (servers or {}).get(reg.name))
            outcome = worker.run()
        except StateUnavailable:  # the state's outage, not Nova's: the stage ends
            raise
        except ApiError as exc:
            problems.append(Problem.of(exc, api="nova", region=reg.name, what="Nova"))
            continue
        except NotLeader as exc:  # deposed in this region: the others' deadlines still count
            refused = refused or exc
            continue
        outcomes.append(outcome)
        problems.extend(outcome.problems)
        dirty.update(outcome.decision.dirty)
        release += [NodeRelease(step.node, "reclaim notice")
                    for step in outcome.decision.slurm if step.release]
    return NoticeResult(regions=tuple(outcomes), spooled=spooled, problems=tuple(problems),
                        replan=dirty, release=tuple(release), refused=refused)
