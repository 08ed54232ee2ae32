"""The gate stage (design: Gate, DD-0018 §3 and Gatea): can any node or pool ever hold a request?

read: node capacity (sinfo / slurmrestd, or Kubernetes node allocatable) · decide:
`core.gate.decide_slurm` / `decide_k8s` (pure) · record (with a workload): the row, and on
over capacity `failed` plus a `CAPACITY_EXCEEDED` event.

The gate does not take the run lock: its writes are one small SQLite transaction, and a submit
wrapper must never wait behind a long `scoctl run`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from scoctl.config.schema import Config, is_url
from scoctl.core.gate import (
    OVER_CAPACITY,
    SKIPPED,
    GateRequest,
    GateVerdict,
    NodeAllocatable,
    decide_k8s,
    decide_slurm,
)
from scoctl.core.model.vocabulary import WorkloadStatus
from scoctl.errors import ScoctlError, StateError

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import WorkloadRecord
    from scoctl.state import Store

log = logging.getLogger(__name__)

Backend = Literal["slurm", "k8s"]


@dataclass(frozen=True)
class GateOutcome:
    """The verdict, the partition judged (Slurm), the recorded workload row, and — when the
    state was not writable — the spool file the over-capacity event went to."""

    verdict: GateVerdict
    partition: str | None
    workload: WorkloadRecord | None
    spooled: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """design: Schemas's ``scoctl gate --json`` object (plus ``partition`` / ``spooled``)."""
        out = self.verdict.as_dict()
        out["workload"] = ({"slug": self.workload.slug, "status": self.workload.status}
                           if self.workload else None)
        if self.partition:
            out["partition"] = self.partition
        if self.spooled:
            out["spooled"] = self.spooled
        return out


def slurm_verdict(config: Config, scheduler: BatchScheduler, request: GateRequest, *,
                  partition: str | None, elastic: bool) -> tuple[GateVerdict, str | None]:
    """Read the partition's nodes and decide; unreadable capacity is `skipped`, never a failure."""
    from scoctl.adapters.batch import SchedulerError

    nodes = None
    unreadable = None
    try:
        if partition is None:
            partition = (config.slurm.gpu_partition if request.gpus else None) \
                or config.slurm.default_partition or scheduler.default_partition()
        nodes = scheduler.nodes(partition)
    except SchedulerError as exc:
        unreadable = str(exc)
    verdict = decide_slurm(request, nodes, config.pools, config.flavors.values(),
                           elastic=elastic, partition=partition,
                           gres_map=config.slurm.gres_map, node_reserve=config.node_reserve,
                           unreadable=unreadable)
    _warn_unjudged(verdict, unreadable)
    return verdict, partition


def k8s_verdict(config: Config, cluster: Cluster | None, request: GateRequest, *,
                elastic: bool, unreadable: str | None = None) -> GateVerdict:
    """Read node allocatable and decide; an unreadable API is `skipped`."""
    nodes = None
    if cluster is not None:
        try:
            nodes = [NodeAllocatable(name=n.name, allocatable=n.allocatable)
                     for n in cluster.nodes()]
        except ScoctlError as exc:
            unreadable = str(exc)
    verdict = decide_k8s(request, nodes, config.pools, config.flavors.values(), elastic=elastic,
                         node_reserve=config.node_reserve, unreadable=unreadable)
    _warn_unjudged(verdict, unreadable)
    return verdict


def _warn_unjudged(verdict: GateVerdict, unreadable: str | None) -> None:
    """A verdict other than `skipped` reached without node capacity (a pool flavor fits) still
    says that the nodes could not be read."""
    if unreadable and verdict.verdict != SKIPPED:
        log.warning("node capacity unreadable (%s): judged by pool flavors only", unreadable)


def record_verdict(store: Store, verdict: GateVerdict, request: GateRequest, *, slug: str,
                   kind: str, source: str, contract: str, partition: str | None,
                   job_id: str | None = None) -> WorkloadRecord:
    """Create (or reuse) the workload row; on over capacity fail a `pending` row and log
    `CAPACITY_EXCEEDED` with the request and the best node. A row already past `pending`
    only gets the event: the gate never fails a running workload."""
    from scoctl.core.model import NewEvent  # the records' types: only a recorded verdict
    from scoctl.core.tokens import map_token  # with the state rows: only a recorded verdict

    with store.transaction():
        row = store.ensure_workload(slug, kind=kind, source=source, contract=contract,
                                    job_id=job_id)
        detail: dict[str, Any] = {
            "request": {"cpus": request.cpus, "memory_mb": request.memory_mb,
                        "gpus": request.gpus, "gpu_type": request.gpu_type},
            "reason": verdict.reason,
            "node": verdict.as_dict()["node"],
            "pool": verdict.pool,
            "partition": partition,
            "backend": source,
        }
        if verdict.verdict == OVER_CAPACITY:
            failed = row.status == WorkloadStatus.PENDING
            if failed:
                store.set_status(row.id, WorkloadStatus.FAILED)
            store.append_event(NewEvent(slug, "CAPACITY_EXCEEDED",
                                        map_token("CAPACITY_EXCEEDED").level, detail,
                                        status=WorkloadStatus.FAILED if failed else row.status,
                                        workload_id=row.id))
        elif verdict.verdict == SKIPPED:
            store.append_event(NewEvent(slug, "GATE_SKIPPED", "warning", detail,
                                        status=row.status, workload_id=row.id))
        latest = store.latest_by_id(row.id)
        assert latest is not None
        return latest


def run_gate(config: Config, request: GateRequest, *, backend: Backend,
             partition: str | None = None, elastic: bool = True,
             workload: str | None = None, kind: str = "job", contract: str | None = None,
             job_id: str | None = None, state_path: Path | str | None = None,
             scheduler: BatchScheduler | None = None, cluster: Cluster | None = None,
             ) -> GateOutcome:
    """Decide, and with `workload` record the verdict in the state at `state_path`."""
    if backend == "slurm":
        if scheduler is None:
            from scoctl.adapters.factory import scheduler_for

            scheduler = scheduler_for(config, timeout=config.gate.timeout)
        verdict, partition = slurm_verdict(config, scheduler, request, partition=partition,
                                           elastic=elastic)
    else:
        unreadable = None
        if cluster is None:
            try:
                from scoctl.adapters.factory import cluster_for

                cluster = cluster_for(config, timeout=config.gate.timeout)
            except ScoctlError as exc:
                unreadable = str(exc)
        verdict = k8s_verdict(config, cluster, request, elastic=elastic, unreadable=unreadable)
    row = None
    spooled = None
    if workload:
        spec = config.workload(workload)
        contract = contract or (spec.contract if spec else None) or "T1"
        state = state_path or config.state
        try:
            if is_url(state):
                # hooks and wrappers hold no database credentials (design: State, Runners)
                raise StateError("the state is a shared database: hooks record through the "
                                 "spool")
            path = Path(state)
            if not _writable(path):
                raise StateError(f"{path}: not writable by this user")
            from scoctl.state import open_store  # only a recorded verdict opens the state

            with open_store(path, create=True) as store:
                row = record_verdict(store, verdict, request, slug=workload, kind=kind,
                                     source=backend, contract=contract, partition=partition,
                                     job_id=job_id)
        except StateError as exc:
            # a submit wrapper runs as the submitting user, who may not write the state: the
            # verdict (and its exit code) must not depend on it, so the event goes to the spool
            spooled = spool_verdict(config, verdict, request, slug=workload, kind=kind,
                                    source=backend, contract=contract, partition=partition,
                                    why=str(exc))
    return GateOutcome(verdict=verdict, partition=partition, workload=row, spooled=spooled)


def _writable(path: Path) -> bool:
    """Whether this process can write the state at `path` (SQLite's WAL also writes files
    beside it, so the directory must be writable too); a missing file needs a writable
    directory (it is created)."""
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if path.exists() and not os.access(path, os.W_OK):
        return False
    return os.access(folder, os.W_OK | os.X_OK)


def spool_verdict(config: Config, verdict: GateVerdict, request: GateRequest, *, slug: str,
                  kind: str, source: str, contract: str, partition: str | None,
                  why: str) -> str | None:
    """Record an over-capacity verdict through the spool (``CAPACITY_EXCEEDED``, log only, with
    the row's kind, source and contract for `watch` to create it) when the state cannot be
    written; returns the spooled file, or None when there was nothing to record or the spool
    is not writable either (the verdict and exit code stand regardless)."""
    if verdict.verdict != OVER_CAPACITY:
        return None
    from scoctl.clock import SystemClock, rfc3339
    from scoctl.host.spool import write_event

    detail = {
        "request": {"cpus": request.cpus, "memory_mb": request.memory_mb,
                    "gpus": request.gpus, "gpu_type": request.gpu_type},
        "reason": verdict.reason, "node": verdict.as_dict()["node"], "pool": verdict.pool,
        "partition": partition, "backend": source, "kind": kind, "source": source,
        "contract": contract, "note": f"spooled: {why}",
    }
    try:
        return str(write_event(config.spool, ts=rfc3339(SystemClock().now()),
                               token="CAPACITY_EXCEEDED", workload=slug, detail=detail))
    except OSError:
        return None
