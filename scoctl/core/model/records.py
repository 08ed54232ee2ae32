"""Typed rows of the state file, as the stages see them: workloads, their events and tokens (the
rows a hook writes), and disruption blocks. Claims and metric counters are in `ledger`, the
fleet's rows in `fleet`, the plans' in `plans`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WorkloadRecord:
    """A workload row: its identity, kind, source, contract and status."""

    id: int
    slug: str
    kind: str
    source: str
    contract: str
    status: str
    created: str
    updated: str
    last_token: str | None = None
    last_queued_reason: str | None = None
    job_id: str | None = None
    namespace: str | None = None


@dataclass(frozen=True)
class EventRecord:
    """An event row: what happened to a workload (its token, level and detail), when."""

    id: int
    ts: str
    workload: str | None
    token: str
    level: str
    status: str | None
    detail: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NewEvent:
    """One event a stage decided to append to the log. `workload_id` ties it to a workload
    row (None: logged against the slug only); `ts` is when it happened (RFC 3339, any offset;
    None: now)."""

    workload: str | None
    token: str
    level: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    status: str | None = None  # the workload's status the event records, if any
    workload_id: int | None = None
    ts: str | None = None


@dataclass(frozen=True)
class TokenRecord:
    """What one token changes in the state, as `core.tokens.decide_token` decided it.

    The event to append (against the row `workload_id`, or only the slug when None) and, when
    `update_row`, the row's new status, last token and last pending reason.
    """

    workload: str  # the slug
    token: str
    level: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    workload_id: int | None = None
    status: str | None = None  # the row's status after the token, as the event records it
    update_row: bool = False  # the row is active: it takes `status`, `token`, the reason
    last_queued_reason: str | None = None
    ts: str | None = None  # when it happened (RFC 3339); None: now


@dataclass(frozen=True)
class DisruptionBlock:
    """A (workload, reason) whose candidates a budget holds back (the `budget`-th of the
    workload's budgets), until time alone lifts it (`until`, RFC 3339; None: until a
    disruption ends). Stored so that DISRUPTION_BLOCKED is written once per change."""

    workload: str
    reason: str
    budget: int
    until: str | None = None
