"""The watch stage (design: Pipeline; DD-0018 §4b, Planner; placement steps 1-3).

read: the event spool, Kubernetes pods / nodes / Deployments / ReplicaSets / Jobs /
InferenceServices / quota events (and, where pods need them, volumes, DaemonSets and the
PodGroups of gangs), Slurm jobs and nodes · decide: `core.intake` (pure) ·
record: claims (a new version only when the normalised demand changed) and status tokens, all
in one transaction per pass · act: tear down the objects of deployment and inference workloads
that turned inactive (`services.teardown`), and only then drop the ingested spool files.

`run_pass` is one pass (``scoctl watch --once``, and the intake step of every ``scoctl run``).
`Follower` is the pod cache and batch window that ``watch --follow`` (`runner.watch`) and the
controller (`runner.controller`) feed from their pod watches; each commit is one `run_pass`.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from scoctl.bulk import collector_paused
from scoctl.clock import Clock
from scoctl.config.schema import Config, WorkloadSpec
from scoctl.core.buffers import with_buffers
from scoctl.core.demand import is_provisionable
from scoctl.core.gang import pod_group_of
from scoctl.core.intake.batch import BatchWindow, extend_window, window_deadline, window_due
from scoctl.core.intake.common import (
    Capacity,
    ClaimDecision,
    IntakeDecision,
    ObjectRef,
    TokenDecision,
    WorkloadRule,
    WorkloadState,
)
from scoctl.core.intake.k8s import (
    IntakeMemo,
    K8sPolicy,
    K8sSnapshot,
    count_pending,
    decide_k8s_intake,
    is_managed_pod,
    pod_group_sizes,
    volume_zones,
)
from scoctl.core.intake.slurm import (
    SlurmPolicy,
    SlurmSnapshot,
    decide_slurm_intake,
    parse_sco_comment,
)
from scoctl.core.jobend import HELD_NOTE, hold_record, job_ends, recorded_end
from scoctl.core.latency import first_sight
from scoctl.core.model import FinishedJob, InstanceRecord, NewEvent, PodInfo, WorkloadRecord
from scoctl.core.model.problems import Problem
from scoctl.core.model.vocabulary import LABEL_MANAGED, InstanceStatus
from scoctl.core.timefmt import parse_rfc3339
from scoctl.core.tokens import INACTIVE_STATUSES, is_active
from scoctl.core.truth import Units
from scoctl.errors import ApiError, ConfigError, UsageError
from scoctl.host.discovery import host_hints
from scoctl.host.spool import SpoolEvent, discard, pending_events
from scoctl.services.claims import record_claim
from scoctl.services.informer import LIVE_SELECTOR
from scoctl.services.teardown import TORN_DOWN_KINDS, TeardownResult, teardown_workload
from scoctl.services.tokens import record_token
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import PodEvent

log = logging.getLogger(__name__)

Source = Literal["k8s", "slurm"]
SOURCES: tuple[Source, ...] = ("k8s", "slurm")


# --- results -----------------------------------------------------------------------------------


@dataclass
class SourceCounts:
    """Per-source numbers of one pass."""

    seen: int = 0  # pods (k8s) or jobs (slurm) read
    pending: int = 0  # provisionable pods (k8s) or pending jobs (slurm): waiting demand
    workloads: int = 0
    claims_written: int = 0
    claims_changed: int = 0
    tokens: int = 0
    error: str | None = None

    def as_dict(self, source: str) -> dict[str, Any]:
        key = "pods" if source == "k8s" else "jobs"
        return {key: self.seen, "pending": self.pending, "workloads": self.workloads,
                "claims_written": self.claims_written, "claims_changed": self.claims_changed,
                "tokens": self.tokens, "error": self.error}


@dataclass
class WatchResult:
    """What one pass did. ``--json`` prints `as_dict`."""

    sources: dict[str, SourceCounts] = field(default_factory=dict)
    spool_events: int = 0
    spool_tokens: int = 0
    changed: list[str] = field(default_factory=list)  # workloads whose claim got a new version
    seen: dict[str, float] = field(default_factory=dict)  # changed → when its new demand began
    # (the earliest pod creation / job submission since its previous claim version, if known)
    teardowns: list[TeardownResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def claims_written(self) -> int:
        return sum(c.claims_written for c in self.sources.values())

    @property
    def claims_changed(self) -> int:
        return sum(c.claims_changed for c in self.sources.values())

    @property
    def tokens(self) -> int:
        return self.spool_tokens + sum(c.tokens for c in self.sources.values())

    @property
    def problems(self) -> list[Problem]:
        """One problem per source whose API failed (the others were recorded)."""
        return [Problem("kubernetes" if name == "k8s" else "slurm", None, name, c.error)
                for name, c in self.sources.items() if c.error]

    @property
    def errors(self) -> list[str]:
        return [str(p) for p in self.problems]

    def as_dict(self) -> dict[str, Any]:
        """The JSON summary of a pass."""
        return {
            "claims_written": self.claims_written,
            "claims_changed": self.claims_changed,
            "changed": sorted(self.changed),
            "tokens": self.tokens,
            "spool_events": self.spool_events,
            "sources": {name: c.as_dict(name) for name, c in self.sources.items()},
            "teardowns": [t.as_dict() for t in self.teardowns],
            "warnings": list(self.warnings),
            "errors": self.errors,
            "seconds": round(self.seconds, 4),
        }


# --- config → policies -------------------------------------------------------------------------


def _rules(workloads: Sequence[WorkloadSpec]) -> tuple[WorkloadRule, ...]:
    return tuple(WorkloadRule(name=w.name, contract=w.contract, source=w.source, kind=w.kind,
                              namespace=w.namespace, account=w.account, partition=w.partition,
                              tolerates_reclaimable=w.tolerates_reclaimable,
                              node_labels=dict(w.node_labels))
                 for w in workloads)


def _default_contract(config: Config) -> str:
    return "T1" if "T1" in config.contracts else sorted(config.contracts)[0]


def capacity_of(config: Config) -> Capacity:
    """The pools and flavors "could ever hold it" is judged against."""
    return Capacity(pools=config.pools, flavors=tuple(config.flavors.values()),
                    node_reserve=dict(config.node_reserve), elastic=config.elastic)


def k8s_policy(config: Config) -> K8sPolicy:
    """The Kubernetes intake rules of a config."""
    k = config.kubernetes
    return K8sPolicy(workloads=_rules(config.workloads), contracts=frozenset(config.contracts),
                     default_contract=_default_contract(config), workload_label=k.workload_label,
                     contract_label=k.contract_label, quota_block=config.quota_block,
                     capacity=capacity_of(config),
                     isolation={w.name: w.isolation for w in config.workloads
                                if w.source == "k8s"},
                     unplaced_after=config.timeouts.unplaced)


def slurm_policy(config: Config) -> SlurmPolicy:
    """The Slurm intake rules of a config."""
    return SlurmPolicy(workloads=_rules(config.workloads), contracts=frozenset(config.contracts),
                       default_contract=_default_contract(config),
                       gres_map=dict(config.slurm.gres_map),
                       gpu_resource=config.slurm_gpu_resource,
                       capacity=capacity_of(config))


def available_sources(config: Config) -> list[Source]:
    """The sources ``--source all`` watches: `Config.sources` with what this host offers."""
    return list(config.sources(host_hints(config)))


# --- read --------------------------------------------------------------------------------------


def _states(store: Store) -> dict[str, WorkloadState]:
    return {w.slug: _state(w) for w in store.workloads()}


def _state(w: WorkloadRecord) -> WorkloadState:
    return WorkloadState(slug=w.slug, status=w.status, kind=w.kind, source=w.source,
                         last_token=w.last_token, last_queued_reason=w.last_queued_reason,
                         job_id=w.job_id, namespace=w.namespace)


def read_k8s(cluster: Cluster, config: Config,
             live: Sequence[PodInfo] | None = None) -> K8sSnapshot:
    """Read the cluster: pending pods and pods on nodes scoctl launched (from one pod list per
    namespace, or from `live`, a watch cache of the unfinished pods), nodes, Deployments,
    ReplicaSets, Jobs, InferenceServices and Jobs' FailedCreate events; the volumes, DaemonSets
    and PodGroups only when some pod needs them.

    The cost follows demand, not the fleet: never one pod list per node.
    Raises TemporaryError / PermanentError from the cluster.
    """
    namespaces: list[str | None] = list(config.kubernetes.namespaces) or [None]
    nodes = cluster.nodes()
    if live is None:
        listed: list[PodInfo] = []
        for ns in namespaces:
            listed.extend(cluster.pods(ns, field_selector=LIVE_SELECTOR))
        live = listed
    managed = {n.name for n in nodes if n.labels.get(LABEL_MANAGED) == "true"}
    wanted = set(namespaces)
    pods = tuple(pod for pod in live
                 if (None in wanted or pod.namespace in wanted)
                 and (pod.phase == "Pending" or pod.node_name in managed))
    deployments, replicasets, jobs, isvcs, events = [], [], [], [], []
    for ns in namespaces:
        deployments.extend(cluster.deployments(ns))
        replicasets.extend(cluster.replicasets(ns))
        jobs.extend(cluster.jobs(ns))
        isvcs.extend(cluster.inference_services(ns))
        events.extend(cluster.events(ns, involved_kind="Job", reason="FailedCreate"))
    # the zones of the volumes pending pods mount (design: Constraints), read only when some do
    mounting = sorted({pod.namespace for pod in pods if pod.phase == "Pending"
                       and pod.placement is not None and pod.placement.volume_claims})
    zones = volume_zones([c for ns in mounting for c in cluster.volume_claims(ns)],
                         cluster.volumes()) if mounting else {}
    # DaemonSet pods count against a new unit's allocatable (Constraints): read while pods wait
    daemonsets = tuple(cluster.daemonsets()) if any(p.phase == "Pending" for p in pods) else ()
    # a gang's PodGroup (Gangs), in the namespaces of the pods of a pod group only: pending ones,
    # and those on scoctl's nodes (a gang keeps its size while its members run); not served
    # (the CRD is not installed) is no PodGroup
    grouped = sorted({pod.namespace for pod in pods if pod_group_of(pod.labels, pod.annotations)})
    groups = pod_group_sizes([g for ns in grouped for g in cluster.pod_groups(ns)])
    return K8sSnapshot(pods=pods, nodes=tuple(nodes),
                       deployments=tuple(deployments), replicasets=tuple(replicasets),
                       jobs=tuple(jobs), inference_services=tuple(isvcs), events=tuple(events),
                       volume_zones=zones, daemonsets=daemonsets, pod_groups=groups)


_BOOTING = frozenset({InstanceStatus.REQUESTED, InstanceStatus.BUILDING, InstanceStatus.ACTIVE})


def units_of(instances: Iterable[InstanceRecord]) -> dict[str, Units]:
    """Per workload, its units as the truth loop needs them (`core.truth.Units`): how many
    boot, when the newest Ready one turned Ready."""
    booting: dict[str, int] = {}
    ready: dict[str, float] = {}
    for inst in instances:
        if not inst.workload:
            continue
        if inst.status in _BOOTING:
            booting[inst.workload] = booting.get(inst.workload, 0) + 1
        elif inst.status == InstanceStatus.READY and inst.ready_at:
            at = parse_rfc3339(inst.ready_at).timestamp()
            ready[inst.workload] = max(ready.get(inst.workload, at), at)
    return {name: Units(booting=booting.get(name, 0), last_ready=ready.get(name))
            for name in {*booting, *ready}}


def read_slurm(scheduler: BatchScheduler) -> SlurmSnapshot:
    """Every job and node Slurm knows (nodes None when only they are unreadable).

    Raises a SchedulerError when the jobs cannot be read.
    """
    from scoctl.adapters.batch import SchedulerError

    jobs = scheduler.jobs()
    try:
        nodes: tuple[Any, ...] | None = tuple(scheduler.nodes())
    except SchedulerError as exc:
        log.warning("Slurm nodes unreadable (%s): hopeless jobs are not judged", exc)
        nodes = None
    return SlurmSnapshot(jobs=tuple(jobs), nodes=nodes)


# --- record ------------------------------------------------------------------------------------


@dataclass
class _Pending:
    """Teardowns to run once the pass has committed."""

    items: list[tuple[WorkloadRecord, tuple[ObjectRef, ...] | None]] = field(default_factory=list)


def _spool_create(config: Config, event: SpoolEvent) -> tuple[str, str, str]:
    spec = config.workload(event.workload)
    if spec is not None:
        return spec.kind, spec.source, spec.contract
    contract = str(event.detail.get("contract") or _default_contract(config))
    if contract not in config.contracts:
        contract = _default_contract(config)
    kind, source = str(event.detail.get("kind") or ""), str(event.detail.get("source") or "")
    if kind in ("job", "deployment", "inference") and source in SOURCES:
        return kind, source, contract  # the gate's spooled verdict says what it is
    if event.token.startswith("SLURM_"):
        return "job", "slurm", contract
    return "deployment", "k8s", contract


def _ingest_spool(config: Config, store: Store, events: Sequence[SpoolEvent],
                  pending: _Pending, *, slurm_watched: bool = False) -> int:
    """Record each spool event (design: Words "spool"); returns how many tokens were recorded.

    With `slurm_watched`, the EpilogSlurmctld's job-end records are held: logged against the
    row without a status change, for `_record_job_ends` once the job has left squeue.
    """
    recorded = 0
    for event in events:
        job_id = str(event.detail.get("job_id") or "") or None
        active = store.active_workload(event.workload)
        if job_id is not None:
            owner = store.workload_by_job(job_id)
            if owner is not None and owner.slug == event.workload and (
                    active is None or owner.id != active.id):
                # a late event of an older run of this slug: log it, never touch the new row
                store.append_event(NewEvent(event.workload, event.token, "info",
                                            {**event.detail, "note": "event of an earlier run"},
                                            status=owner.status, workload_id=owner.id,
                                            ts=event.ts))
                recorded += 1
                continue
            if owner is None and (active is None or active.job_id in (None, job_id)):
                kind, source, contract = _spool_create(config, event)
                store.ensure_workload(event.workload, kind=kind, source=source,
                                      contract=contract, job_id=job_id)
                active = store.active_workload(event.workload)
        if hold_record(event.token, job_id, slurm_watched):
            row = store.workload_by_job(str(job_id))
            store.append_event(NewEvent(event.workload, event.token, "info",
                                        {**event.detail, "note": HELD_NOTE},
                                        status=row.status if row else None,
                                        workload_id=row.id if row else None, ts=event.ts))
            recorded += 1
            continue
        create = _spool_create(config, event)
        row, outcome = record_token(store, event.workload, event.token, event.detail,
                                    create=create, ts=event.ts)
        if outcome is not None and outcome.record:
            recorded += 1
        if (active is not None and row is not None and row.id == active.id
                and not is_active(row.status) and row.source == "k8s"
                and row.kind in TORN_DOWN_KINDS):
            pending.items.append((row, None))
    return recorded


def _record_claims(store: Store, claims: Sequence[ClaimDecision], counts: SourceCounts,
                   result: WatchResult, now: float) -> None:
    for claim in claims:
        if claim.pods and store.latest_workload(claim.workload) is None:
            store.ensure_workload(claim.workload, kind=claim.kind, source=claim.source,
                                  contract=claim.contract, namespace=claim.namespace)
        before = store.claim(claim.workload)
        _, changed = record_claim(store,
            claim.workload, contract=claim.contract, requests=claim.requests,
            largest_pod=claim.largest_pod, pods=claim.pods, source=claim.source,
            tolerates_reclaimable=claim.tolerates_reclaimable, nodes=claim.nodes,
            ineligible=claim.ineligible, zone_spread=claim.zone_spread,
            overhead=claim.overhead, parts=claim.parts, preferred=claim.preferred,
            gang=claim.gang)
        counts.claims_written += 1
        if changed:
            counts.claims_changed += 1
            result.changed.append(claim.workload)
            since = parse_rfc3339(before.updated).timestamp() if before is not None else None
            began = first_sight(claim.created, since, now)
            if began is not None:
                result.seen[claim.workload] = began


def _record_tokens(store: Store, tokens: Sequence[TokenDecision], counts: SourceCounts,
                   pending: _Pending) -> None:
    for token in tokens:
        before = store.active_workload(token.slug)
        if before is None:
            before = store.ensure_workload(token.slug, kind=token.kind, source=token.source,
                                           contract=token.contract, job_id=token.job_id,
                                           namespace=token.namespace)
        row, outcome = record_token(store, token.slug, token.token, token.detail)
        if outcome is None or not outcome.record:
            continue
        counts.tokens += 1
        if (row is not None and row.status in INACTIVE_STATUSES and row.source == "k8s"
                and row.kind in TORN_DOWN_KINDS):
            pending.items.append((row, token.teardown))


def _buffered(config: Config, store: Store, claims: Sequence[ClaimDecision], source: Source,
              now: float) -> tuple[ClaimDecision, ...]:
    """`claims` with the chunks of the buffers of `source`'s workloads added, each a part
    planned in the pools of its tier (design: Buffers, `core.buffers.with_buffers`); read with the
    config as it is now, so a SIGHUP reload applies a changed buffer in the next pass."""
    specs = {w.name: w for w in config.workloads if w.source == source}
    buffers = [b for b in config.buffers if b.workload in specs]
    if not buffers:
        return tuple(claims)
    bare = {b.workload: ClaimDecision(
        workload=b.workload, contract=specs[b.workload].contract, kind=specs[b.workload].kind,
        source=source, requests={}, largest_pod={}, pods=0,
        namespace=specs[b.workload].namespace) for b in buffers}
    stored = {b.workload: dict(c.largest_pod) for b in buffers
              if (c := store.claim(b.workload)) is not None}
    return with_buffers(claims, buffers, bare, stored, datetime.fromtimestamp(now, UTC),
                        config.pools)


def _record(store: Store, decision: IntakeDecision, counts: SourceCounts, result: WatchResult,
            pending: _Pending, now: float, config: Config, source: Source) -> None:
    counts.workloads = decision.workloads
    result.warnings.extend(decision.warnings)
    claims = _buffered(config, store, decision.claims, source, now)
    _record_claims(store, claims, counts, result, now)
    _record_tokens(store, decision.tokens, counts, pending)


def _end_candidates(store: Store, events: Sequence[SpoolEvent],
                    listed: Collection[str]) -> list[int]:
    """Job ids of active Slurm rows (and of this pass's spool events) squeue does not list."""
    ids = {str(w.job_id) for w in store.workloads(active_only=True)
           if w.source == "slurm" and w.job_id}
    ids |= {str(e.detail["job_id"]) for e in events if e.detail.get("job_id")}
    return sorted(int(i) for i in ids - set(listed) if i.isdigit())


def read_accounting(scheduler: BatchScheduler, job_ids: Sequence[int],
                    result: WatchResult) -> dict[str, FinishedJob]:
    """What accounting says of jobs that left squeue; nothing (and a warning) when it cannot
    answer: no slurmdbd is the common case, and the epilog's records stand in."""
    from scoctl.adapters.batch import SchedulerError

    if not job_ids:
        return {}
    try:
        return {str(job.job_id): job for job in scheduler.finished(job_ids)}
    except SchedulerError as exc:
        result.warnings.append(f"Slurm accounting unavailable ({exc}): {len(job_ids)} ended "
                               "jobs take their end from the epilog's records")
        return {}


def _record_job_ends(store: Store, listed: Collection[str], accounted: Mapping[str, FinishedJob],
                     counts: SourceCounts, pending: _Pending, contract: str) -> None:
    """End every active Slurm row whose job squeue no longer lists (`core.jobend`)."""
    gone = [_state(w) for w in store.workloads(active_only=True)
            if w.source == "slurm" and w.job_id and w.job_id not in listed]
    recorded = {str(row.job_id): recorded_end(store.events(workload=row.slug), str(row.job_id))
                for row in gone}
    _record_tokens(store, job_ends(gone, accounted, recorded, contract), counts, pending)


def _claimed(store: Store, source: str) -> frozenset[str]:
    return frozenset(c.workload for c in store.claims() if c.source == source and c.requests)


# --- one pass ----------------------------------------------------------------------------------


def run_pass(config: Config, store: Store, clock: Clock, *, sources: Collection[Source],
             teardown: bool = True, cluster: Cluster | None = None,
             scheduler: BatchScheduler | None = None,
             live_pods: Sequence[PodInfo] | None = None,
             memo: IntakeMemo | None = None) -> WatchResult:
    """One watch pass: spool, then each source; one transaction; then teardowns and spool
    clean-up. A source whose API fails is reported in the result (``errors``) and skipped; the
    others and the spool are still recorded.

    `live_pods` replaces the pod list (a watch cache of unfinished pods), and `memo` keeps what
    was read of them between passes (`core.intake.k8s.IntakeMemo`: a long-lived follower's,
    so a pass reads again only the pods that changed). Raises ConfigError when a requested
    source has no usable configuration.
    """
    # The cyclic collector stays paused for the whole pass, reads included: between the pod
    # list and the commit, full collections over the fresh (and all live) values of a large
    # intake found nothing to free and took longer than the decision itself.
    with collector_paused():
        return _run_pass(config, store, clock, sources=sources, teardown=teardown,
                         cluster=cluster, scheduler=scheduler, live_pods=live_pods, memo=memo)


def _run_pass(config: Config, store: Store, clock: Clock, *, sources: Collection[Source],
              teardown: bool, cluster: Cluster | None, scheduler: BatchScheduler | None,
              live_pods: Sequence[PodInfo] | None, memo: IntakeMemo | None) -> WatchResult:
    started = clock.monotonic()
    result = WatchResult()
    # the spool before the sources: a job whose submission is spooled is in the squeue read
    # below unless it has already left it
    events = list(pending_events(config.spool))
    k8s_read: K8sSnapshot | None = None
    slurm_read: SlurmSnapshot | None = None
    if "k8s" in sources:
        counts = result.sources["k8s"] = SourceCounts()
        if cluster is None:
            raise ConfigError("watch --source k8s needs a Kubernetes cluster",
                              field="kubernetes.kubeconfig")
        try:
            k8s_read = read_k8s(cluster, config, live_pods)
            counts.seen = len(k8s_read.pods)
            if memo is None:  # else from the buckets the decision reads (`IntakeMemo`)
                counts.pending = count_pending(k8s_read.pods, k8s_policy(config))
        except ApiError as exc:
            counts.error = str(exc)
    if "slurm" in sources:
        counts = result.sources["slurm"] = SourceCounts()
        if scheduler is None:
            raise ConfigError("watch --source slurm needs Slurm", field="slurm")
        try:
            slurm_read = read_slurm(scheduler)
            counts.seen = len(slurm_read.jobs)
            counts.pending = sum(1 for job in slurm_read.jobs if job.state == "PENDING")
        except ApiError as exc:
            counts.error = str(exc)
    listed = frozenset(str(j.job_id) for j in slurm_read.jobs) if slurm_read else frozenset()
    accounted = (read_accounting(scheduler, _end_candidates(store, events, listed), result)
                 if slurm_read is not None and scheduler is not None else {})

    pending = _Pending()
    now = clock.now().timestamp()
    with store.transaction():
        result.spool_tokens = _ingest_spool(config, store, events, pending,
                                            slurm_watched="slurm" in sources)
        result.spool_events = len(events)
        states = _states(store)
        if k8s_read is not None:
            snap = K8sSnapshot(**{**k8s_read.__dict__, "workloads": states,
                                  "claims": _claimed(store, "k8s"), "now": now,
                                  "units": units_of(store.instances())})
            _record(store, decide_k8s_intake(snap, k8s_policy(config), memo),
                    result.sources["k8s"],
                    result, pending, now, config, "k8s")
            if memo is not None:
                result.sources["k8s"].pending = memo.pending()
            states = _states(store)
        if slurm_read is not None:
            tracked = tuple(_state(w) for w in store.workloads(active_only=True)
                            if w.source == "slurm" and w.job_id)
            known = frozenset(str(j.job_id) for j in slurm_read.jobs
                              if parse_sco_comment(j.comment).get("workload")
                              and store.workload_by_job(str(j.job_id)) is not None)
            snap_s = SlurmSnapshot(jobs=slurm_read.jobs, nodes=slurm_read.nodes,
                                   workloads=states, tracked=tracked, known_jobs=known,
                                   claims=_claimed(store, "slurm"))
            _record(store, decide_slurm_intake(snap_s, slurm_policy(config)),
                    result.sources["slurm"], result, pending, now, config, "slurm")
            _record_job_ends(store, listed, accounted, result.sources["slurm"], pending,
                             _default_contract(config))
    for event in events:  # only after the commit: a crash re-ingests, never loses
        discard(event)
    for row, refs in pending.items:
        outcome = teardown_workload(store, cluster if "k8s" in sources else None, row,
                                    refs=refs, enabled=teardown,
                                    workload_label=config.kubernetes.workload_label)
        result.teardowns.append(outcome)
    result.seconds = max(clock.monotonic() - started, 0.0)
    return result


# --- follow ------------------------------------------------------------------------------------


class Follower:
    """The state of ``--follow``: a cache of unfinished pods fed by watch events, the batch window,
    and when the next periodic pass is due. Time comes from the Clock only, so tests drive it
    event by event without sleeping."""

    def __init__(self, config: Config, store: Store, clock: Clock, *,
                 sources: Collection[Source], teardown: bool = True,
                 cluster: Cluster | None = None, scheduler: BatchScheduler | None = None,
                 poll: float | None = None) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.sources = tuple(sources)
        self.teardown = teardown
        self.cluster = cluster
        self.scheduler = scheduler
        self.poll = poll if poll is not None else max(config.intake.batch_max, 1.0)
        self.policy = k8s_policy(config)
        self.pods: dict[tuple[str, str], PodInfo] = {}
        self.synced = False
        self.window: BatchWindow | None = None
        self.next_poll = clock.monotonic()
        self.resyncs = 0
        self.memo = IntakeMemo()  # what intake read of the cached pods, pass to pass

    def _demand(self, pod: PodInfo | None) -> bool:
        return pod is not None and is_provisionable(pod) and is_managed_pod(pod, self.policy)

    def handle(self, event: PodEvent) -> bool:
        """Apply one watch event to the cache; returns whether demand changed (and the window
        was opened or extended)."""
        changed = False
        if event.type == "RESYNC":
            old = self.pods
            self.pods = {(p.namespace, p.name): p for p in event.pods}
            self.synced = True
            self.resyncs += 1
            before = {k for k, p in old.items() if self._demand(p)}
            after = {k for k, p in self.pods.items() if self._demand(p)}
            changed = before != after or any(old.get(k) != self.pods.get(k) for k in after)
        elif event.pod is not None:
            key = (event.pod.namespace, event.pod.name)
            old_pod = self.pods.get(key)
            if event.type == "DELETED":
                self.pods.pop(key, None)
                changed = self._demand(old_pod)
            else:
                self.pods[key] = event.pod
                changed = self._demand(old_pod) or self._demand(event.pod)
        if changed:
            self.window = extend_window(self.window, self.clock.monotonic())
        return changed

    def seconds_to_due(self) -> float:
        """How long until the next commit is due (0 when it is)."""
        now = self.clock.monotonic()
        intake = self.config.intake
        if self.window is not None:
            return max(0.0, window_deadline(self.window, intake.batch_idle,
                                            intake.batch_max) - now)
        return max(0.0, self.next_poll - now)

    def due(self) -> bool:
        """A closed batch window, or (no window open) the periodic pass."""
        now = self.clock.monotonic()
        intake = self.config.intake
        if self.window is not None:
            return window_due(self.window, now, intake.batch_idle, intake.batch_max)
        return now >= self.next_poll

    def commit(self) -> WatchResult:
        """Run one pass over the cached pods (listed when no watch has synced yet)."""
        pending = list(self.pods.values()) if self.synced else None
        self.window = None
        try:
            return run_pass(self.config, self.store, self.clock, sources=self.sources,
                            teardown=self.teardown, cluster=self.cluster,
                            scheduler=self.scheduler, live_pods=pending, memo=self.memo)
        finally:
            self.next_poll = self.clock.monotonic() + self.poll


def resolve_sources(config: Config, source: str) -> list[Source]:
    """``k8s``, ``slurm`` or ``all`` (the configured ones) as a list; UsageError otherwise."""
    if source == "all":
        found = available_sources(config)
        if not found:
            raise UsageError("watch: neither Kubernetes nor Slurm is configured (set "
                             "kubernetes.kubeconfig / $KUBECONFIG, or slurm.rest_url / squeue)")
        return found
    if source not in SOURCES:
        raise UsageError(f"--source {source}: use k8s, slurm or all")
    return ["k8s"] if source == "k8s" else ["slurm"]


