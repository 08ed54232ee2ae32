"""State records as the JSON objects of DESIGN §12 (shared by status, plan and events)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scoctl.core.model import (
    ClaimRecord,
    EventRecord,
    InstanceRecord,
    LatencySample,
    NoticedRecord,
    PlanGeneration,
    PlanWorkloadRecord,
    WorkloadRecord,
)
from scoctl.core.quantity import to_json_resources


def workload_json(w: WorkloadRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"slug": w.slug, "kind": w.kind, "source": w.source,
                           "contract": w.contract, "status": w.status}
    if w.job_id:
        out["job_id"] = w.job_id
    return out


def claim_json(c: ClaimRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"workload": c.workload, "version": c.version, "pods": c.pods,
                           "requests": to_json_resources(c.requests),
                           "largest_pod": to_json_resources(c.largest_pod),
                           "contract": c.contract, "source": c.source}
    if c.nodes:
        out["nodes"] = list(c.nodes)
    return out


def plan_workload_json(p: PlanWorkloadRecord, *, explain: bool = False,
                       blast: Mapping[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "workload": p.workload, "feasible": p.feasible, "degraded": p.degraded,
        "reasons": list(p.reasons),
        "pools": [{"pool": u.pool, "tier": u.tier, "group": u.group, "units": u.units,
                   "share": round(u.share, 4)} for u in p.pools],
        "generation": p.generation, "claim_version": p.claim_version,
    }
    if explain:
        out["explain"] = [dict(e) for e in p.explain]
    if blast is not None:
        out["blast"] = dict(blast)
    return out


def plan_json(generation: PlanGeneration | None, plans: Mapping[str, PlanWorkloadRecord], *,
              changed: Iterable[str] | None = None) -> dict[str, Any]:
    return {
        "generation": generation.generation if generation else 0,
        "ranking": generation.ranking if generation else None,
        "changed": sorted(changed) if changed is not None else
        (list(generation.changed) if generation else []),
        "workloads": [plan_workload_json(p) for _, p in sorted(plans.items())],
    }


def instance_json(i: InstanceRecord, notice: NoticedRecord | None = None) -> dict[str, Any]:
    """An instance; a noticed one with its reclaim `deadline` and when scoctl saw the notice."""
    return {"id": i.id, "name": i.name, "workload": i.workload, "pool": i.pool,
            "region": i.region, "generation": i.generation, "status": i.status,
            "disruption": i.disruption if i.status != "deleted" else None,
            "created": i.created, "spec_hash": i.spec_hash,
            **({"fault": i.fault} if i.fault else {}),
            **({"node": i.node_name} if i.node_name else {}),
            **({"deadline": notice.deadline, "noticed_at": notice.noticed_at}
               if notice is not None else {})}


def event_json(e: EventRecord) -> dict[str, Any]:
    return {"ts": e.ts, "workload": e.workload, "token": e.token, "level": e.level,
            "status": e.status, "detail": dict(e.detail)}


def latency_json(samples: Mapping[str, Sequence[LatencySample]]) -> dict[str, Any]:
    """p50 / p99 (seconds) of the latest placement latency samples, per metric."""
    from scoctl.core.latency import quantile

    out: dict[str, Any] = {}
    for metric, rows in samples.items():
        values = [x.seconds for x in rows]
        p50, p99 = quantile(values, 0.5), quantile(values, 0.99)
        out[metric] = {"samples": len(values),
                       "p50": round(p50, 3) if p50 is not None else None,
                       "p99": round(p99, 3) if p99 is not None else None}
    return out

