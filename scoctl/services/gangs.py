"""Gangs between passes (design: Gangs): what acquire and reconcile share.

The decisions are `core.gang` (pure: `gang_pass`, `may_launch_gang`); this block reads what
they need from the state (the gang claims, each gang's record, its members) and records what
they decided: the record, ``GANG_FAILED`` / ``GANG_PROVISIONED`` / ``GANG_UNSATISFIABLE``
(through the token vocabulary: only the last one fails the workload), the failing pools on the
negative cache (with, after a NoValidHost, the zone's pools of flavors no smaller:
`core.gang.zone_exclusions`) and the workload re-planned. Deleting the members is the caller's
act (through its cloud and token budget), after the record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from scoctl.core.gang import GangDecision, gang_needed, gang_retry_due, zone_exclusions
from scoctl.core.model import Flavor, GangRecord, Pool
from scoctl.core.model.gangs import GangPolicy
from scoctl.core.timefmt import rfc3339
from scoctl.services.tokens import record_token
from scoctl.state import Store

REPLAN_REASON = "gang failed"


@dataclass(frozen=True)
class GangClaim:
    """A workload's gang claim: members per gang and members needed in all."""

    workload: str
    size: int
    needed: int


def gang_claims(store: Store, workloads: Iterable[str] | None = None) -> dict[str, GangClaim]:
    """The gang claims that ask for something (of `workloads`, else all), by workload: one
    narrow query whichever (not a claim read per launching workload)."""
    wanted = None if workloads is None else set(workloads)
    return {w: GangClaim(w, size, gang_needed(pods, size))
            for w, (size, pods) in store.gang_claims().items()
            if wanted is None or w in wanted}


def record_of(records: Mapping[str, GangRecord], claim: GangClaim) -> GangRecord:
    """The gang's stored record, its size following the claim (a fresh record if none). A
    provisioned gang whose claim changed by other than whole gangs (a pod group seen growing)
    is a new gang: its members are held to the deadline again, never topped up."""
    stored = records.get(claim.workload)
    if stored is None:
        return GangRecord(claim.workload, claim.needed)
    if stored.provisioned_at is not None and (claim.needed - stored.size) % claim.size:
        return GangRecord(stored.workload, claim.needed, failures=stored.failures,
                          failed_at=stored.failed_at)
    if stored.size != claim.needed:
        return GangRecord(stored.workload, claim.needed, stored.launched_at, stored.failures,
                          stored.failed_at, stored.provisioned_at, stored.relocate)
    return stored


def record_gang(store: Store, decision: GangDecision, *, now: float, negative_cache: float,
                pools: Sequence[Pool] = (), flavors: Mapping[str, Flavor] | None = None) -> None:
    """Save what `core.gang.gang_pass` decided (the caller deletes `decision.delete` next, and
    holds the transaction and fence it records under). `pools` and `flavors` (the config's)
    widen a NoValidHost to its zone (`core.gang.zone_exclusions`)."""
    workload = decision.record.workload
    with store.transaction():
        store.save_gangs([workload], [decision.record])
        until = rfc3339(datetime.fromtimestamp(now + negative_cache, UTC))
        reasons = {str(e.detail.get("pool")): str(e.detail.get("reason", ""))
                   for e in decision.events if e.token == "GANG_FAILED"}
        for pool in decision.exclude:
            store.exclude(pool, f"GANG_FAILED: {reasons.get(pool, 'gang failed')}", until)
        for pool, reason in zone_exclusions(decision, pools, flavors or {}).items():
            store.exclude(pool, f"GANG_FAILED: {reason}", until)
        for event in decision.events:
            record_token(store, workload, event.token, dict(event.detail))
        if decision.exclude or decision.workload_failed:
            store.mark_dirty({workload}, REPLAN_REASON)


def forget_gangs(store: Store, keep: Iterable[str]) -> None:
    """Drop the records of gangs whose workload no longer has a gang claim."""
    kept = set(keep)
    gone = [w for w in store.gangs() if w not in kept]
    if gone:
        store.save_gangs(gone, [])


def retry_due(store: Store, policy: GangPolicy, now: float) -> bool:
    """Some failed gang's back-off has ended and its claim still asks for it (the gang
    records are few: each one's claim is read, never all the claims)."""
    for name, record in store.gangs().items():
        if gang_retry_due(record, policy, now):
            claim = store.claim(name)
            if claim is not None and claim.gang > 0 and claim.requests:
                return True
    return False
