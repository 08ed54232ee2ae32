"""Recording a workload's claim (design: Words): read the stored claim, decide, save.

The decision is `core.claims.claim_write` (pure): a new version only when the normalised
demand changed (the claim delta that wakes the planner); the `Store` only saves it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from scoctl.core.claims import ObservedClaim, claim_write
from scoctl.core.model import ClaimPart, ClaimRecord
from scoctl.state import Store


def record_claim(store: Store, workload: str, *, contract: str, requests: Mapping[str, int],
                 largest_pod: Mapping[str, int], pods: int, source: str,
                 tolerates_reclaimable: bool = True,
                 nodes: Sequence[str] = (),
                 ineligible: Mapping[str, str] | None = None,
                 zone_spread: int = 0,
                 overhead: Mapping[str, Mapping[str, int]] | None = None,
                 parts: Sequence[ClaimPart] = (),
                 preferred: Mapping[str, int] | None = None,
                 gang: int = 0,
                 ) -> tuple[ClaimRecord, bool]:
    """Record the observed claim of `workload`; returns the stored claim and whether it is a
    new version (a claim delta). One transaction."""
    observed = ObservedClaim(workload, contract, dict(requests), dict(largest_pod), pods,
                             source, tolerates_reclaimable, tuple(nodes), dict(ineligible or {}),
                             zone_spread, dict(overhead or {}), tuple(parts),
                             dict(preferred or {}), gang)
    with store.transaction():
        stored = store.claim(workload)
        write = claim_write(stored, observed)
        if write is None:
            assert stored is not None
            return stored, False
        return store.save_claim(write), write.delta
