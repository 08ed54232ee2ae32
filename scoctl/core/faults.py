"""Launch faults (design: Acquirer, Reconciler), pure: quota or capacity, and what each one leads
to.

A create call Nova refused with 403, or servers that went ERROR before they ever ran, are judged
here — by acquire while it watches its new servers and by reconcile on a later pass — so both
record the same exclusion and the same event detail:

- quota (a 403 answer, or Nova's asynchronous quota recheck: fault 413 or "Quota exceeded"):
  ``QUOTA_EXCEEDED``; the pool stays eligible (the quota is busy, the pool is fine);
- capacity (NoValidHost, any other fault): ``POOL_EXCLUDED``; the pool goes on the negative
  cache until ``now + negative_cache`` and the workload is re-planned without it.

The event detail has one shape: ``pool``, ``launch``, ``servers`` (how many servers failed; 0 for
a refused call), ``fault``, ``region``, and ``until`` for an exclusion.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scoctl.core.model import ExclusionRecord, ServerInfo
from scoctl.core.timefmt import rfc3339
from scoctl.errors import QuotaExceeded

QUOTA_TOKEN = "QUOTA_EXCEEDED"
EXCLUDED_TOKEN = "POOL_EXCLUDED"


@dataclass(frozen=True)
class FaultVerdict:
    """What one fault leads to: the event to record, the exclusion (capacity only) and why
    the workload is re-planned."""

    quota: bool
    fault: str
    token: str
    detail: Mapping[str, Any]
    exclusion: ExclusionRecord | None
    replan: str


def fault_text(server: ServerInfo) -> str:
    """A server's fault as scoctl records it: ``<code>: <message>``."""
    message = (server.fault_message or "").strip() or "no fault message"
    return f"{server.fault_code}: {message}" if server.fault_code is not None else message


def is_quota_fault(server: ServerInfo) -> bool:
    """True when an ERROR server failed Nova's quota recheck (413 / "Quota exceeded")."""
    return server.fault_error() is QuotaExceeded


def judge_fault(*, workload: str | None, pool: str | None, region: str, fault: str,
                quota: bool, launch: str | None, servers: int, now: datetime,
                negative_cache: float) -> FaultVerdict:
    """The one rule: fault → exclusion (capacity) or quota (see the module docstring)."""
    detail: dict[str, Any] = {"pool": pool, "launch": launch, "servers": servers,
                              "fault": fault, "region": region}
    if quota:
        return FaultVerdict(quota=True, fault=fault, token=QUOTA_TOKEN, detail=detail,
                            exclusion=None, replan="launch failed on quota")
    until = rfc3339(now + timedelta(seconds=negative_cache))
    exclusion = None
    if pool:
        exclusion = ExclusionRecord(pool=pool, reason=f"capacity fault: {fault}", until=until,
                                    workloads=(workload,) if workload else ())
    return FaultVerdict(quota=False, fault=fault, token=EXCLUDED_TOKEN,
                        detail={**detail, "until": until}, exclusion=exclusion,
                        replan=f"pool {pool} excluded")


def merge_exclusions(exclusions: list[ExclusionRecord]) -> list[ExclusionRecord]:
    """One exclusion per pool (the first reason and deadline), with every workload it hit."""
    out: dict[str, ExclusionRecord] = {}
    for ex in exclusions:
        known = out.get(ex.pool)
        if known is None:
            out[ex.pool] = ex
        else:
            workloads = tuple(sorted({*known.workloads, *ex.workloads}))
            out[ex.pool] = ExclusionRecord(known.pool, known.reason, known.until, workloads)
    return [out[pool] for pool in sorted(out)]
