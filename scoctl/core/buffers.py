"""Capacity buffers (design: Buffers), pure: how many chunks a buffer wants, the claim that holds
them, and how many its workload's Ready units hold.

A buffer is part of its workload's claim (source `buffer`): the watch stage adds ``desired ×
chunk`` to the claim's requests and a part of its own, `<workload>/buffer`, beside the pods'
parts (`with_buffers`; a claim whose pods all may run in the same pools gets one part for them).
So the planner plans the buffer under the workload's own contract, caps and limits, as parts
share them, in the pools of the buffer's `tier` alone (`tier_refusal`: any of the pools the
workload's pods may use, or only those of that pool tier); the plan keeps its units (idle
scale-down, reason `empty`, only takes units above the plan), and a pod that lands on buffer
capacity grows the claim in the same pass (the buffer is topped up). The claim's pod count stays
the pods' own: it is what `percentage` is of. A tier that leaves the buffer no pool (with the
pods' own constraints) leaves every pool ruled out, each with why, so the planner plans it
nowhere and says so.

Desired chunks = min(max(replicas, ⌈percentage × pods⌉), limits) — stated so, since Cluster
Autoscaler's CapacityBuffer doc and code disagree — and 0 outside the buffer's window. A
window is as a disruption budget's (`scoctl.core.budgets`): from each cron firing, in the
buffer's time zone, for `duration`.

No clock and no I/O: `now` comes in, aware.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from scoctl.core.intake.common import ClaimDecision
from scoctl.core.model.buffers import Buffer, BufferTier
from scoctl.core.model.pools import ClaimPart, Pool, Tier
from scoctl.core.model.vocabulary import PartSource


@dataclass(frozen=True)
class BufferState:
    """One buffer as `status --json` shows it: chunks `desired` now and `held` by the
    workload's Ready units; `chunk` (canonical units) is None when it is not known yet (a
    buffer of the largest pod for a workload never seen with a pod)."""

    workload: str
    desired: int
    held: int
    chunk: Mapping[str, int] | None

    @property
    def short(self) -> bool:
        """Unmet: fewer chunks held than desired (`BUFFER_SHORT`)."""
        return self.held < self.desired


def in_window(buffer: Buffer, now: datetime) -> bool:
    """Whether `buffer` is wanted at `now`: always without a schedule; else when a firing F
    has F <= now < F + duration (in the buffer's time zone)."""
    if buffer.schedule is None:
        return True
    span = timedelta(seconds=buffer.duration or 0.0)
    first = buffer.schedule.next_after(now - span, ZoneInfo(buffer.time_zone))
    return first is not None and first <= now


def chunk_of(buffer: Buffer, largest_pod: Mapping[str, int]) -> dict[str, int] | None:
    """The buffer's chunk: its own, else the workload's largest pod (None when not known)."""
    if buffer.chunk is not None:
        return {k: v for k, v in buffer.chunk.items() if v}
    chunk = {k: v for k, v in largest_pod.items() if v}
    return chunk or None


def desired(buffer: Buffer, chunk: Mapping[str, int] | None, pods: int, now: datetime) -> int:
    """Chunks the buffer wants at `now` for a workload of `pods` pods (see the module)."""
    if chunk is None or not in_window(buffer, now):
        return 0
    # a percentage of a whole number, rounded up; Decimal-free but exact for sane inputs
    share = math.ceil(round(buffer.percentage * pods, 9) / 100) if buffer.percentage else 0
    count = max(buffer.replicas, share)
    if buffer.limits.units is not None:
        count = min(count, buffer.limits.units)
    for resource, most in buffer.limits.resources.items():
        size = chunk.get(resource, 0)
        if size:
            count = min(count, most // size)
    return max(0, count)


def tier_refusal(tier: BufferTier, pool: Pool) -> str | None:
    """Why a buffer of `tier` may not hold units of `pool` (a constraint, as the pods' are
    named), or None when it may: a buffer of tier any may use every pool, one of tier committed
    or reclaimable only the pools of that tier."""
    if tier == "any" or pool.tier == tier:
        return None
    return f"tier {tier} (the pool is {pool.tier})"


def buffer_part(buffer: Buffer, chunk: Mapping[str, int], count: int, claim: ClaimDecision,
                pools: Iterable[Pool]) -> ClaimPart:
    """The part of `claim` that is `buffer`'s `count` chunks: planned in the pools the
    workload's pods may use (the claim's `ineligible` holds for every part) that its tier
    allows (`tier_refusal`), ordered by the pods' soft terms."""
    ruled_out = {pool.name: why for pool in pools if pool.name not in claim.ineligible
                 and (why := tier_refusal(buffer.tier, pool)) is not None}
    return ClaimPart(requests={k: count * v for k, v in chunk.items()}, largest_pod=dict(chunk),
                     pods=count, ineligible=dict(sorted(ruled_out.items())),
                     preferred={p: n for p, n in claim.preferred.items() if p not in ruled_out},
                     source=PartSource.BUFFER)


def _pods_parts(claim: ClaimDecision) -> tuple[ClaimPart, ...]:
    """The claim's parts of its pods: its own, else one of all its pods (none without any)."""
    if claim.parts:
        return tuple(claim.parts)
    if not claim.requests:
        return ()
    return (ClaimPart(requests=dict(claim.requests), largest_pod=dict(claim.largest_pod),
                      pods=claim.pods, zone_spread=claim.zone_spread,
                      preferred=dict(claim.preferred)),)


def with_buffers(claims: Sequence[ClaimDecision], buffers: Iterable[Buffer],
                 bare: Mapping[str, ClaimDecision], stored_largest: Mapping[str, Mapping[str, int]],
                 now: datetime, pools: Sequence[Pool] = ()) -> tuple[ClaimDecision, ...]:
    """`claims` with each buffer's chunks added to its workload's claim: requests grow by
    desired × chunk, the largest pod covers the chunk, the pod count is unchanged, and the
    chunks are a part of their own after the pods' (`buffer_part`, over `pools`). A buffered
    workload without a claim this pass starts from `bare` (its empty claim). A chunk of the
    largest pod for a workload without pods now is the stored claim's largest pod, which a
    claim without pods keeps."""
    by_workload = {c.workload: c for c in claims}
    out = dict(by_workload)
    for buffer in buffers:
        claim = out.get(buffer.workload) or bare.get(buffer.workload)
        if claim is None:
            continue
        largest = claim.largest_pod or stored_largest.get(buffer.workload, {})
        chunk = chunk_of(buffer, largest)
        count = desired(buffer, chunk, claim.pods, now)
        if not count or chunk is None:
            if buffer.workload in by_workload:
                # outside its window at zero pods the claim keeps the largest pod it knew, so
                # a buffer of the largest pod still has its chunk when the window opens
                out[buffer.workload] = (replace(claim, largest_pod=dict(largest))
                                        if largest and not claim.largest_pod else claim)
            continue
        requests = dict(claim.requests)
        for resource, size in chunk.items():
            requests[resource] = requests.get(resource, 0) + count * size
        top = dict(claim.largest_pod)
        for resource, size in chunk.items():
            top[resource] = max(top.get(resource, 0), size)
        parts = (*_pods_parts(claim), buffer_part(buffer, chunk, count, claim, pools))
        out[buffer.workload] = replace(claim, requests=requests, largest_pod=top, parts=parts)
    order = [c.workload for c in claims] + sorted(set(out) - set(by_workload))
    return tuple(out[w] for w in order)


def held(chunk: Mapping[str, int] | None, want: int, claimed: Mapping[str, int],
         allocatable: Iterable[Mapping[str, int]],
         in_tier: Iterable[Mapping[str, int]] | None = None) -> int:
    """Chunks the workload's Ready units hold beyond its pods, at most `want`: by requests,
    the units' summed `allocatable` less the pods' part of the claim (`claimed`, the stored
    claim's requests, less the buffer's ``want × chunk``), in whole chunks, and never more
    than the units of the buffer's tier offer (`in_tier`, their allocatable; None: every unit
    is of its tier). Which unit a pod runs on is not known here: the pods are counted on the
    other tiers' units first."""
    if chunk is None or want <= 0:
        return 0
    total = _summed(allocatable)
    tier = total if in_tier is None else _summed(in_tier)
    count = want
    for resource, size in chunk.items():
        pods = max(0, claimed.get(resource, 0) - want * size)
        free = min(tier.get(resource, 0), max(0, total.get(resource, 0) - pods))
        count = min(count, free // size)
    return count


def _summed(allocatable: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for alloc in allocatable:
        for resource, amount in alloc.items():
            total[resource] = total.get(resource, 0) + amount
    return total


def buffer_states(buffers: Iterable[Buffer], claims: Mapping[str, tuple[int, Mapping[str, int],
                                                                         Mapping[str, int]]],
                  allocatable: Mapping[str, Sequence[tuple[Tier, Mapping[str, int]]]],
                  now: datetime) -> tuple[BufferState, ...]:
    """Each buffer's desired and held chunks, from the stored claims (workload → (pods,
    requests, largest pod)) and each workload's Ready units (their pool's tier and
    allocatable); a buffer of a tier is held by that tier's units alone."""
    out: list[BufferState] = []
    for buffer in buffers:
        pods, requests, largest = claims.get(buffer.workload, (0, {}, {}))
        chunk = chunk_of(buffer, largest)
        want = desired(buffer, chunk, pods, now)
        units = allocatable.get(buffer.workload, ())
        in_tier = (None if buffer.tier == "any"
                   else [alloc for tier, alloc in units if tier == buffer.tier])
        out.append(BufferState(buffer.workload, want,
                               held(chunk, want, requests, [a for _, a in units], in_tier),
                               chunk))
    return tuple(out)


def short(states: Iterable[BufferState], ages: Mapping[str, tuple[int, float]],
          reported: Iterable[str], grace: float) -> tuple[tuple[str, dict[str, object]], ...]:
    """The `BUFFER_SHORT` events to write: a buffer still unmet `grace` seconds (the launch
    timeout: time for its capacity to arrive) after its claim was last written (`ages`:
    workload → (claim version, seconds since)), once per claim write (`reported`: the
    workloads that already have one since it). Events as (workload, detail)."""
    done = set(reported)
    out: list[tuple[str, dict[str, object]]] = []
    for state in states:
        if not state.short or state.workload in done or state.workload not in ages:
            continue
        version, age = ages[state.workload]
        if age >= grace:
            out.append((state.workload, {"desired": state.desired, "held": state.held,
                                         "claim_version": version}))
    return tuple(out)
