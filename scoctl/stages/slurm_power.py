"""The Slurm power stage (design: State, Operating): Slurm's power saving meets the fleet.

Slurm runs its power-saving programs (ResumeProgram, SuspendProgram, ResumeFailProgram) as
SlurmUser, who may not write the state: `scoctl slurm resume|suspend|resume-fail` only drop a
`PowerRequest` into the spool (`spool_request`) and exit 0. The next pass applies them:

read: the power requests in the spool (in the order Slurm made them), Slurm's view of their
nodes, and the nodes acquire or reconcile give up on · decide: `core.slurm_power` (the workload
a node serves, what node names ask for, which claims lose which nodes) · record: the claims
(source ``slurm``, one "pod" per node), the marks of handed-back nodes whose servers reconcile
deletes, ``SLURM_NODES_RESUME`` / ``SLURM_NODES_RELEASED`` events · act: ``scontrol update
State=POWER_DOWN_FORCE`` (never DOWN) for nodes whose resume failed and for the nodes of
launches that failed for sure. A request's spool file is deleted once it is applied.

Plan and acquire create one server per resumed node name; reconcile deletes the servers of
handed-back nodes. This stage never calls another one: `scoctl.runner.compose` composes them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.core.fleet import LIVE_STATUSES
from scoctl.core.model import InstanceUpdate, NewEvent, NodeRelease
from scoctl.core.model.problems import Problem
from scoctl.core.slurm_power import (
    POWER_DOWN,
    RELEASE_REASONS,
    RESUME,
    RESUME_FAIL,
    NodeRule,
    PowerRequest,
    node_shape,
    nodes_demand,
    releases,
    request_of,
    resume_file_jobs,
    resume_gang_size,
    resume_workload,
)
from scoctl.core.timefmt import rfc3339
from scoctl.errors import ApiError, ScoctlError
from scoctl.host.spool import POWER_KIND, SpoolEvent, discard, pending_events, write_event
from scoctl.services.claims import record_claim
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler

log = logging.getLogger(__name__)



def _rules(config: Config) -> list[NodeRule]:
    return [NodeRule(spec.name, spec.partition) for spec in config.workloads
            if spec.source == "slurm"]


def _put_claim(store: Store, workload: str, nodes: Sequence[str],
               shapes: Mapping[str, Mapping[str, int]], contract: str,
               tolerates: bool, gang: int) -> None:
    requests, largest = nodes_demand(nodes, shapes)
    record_claim(store, workload, contract=contract, requests=requests, largest_pod=largest,
                 pods=len(nodes), source="slurm", tolerates_reclaimable=tolerates,
                 nodes=list(nodes), gang=gang)


def _node_counts(scheduler: BatchScheduler, jobs: Mapping[str, str]) -> dict[str, int]:
    """job id → the nodes Slurm says it needs, for the resume file's jobs Slurm still knows."""
    out: dict[str, int] = {}
    for job_id in sorted(set(jobs.values())):
        job = scheduler.job(int(job_id)) if job_id.isdigit() else None
        if job is not None:
            out[job_id] = job.node_count
    return out


def resume_nodes(config: Config, store: Store, scheduler: BatchScheduler,
                 names: Sequence[str], *, workload: str | None = None,
                 jobs: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Slurm asked to resume `names`: add them to their workloads' claims (one server per node
    name follows from plan and acquire). Returns the nodes added per workload.

    The workload is `workload`, else the one tracking a job of the resume file that runs on
    the node (`jobs[node] = job id`), else the config's Slurm workload for the node's
    partition, else ``slurm-<partition>``. Raises the scheduler's errors when Slurm's nodes
    cannot be read.
    """
    known = {n.name: n for n in scheduler.nodes()}
    shapes = store.node_shapes()
    by_workload: dict[str, list[str]] = {}
    for name in names:
        node = known.get(name)
        if node is None:
            log.warning("slurm resume: unknown node %s", name)
            continue
        shapes[name] = node_shape(node, config.slurm.gres_map, config.slurm_gpu_resource)
        job = (jobs or {}).get(name)
        owner = store.workload_by_job(job) if job and workload is None else None
        target = resume_workload(node, workload=workload,
                                 job_owner=owner.slug if owner else None, rules=_rules(config))
        by_workload.setdefault(target, []).append(name)
    counts = _node_counts(scheduler, jobs or {})  # read before the transaction
    with store.transaction():
        store.save_node_shapes({name: shapes[name] for name in names if name in known})
        store.clear_suspended(names)
        for slug, added in sorted(by_workload.items()):
            wanted = config.workload(slug)
            old = store.claim(slug)
            nodes = sorted(set(old.nodes if old else ()) | set(added))
            contract = wanted.contract if wanted else (old.contract if old else "T1")
            gang = max(old.gang if old else 0, resume_gang_size(added, jobs or {}, counts))
            _put_claim(store, slug, nodes, shapes, contract,
                       wanted.tolerates_reclaimable if wanted else True, gang)
            store.append_event(NewEvent(slug, "SLURM_NODES_RESUME", "info",
                                        {"nodes": ",".join(sorted(added))}))
    return by_workload


def release_nodes(store: Store, handed_back: Iterable[NodeRelease], *,
                  suspend: bool) -> dict[str, list[str]]:
    """Slurm nodes handed back: drop them from their claims (one ``SLURM_NODES_RELEASED``
    event per claim and reason) and, with `suspend` (Slurm's SuspendProgram or
    ResumeFailProgram), mark them so the next reconcile deletes their servers without a
    drain. Returns the nodes dropped per workload."""
    reasons: dict[str, list[str]] = {}
    for item in handed_back:
        reasons.setdefault(item.reason, []).append(item.node)
    dropped: dict[str, list[str]] = {}
    shapes = store.node_shapes()
    with store.transaction():
        for reason, names in reasons.items():
            for release in releases(store.claims(), names):
                claim = release.claim
                _put_claim(store, claim.workload, release.keep, shapes, claim.contract,
                           claim.tolerates_reclaimable, claim.gang if release.keep else 0)
                dropped.setdefault(claim.workload, []).extend(release.gone)
                store.append_event(NewEvent(claim.workload, "SLURM_NODES_RELEASED", "info",
                                            {"nodes": ",".join(release.gone), "reason": reason}))
            if suspend:
                _mark_suspended(store, names)
    return {slug: sorted(nodes) for slug, nodes in dropped.items()}


def _mark_suspended(store: Store, names: Collection[str]) -> None:
    instances = store.instances()
    wanted = set(names)
    live = {i.node_name for i in instances if i.node_name and i.status in LIVE_STATUSES}
    store.mark_suspended(wanted & live)
    now = store.now()
    for inst in instances:
        if inst.node_name in wanted and inst.status in LIVE_STATUSES and not inst.idle_since:
            store.update_instance(InstanceUpdate(inst.id, idle_since=now))


def power_down(scheduler: BatchScheduler | None, names: Sequence[str], reason: str
               ) -> list[Problem]:
    """``scontrol update State=POWER_DOWN_FORCE`` (never DOWN) for `names`, so Slurm requeues
    their jobs and can resume the nodes again. Returns one problem per node Slurm refused;
    without a scheduler it only warns (ResumeFailProgram powers them down later)."""
    problems: list[Problem] = []
    for name in names:
        if scheduler is None:
            log.warning("Slurm node %s: %s; no Slurm to power it down, ResumeFailProgram will",
                        name, reason)
            continue
        try:
            scheduler.update_node(name, state=POWER_DOWN, reason=f"scoctl: {reason}")
        except ApiError as exc:
            log.warning("could not power down Slurm node %s: %s", name, exc)
            problems.append(Problem.of(exc, api="slurm", what=name))
    return problems


def hand_back(store: Store, scheduler: BatchScheduler | None,
              failed: Sequence[NodeRelease]) -> tuple[str, ...]:
    """Nodes whose launch failed for sure (acquire returns them): back to powered-down and out
    of their claims, so Slurm requeues the job. Returns the nodes handed back."""
    for reason in sorted({item.reason for item in failed}):
        power_down(scheduler, [item.node for item in failed if item.reason == reason], reason)
    release_nodes(store, failed, suspend=False)
    return tuple(item.node for item in failed)


# --------------------------------------------------------------------------- through the spool


def resume_jobs(path: str | None) -> dict[str, str]:
    """node → job id from Slurm's SLURM_RESUME_FILE; {} when there is none or it is
    unreadable (the workload then comes from the node's partition)."""
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return resume_file_jobs(data)


def spool_request(config: Config, clock: Clock, request: PowerRequest) -> Path:
    """Drop a power request into the spool (no state, no lock: SlurmUser may run this).
    Raises ScoctlError when the spool is not writable."""
    try:
        return write_event(config.spool, ts=rfc3339(clock.now()), token=request.action,
                           workload=request.workload or "", detail=request.detail(),
                           kind=POWER_KIND)
    except OSError as exc:
        raise ScoctlError(f"cannot write the power request to the spool {config.spool}: "
                          f"{exc.strerror or exc}") from exc


@dataclass
class PowerResult:
    """What one pass applied: requests, nodes added to claims (resume) and dropped from them
    (suspend, resume failed) per workload, nodes powered down, and errors."""

    applied: int = 0
    resumed: dict[str, list[str]] = field(default_factory=dict)
    released: dict[str, list[str]] = field(default_factory=dict)
    powered_down: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """The problems, as a person reads them."""
        return [str(p) for p in self.problems]


def apply_requests(config: Config, store: Store,
                   scheduler: BatchScheduler | None) -> PowerResult:
    """Apply the spooled power requests in order; each file is deleted once applied. A
    request that needs Slurm while Slurm cannot be read stays for the next pass (and the ones
    after it wait too, so the order holds). The caller holds the run lock."""
    result = PowerResult()
    for event in pending_events(config.spool, kind=POWER_KIND):
        request = request_of(event.token, event.workload, event.detail)
        if request is None:
            log.warning("spool: %s is not a power request scoctl wrote; removed", event.path)
            discard(event)
            continue
        try:
            _apply(config, store, scheduler, request, result)
        except ApiError as exc:
            result.problems.append(Problem("slurm", None, "slurm power",
                                           f"{exc} (the request stays in the spool)"))
            break
        _done(event, result)
    return result


def _done(event: SpoolEvent, result: PowerResult) -> None:
    discard(event)  # only after the transaction that applied it has committed
    result.applied += 1


def _apply(config: Config, store: Store, scheduler: BatchScheduler | None,
           request: PowerRequest, result: PowerResult) -> None:
    if request.action == RESUME:
        if scheduler is None:
            raise ApiError("Slurm is not in use here: cannot read the nodes to resume")
        added = resume_nodes(config, store, scheduler, request.nodes,
                             workload=request.workload, jobs=request.jobs)
        for slug, nodes in added.items():
            result.resumed.setdefault(slug, []).extend(nodes)
        return
    reason = RELEASE_REASONS[request.action]
    if request.action == RESUME_FAIL:
        # out of DOWN and back to powered-down, so Slurm requeues the job and can resume the
        # node again (a DOWN CLOUD node is never resumed)
        result.problems.extend(power_down(scheduler, request.nodes, reason))
        result.powered_down.extend(request.nodes)
    dropped = release_nodes(store, [NodeRelease(n, reason) for n in request.nodes],
                            suspend=True)
    for slug, nodes in dropped.items():
        result.released.setdefault(slug, []).extend(nodes)

