"""The gate stage (DESIGN §4, DD-0018 §3 and §4a): can any node or pool ever hold a request?

read: node capacity (sinfo / slurmrestd, or Kubernetes node allocatable) · decide:
`core.gate.decide_slurm` / `decide_k8s` (pure) · record (with a workload): the row, and on
over capacity `failed` plus a `CAPACITY_EXCEEDED` event.

The gate does not take the run lock: its writes are one small SQLite transaction, and a submit
wrapper must never wait behind a long `scoctl run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from scoctl.config import Config
from scoctl.core.gate import (
    OVER_CAPACITY,
    SKIPPED,
    GateRequest,
    GateVerdict,
    NodeAllocatable,
    decide_k8s,
    decide_slurm,
)
from scoctl.errors import ScoctlError

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cluster import Cluster
    from scoctl.state import Store, WorkloadRecord

Backend = Literal["slurm", "k8s"]


@dataclass(frozen=True)
class GateOutcome:
    verdict: GateVerdict
    partition: str | None
    workload: WorkloadRecord | None

    def as_dict(self) -> dict[str, Any]:
        out = self.verdict.as_dict()
        out["workload"] = ({"slug": self.workload.slug, "status": self.workload.status}
                           if self.workload else None)
        if self.partition:
            out["partition"] = self.partition
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
    return decide_k8s(request, nodes, config.pools, config.flavors.values(), elastic=elastic,
                      node_reserve=config.node_reserve, unreadable=unreadable)


def record_verdict(store: Store, verdict: GateVerdict, request: GateRequest, *, slug: str,
                   kind: str, source: str, contract: str, partition: str | None,
                   job_id: str | None = None) -> WorkloadRecord:
    """Create (or reuse) the workload row; on over capacity fail a `pending` row and log
    `CAPACITY_EXCEEDED` with the request and the best node. A row already past `pending`
    only gets the event: the gate never fails a running workload."""
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
            failed = row.status == "pending"
            if failed:
                store.set_status(row.id, "failed")
            store.append_event(slug, "CAPACITY_EXCEEDED", "error",
                               "failed" if failed else row.status, detail, workload_id=row.id)
        elif verdict.verdict == SKIPPED:
            store.append_event(slug, "GATE_SKIPPED", "warning", row.status, detail,
                               workload_id=row.id)
        latest = store.latest_by_id(row.id)
        assert latest is not None
        return latest


def run_gate(config: Config, request: GateRequest, *, backend: Backend,
             partition: str | None = None, elastic: bool = True,
             workload: str | None = None, kind: str = "job", contract: str | None = None,
             job_id: str | None = None, state_path: Path | None = None,
             scheduler: BatchScheduler | None = None, cluster: Cluster | None = None,
             ) -> GateOutcome:
    """Decide, and with `workload` record the verdict in the state at `state_path`."""
    if backend == "slurm":
        if scheduler is None:
            from scoctl.adapters.factory import scheduler_for

            scheduler = scheduler_for(config)
        verdict, partition = slurm_verdict(config, scheduler, request, partition=partition,
                                           elastic=elastic)
    else:
        unreadable = None
        if cluster is None:
            try:
                from scoctl.adapters.factory import cluster_for

                cluster = cluster_for(config)
            except ScoctlError as exc:
                unreadable = str(exc)
        verdict = k8s_verdict(config, cluster, request, elastic=elastic, unreadable=unreadable)
    row = None
    if workload:
        spec = config.workload(workload)
        contract = contract or (spec.contract if spec else None) or "T1"
        from scoctl.state import Store  # only a recorded verdict needs SQLite

        with Store.open(state_path or config.state, create=True) as store:
            row = record_verdict(store, verdict, request, slug=workload, kind=kind,
                                 source=backend, contract=contract, partition=partition,
                                 job_id=job_id)
    return GateOutcome(verdict=verdict, partition=partition, workload=row)
