"""State records as the JSON objects of design: Schemas (shared by status, plan and events)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scoctl.core.model import (
    ClaimPart,
    ClaimRecord,
    EventRecord,
    InstanceRecord,
    LatencySample,
    NoticedRecord,
    PlanGeneration,
    PlanWorkloadRecord,
    WorkloadRecord,
)
from scoctl.core.model.pools import part_name
from scoctl.core.model.vocabulary import InstanceStatus, PartSource, WorkloadStatus
from scoctl.core.quantity import to_json_resources
from scoctl.core.timefmt import rfc3339
from scoctl.core.tokens import PLACEMENT_TOKENS

if TYPE_CHECKING:
    from scoctl.core.disruption import ReasonStatus
    from scoctl.core.model.disruption import Budget
    from scoctl.core.model.records import DisruptionBlock


def workload_json(w: WorkloadRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"slug": w.slug, "kind": w.kind, "source": w.source,
                           "contract": w.contract, "status": w.status}
    if w.job_id:
        out["job_id"] = w.job_id
    if w.status == WorkloadStatus.QUEUED and w.last_token in PLACEMENT_TOKENS:
        out["reason"] = f"{w.last_token}: {w.last_queued_reason or ''}".rstrip(": ")
    return out


def claim_json(c: ClaimRecord) -> dict[str, Any]:
    out: dict[str, Any] = {"workload": c.workload, "version": c.version, "pods": c.pods,
                           "requests": to_json_resources(c.requests),
                           "largest_pod": to_json_resources(c.largest_pod),
                           "contract": c.contract, "source": c.source}
    if c.nodes:
        out["nodes"] = list(c.nodes)
    if c.parts:
        out["parts"] = [part_json(c.workload, n, part) for n, part in enumerate(c.parts, 1)]
    return out


def part_json(workload: str, n: int, part: ClaimPart) -> dict[str, Any]:
    """A claim's `n`th part (design: Buffers, Constraints): named as plans name it, with its source
    (``pods``, or ``buffer`` with its chunks) and demand."""
    size = "chunks" if part.source == PartSource.BUFFER else "pods"
    return {"part": part_name(workload, n, part), "source": str(part.source), size: part.pods,
            "requests": to_json_resources(part.requests),
            "largest_pod": to_json_resources(part.largest_pod)}


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
            "disruption": i.disruption if i.status != InstanceStatus.DELETED else None,
            "created": i.created, "spec_hash": i.spec_hash,
            **({"fault": i.fault} if i.fault else {}),
            **({"unhealthy_since": i.unhealthy_since} if i.unhealthy_since else {}),
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



def budget_json(b: Budget) -> dict[str, Any]:
    """One `disruption.budgets[]` entry as the config gives it (design: Disruption)."""
    out: dict[str, Any] = {"units": str(b.units),
                           "reasons": sorted(r.value for r in b.reasons)}
    if b.schedule is not None:
        out.update(schedule=b.schedule.text, duration=b.duration, time_zone=b.time_zone)
    if b.rate is not None:
        out["rate"] = {"units": str(b.rate.units), "per": b.rate.per}
    return out


def reason_status_json(r: ReasonStatus) -> dict[str, Any]:
    """`status --json`'s ``disruption`` entry: what the budgets allow one
    workload for one reason now, the open window's end and the next window's start, and
    what holds it when nothing may start (`held`: the budget's index, what of it, until)."""
    held = r.held
    return {"workload": r.workload, "reason": r.reason.value, "allowed": r.allowed,
            "in_flight": r.in_flight,
            "next_window": rfc3339(r.next_window) if r.next_window else None,
            "window_end": rfc3339(r.window_end) if r.window_end else None,
            "held": None if held is None or held.budget is None else {
                "budget": held.index, "by": str(held.by) if held.by else None,
                "limit": budget_json(held.budget),
                "until": rfc3339(held.until) if held.until else None,
                "text": r.held_text()}}


def budget_waits_json(statuses: Iterable[ReasonStatus], blocks: Iterable[DisruptionBlock],
                      budgets: Sequence[Budget]) -> list[dict[str, Any]]:
    """`plan --explain`'s disruption view (design: Disruption), per reason of `statuses`: how many
    are
    in flight and may start now (`allowed`; None: no limit), when the window of a scheduled
    budget counting it that is open now closes (`window_end`) and when the next one opens
    (`next_window`), and what waits on which budget — the budget the
    last reconcile found holding that reason's candidates back (`budget`: its index in the
    workload's budgets, and `limit`: that budget) and until when (`until`; None: until a
    disruption in flight ends), from the stored `blocks`."""
    held = {b.reason: b for b in blocks}
    out: list[dict[str, Any]] = []
    for r in statuses:
        block = held.get(r.reason.value)
        entry: dict[str, Any] = {
            "reason": r.reason.value, "in_flight": r.in_flight, "allowed": r.allowed,
            "next_window": rfc3339(r.next_window) if r.next_window else None,
            "window_end": rfc3339(r.window_end) if r.window_end else None,
            "waiting": block is not None,
            "budget": block.budget if block is not None else None,
            "until": block.until if block is not None else None}
        if block is not None and 0 <= block.budget < len(budgets):
            entry["limit"] = budget_json(budgets[block.budget])
        out.append(entry)
    return out
