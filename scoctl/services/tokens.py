"""Recording one workload token (design: Statuses): read the row it lands on, decide, save.

The decision is `core.tokens.decide_token` (pure); the `Store` only saves its `TokenRecord`.
Every stage that records tokens (watch, from the clusters and from the spool) comes here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scoctl.core.model import WorkloadRecord
from scoctl.core.tokens import TokenOutcome, decide_token
from scoctl.state import Store


def record_token(store: Store, slug: str, token: str, detail: Mapping[str, Any] | None = None,
                 *, create: tuple[str, str, str] | None = None,
                 ts: str | None = None) -> tuple[WorkloadRecord | None, TokenOutcome | None]:
    """Apply `token` to the workload `slug` and log it, in one transaction.

    The active row takes the token; with no active row the newest row does (where an inactive
    status is terminal). `create` = (kind, source, contract) makes a pending row first when the
    slug has none at all. Returns the row after the token and the outcome (None when no row
    exists: the event is still logged against the slug).
    """
    with store.transaction():
        row = store.active_workload(slug) or store.latest_workload(slug)
        if row is None and create is not None:
            kind, source, contract = create
            job_id = (detail or {}).get("job_id")
            row = store.ensure_workload(slug, kind=kind, source=source, contract=contract,
                                        job_id=str(job_id) if job_id else None)
        outcome, change = decide_token(row, slug, token, detail, ts=ts)
        if change is None:
            return row, outcome
        saved = store.save_token(change)
        return (saved if row is not None else None), outcome
