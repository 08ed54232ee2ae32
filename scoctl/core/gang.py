"""Gangs: all-or-nothing for multi-node work (design: Gangs), as pure decisions over values.

A gang is work that is useless until every member runs: a Slurm job needing more than one node,
Kubernetes pods sharing ``scheduling.x-k8s.io/pod-group``, or a claims file's ``gang: {size}``.

- `slurm_gang_size`, `pod_group_size`: how big a gang a source asks for; `pod_group_of`: the
  pod group a pod belongs to.
- `plan_gang`: N members per gang, each on its own node, every gang inside one placement
  bucket (a correlation group by default), in at most `max_pools` pools; the pool cap and
  `min_pools` count gangs, not members.
- `pack_gang`: how a Kubernetes gang's pods map to units — packed by their requests, one per
  node only where the pods ask for it (a Slurm job's member is a node).
- `gang_launch_count`: all members in one pass, or none (never more than N servers).
- `gang_step`: after a pass, whether the gang is provisioned, still booting, or failed — and
  then every member is deleted, the failing pools are excluded and the retry waits
  `gang_backoff`; after `retries` failures the gang is unsatisfiable and the workload failed.
  A NoValidHost (`no_valid_host`) says the zone cannot take that many of that size:
  `zone_exclusions` excludes the zone's pools of flavors no smaller too, and the retry,
  elsewhere, waits for no back-off.
- `gang_booked`: a Ready gang is not idle-scaled down before its booking ends.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from scoctl.core.model import (
    Claim,
    Contract,
    Flavor,
    GangRecord,
    InstanceRecord,
    Pool,
    flavor_allocatable,
)
from scoctl.core.model.gangs import (  # the policy is defined there; named here too
    BACKOFF_BASE,
    BACKOFF_CAP,
    GangPolicy,
    Placement,
)
from scoctl.core.model.gangs import DEFAULT_GANG_POLICY as DEFAULT_GANG_POLICY
from scoctl.core.model.gangs import PLACEMENTS as PLACEMENTS
from scoctl.core.model.pools import DEFAULT_DEPTH_PREMIUM
from scoctl.core.model.vocabulary import InstanceStatus
from scoctl.core.planner import ExplainLine, PoolPlan, WorkloadPlan, pool_key

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GANG_SIZE_ANNOTATION = "sco/gang-size"
GANG_FAILED = "GANG_FAILED"
GANG_PROVISIONED = "GANG_PROVISIONED"
GANG_UNSATISFIABLE = "GANG_UNSATISFIABLE"

_MAX_COMBINATIONS = 20_000


# --------------------------------------------------------------------------- sources


@dataclass(frozen=True)
class Packing:
    """How one gang of pods maps to units: `units` per gang, each holding `pods` of them."""

    units: int
    pods: int


def pack_gang(size: int, largest_pod: Mapping[str, int],
              allocatable: Iterable[Mapping[str, int]], *, one_per_node: bool) -> Packing:
    """A Kubernetes gang of `size` pods packed by their requests (design: Gangs): the most pods
    of `largest_pod` that one unit of the best of the eligible flavors (`allocatable`: each
    one's, DaemonSet overhead taken off) holds, at most `size`; then as few units as hold the
    gang, its pods dealt evenly (4 pods that fit 3 to a unit: 2 units of 2). One pod per unit
    where the pods ask for one per node (`one_per_node`), or no flavor is known."""
    most = 1
    if not one_per_node:
        for alloc in allocatable:
            fit = min((alloc.get(name, 0) // amount for name, amount in largest_pod.items()
                       if amount > 0), default=1)
            most = max(most, min(size, fit))
    units = math.ceil(size / most)
    return Packing(units, math.ceil(size / units))


def slurm_gang_size(num_nodes: int) -> int:
    """The gang a Slurm job is: its node count when it needs more than one node, else 0."""
    return num_nodes if num_nodes > 1 else 0


def pod_group_of(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str | None:
    """The pod group a pod belongs to: its ``scheduling.x-k8s.io/pod-group`` label, else that
    annotation (None: no gang)."""
    return labels.get(POD_GROUP_LABEL) or annotations.get(POD_GROUP_LABEL) or None


def pod_group_size(annotations: Sequence[str | None], min_member: int | None,
                   pods_seen: int) -> tuple[int, str | None]:
    """The size of a pod group (design: Gangs) and a problem, if any.

    `annotations`: each seen pod's ``sco/gang-size`` (None where absent); the size is that
    annotation, else the PodGroup's ``spec.minMember`` where the API is served (`min_member`),
    else the pods seen. Pods disagreeing, or an annotation that is not a whole number of at
    least 1, is a problem named in the second value (the pods seen stand in for the size).
    """
    given = sorted({a.strip() for a in annotations if a is not None})
    if len(given) > 1:
        return pods_seen, f"pods disagree on {GANG_SIZE_ANNOTATION}: {', '.join(given)}"
    if given:
        text = given[0]
        if not text.isdigit() or int(text) < 1:
            return pods_seen, f"{GANG_SIZE_ANNOTATION} {text!r} is not a whole number of at least 1"
        return int(text), None
    if min_member is not None and min_member >= 1:
        return min_member, None
    return pods_seen, None


# --------------------------------------------------------------------------- planning


def _bucket(pool: Pool, placement: Placement) -> str:
    if placement == "same_group":
        return pool.group
    if placement == "same_az":
        return f"{pool.region}/{pool.az}"
    return ""


def _holds(flavor: Flavor, largest_pod: Mapping[str, int]) -> bool:
    alloc = flavor_allocatable(flavor)
    return all(alloc.get(name, 0) >= amount for name, amount in largest_pod.items() if amount > 0)


@dataclass(frozen=True)
class _Candidate:
    pool: Pool
    score: float
    key: float
    depth: int  # members it can hold: current units plus depth left


def _candidates(claim: Claim, pools: Sequence[Pool], flavors: Mapping[str, Flavor],
                scores: Mapping[str, float], current: Mapping[str, int],
                depth_left: Mapping[str, int], excluded: Collection[str],
                depth_premium: float) -> tuple[list[_Candidate], list[str]]:
    eligible: list[tuple[Pool, int]] = []
    reasons: list[str] = []
    for pool in pools:
        flavor = flavors.get(pool.flavor)
        if pool.name not in scores or pool.name in excluded or flavor is None:
            continue
        if pool.tier == "reclaimable" and not claim.tolerates_reclaimable:
            continue
        if pool.name in claim.ineligible or not _holds(flavor, claim.largest_pod):
            continue
        depth = current.get(pool.name, 0) + max(0, depth_left.get(pool.name, pool.depth))
        if depth > 0:
            eligible.append((pool, depth))
    if not eligible:
        reasons.append("no eligible pool holds a gang member")
    deepest = max((d for _, d in eligible), default=0)
    out = [_Candidate(p, scores[p.name], pool_key(scores[p.name], d, deepest, depth_premium), d)
           for p, d in eligible]
    out.sort(key=lambda c: (-c.key, c.pool.name))
    return out, reasons


def _place_one(size: int, bucket: Sequence[_Candidate], left: Mapping[str, int],
               gangs_in: Mapping[str, int], per_pool_gangs: int, max_pools: int,
               fresh_first: bool) -> dict[str, int] | None:
    """One gang's members over at most `max_pools` pools of one bucket, best key first (pools
    holding no gang yet first while fewer than `min_pools` do): the fewest pools that hold it,
    then the best-keyed such set; None when it cannot fit."""
    usable = [c for c in bucket if left[c.pool.name] > 0
              and gangs_in.get(c.pool.name, 0) < per_pool_gangs]
    if fresh_first:
        usable.sort(key=lambda c: gangs_in.get(c.pool.name, 0) > 0)  # stable: keys kept
    for k in range(1, max_pools + 1):
        if math.comb(len(usable), k) > _MAX_COMBINATIONS:  # too many: the deepest pools
            chosen = sorted(usable, key=lambda c: -left[c.pool.name])[:k]
            combos: Iterable[tuple[_Candidate, ...]] = [tuple(chosen)]
        else:
            combos = itertools.combinations(usable, k)  # best keys first
        for combo in combos:
            if sum(left[c.pool.name] for c in combo) >= size:
                taken: dict[str, int] = {}
                need = size
                for cand in combo:
                    n = min(need, left[cand.pool.name])
                    if n:
                        taken[cand.pool.name] = n
                    need -= n
                return taken
    return None


def plan_gang(
    claim: Claim,
    contract: Contract,
    size: int,
    policy: GangPolicy,
    pools: Sequence[Pool],
    flavors: Mapping[str, Flavor],
    scores: Mapping[str, float],
    current: Mapping[str, int] | None = None,
    depth_left: Mapping[str, int] | None = None,
    excluded: Collection[str] = frozenset(),
    depth_premium: float = DEFAULT_DEPTH_PREMIUM,
    explain: bool = False,
) -> WorkloadPlan:
    """Plan a gang claim (design: Gangs): ``claim.pods // size`` gangs (at least one) of `size`
    members, one member per unit, each gang inside one placement bucket in at most
    `policy.max_pools` pools.

    No pool holds members of more than ⌈pool_cap × gangs⌉ gangs, and while fewer than
    `min_pools` pools hold a gang, pools holding none come first. Buckets are tried best pool
    key first (ties by name). Units the workload holds (`current`) are kept when they already
    form the whole plan in eligible pools. A gang that fits no bucket makes the plan
    infeasible: a partial gang is never planned. With `explain`, the plan says why each pool
    holds what it holds (`gang_explain`).
    """
    if size < 1:
        raise ValueError("a gang has at least one member")
    plan = _plan_gang(claim, contract, size, policy, pools, flavors, scores, dict(current or {}),
                      dict(depth_left or {}), excluded, depth_premium)
    if not explain:
        return plan
    return replace(plan, explain=gang_explain(claim, size, policy, pools, flavors, scores,
                                              excluded, plan))


def _plan_gang(claim: Claim, contract: Contract, size: int, policy: GangPolicy,
               pools: Sequence[Pool], flavors: Mapping[str, Flavor],
               scores: Mapping[str, float], current: dict[str, int],
               depth_left: dict[str, int], excluded: Collection[str],
               depth_premium: float) -> WorkloadPlan:
    gangs = max(1, claim.pods // size)
    needed = gangs * size
    cands, reasons = _candidates(claim, pools, flavors, scores, current, depth_left, excluded,
                                 depth_premium)
    by_name = {c.pool.name: c for c in cands}
    kept = {p: n for p, n in current.items() if n > 0}
    if kept and sum(kept.values()) == needed and all(p in by_name for p in kept) \
            and len({_bucket(by_name[p].pool, policy.placement) for p in kept}) == 1 \
            and len(kept) <= policy.max_pools * gangs:
        return _gang_plan(claim, contract, kept, by_name, needed, True, ())
    buckets: dict[str, list[_Candidate]] = {}
    for cand in cands:
        buckets.setdefault(_bucket(cand.pool, policy.placement), []).append(cand)
    order = sorted(buckets, key=lambda b: (-buckets[b][0].key, b))
    per_pool_gangs = max(1, math.ceil(contract.pool_cap * gangs - 1e-9))
    left = {c.pool.name: c.depth for c in cands}
    gangs_in: dict[str, int] = {}
    units: dict[str, int] = {}
    for _ in range(gangs):
        fresh_first = len(gangs_in) < contract.min_pools
        for name in order:
            taken = _place_one(size, buckets[name], left, gangs_in, per_pool_gangs,
                               policy.max_pools, fresh_first)
            if taken is not None:
                break
        else:
            placed = sum(units.values()) // size
            reasons.append(f"gang: {placed} of {gangs} gangs of {size} fit in one "
                           f"{policy.placement.replace('_', ' ')} within {policy.max_pools} "
                           "pools")
            return _gang_plan(claim, contract, units, by_name, needed, False, reasons)
        for pool, n in taken.items():
            left[pool] -= n
            gangs_in[pool] = gangs_in.get(pool, 0) + 1
            units[pool] = units.get(pool, 0) + n
    return _gang_plan(claim, contract, units, by_name, needed, True, ())


def _gang_plan(claim: Claim, contract: Contract, units: Mapping[str, int],
               by_name: Mapping[str, _Candidate], needed: int, feasible: bool,
               reasons: Sequence[str]) -> WorkloadPlan:
    rows = []
    for name in sorted(units, key=lambda p: (-by_name[p].key, p)):
        cand = by_name[name]
        share = units[name] / needed
        rows.append(PoolPlan(name, cand.pool.tier, cand.pool.group, units[name], share,
                             cand.score, cand.key, share))
    total = sum(units.values()) / needed
    committed = sum(r.coverage for r in rows if r.tier == "committed")
    return WorkloadPlan(claim.workload, contract.name, feasible, False, tuple(reasons),
                        tuple(rows), total, committed, 0.0)


def _why_not(claim: Claim, pool: Pool, flavors: Mapping[str, Flavor],
             scores: Mapping[str, float], excluded: Collection[str]) -> str | None:
    """Why `pool` cannot hold a member of the gang (None: it can)."""
    flavor = flavors.get(pool.flavor)
    if pool.name in excluded:
        return "excluded"
    if pool.name not in scores:
        return "not ranked (no score in the ranking)"
    if pool.tier == "reclaimable" and not claim.tolerates_reclaimable:
        return "reclaimable, and the workload's pods do not tolerate the reclaimable taint"
    if pool.name in claim.ineligible:
        return f"the pods' {claim.ineligible[pool.name]} rules it out"
    if flavor is None or not _holds(flavor, claim.largest_pod):
        return f"flavor {pool.flavor} cannot hold a member (its largest pod)"
    return None


def gang_explain(claim: Claim, size: int, policy: GangPolicy, pools: Sequence[Pool],
                 flavors: Mapping[str, Flavor], scores: Mapping[str, float],
                 excluded: Collection[str], plan: WorkloadPlan) -> tuple[ExplainLine, ...]:
    """Why each pool holds what it holds in a gang's plan (`plan --explain`): the pools that
    cannot hold a member and why (excluded, unranked, untolerated, ruled out, too small), the
    placement buckets (groups by default) ranked above the chosen one that could not hold a
    whole gang, the chosen one, and those a better-ranked bucket made unneeded."""
    units = plan.units()
    where = {"same_group": "group", "same_az": "zone"}.get(policy.placement, "region")
    by_bucket: dict[str, list[Pool]] = {}
    lines: list[ExplainLine] = []
    for pool in pools:
        why = _why_not(claim, pool, flavors, scores, excluded)
        if why is not None and pool.name not in units:
            lines.append(ExplainLine(pool.name, 0, why))
        else:
            by_bucket.setdefault(_bucket(pool, policy.placement), []).append(pool)
    chosen = {b for b, members in by_bucket.items() if any(p.name in units for p in members)}
    best = {b: max(scores.get(p.name, 0.0) for p in members) for b, members in by_bucket.items()}
    bar = min((best[b] for b in chosen), default=-1.0)
    for bucket, members in sorted(by_bucket.items()):
        label = f"{where} {bucket}" if bucket else "the region"
        for pool in members:
            n = units.get(pool.name, 0)
            if n:
                text = (f"{n} member(s): {label} is the best-ranked {where} that holds a whole "
                        f"gang of {size} within {policy.max_pools} pools")
            elif bucket in chosen:
                text = f"not needed: better-ranked pools of {label} hold the gang"
            elif not plan.feasible or best[bucket] >= bar:
                text = (f"{label} cannot hold a whole gang of {size} within "
                        f"{policy.max_pools} pools (depth, pool cap, exclusions)")
            else:
                text = f"not needed: a better-ranked {where} holds the gang"
            lines.append(ExplainLine(pool.name, n, text))
    return tuple(lines)


# --------------------------------------------------------------------------- launch


def gang_launch_count(live: int, size: int, headroom: int) -> int:
    """How many members to create this pass: all that are missing (``size - live``) when the
    quota headroom takes them all, else none — a partial gang is never launched, and never
    more than `size` servers of a gang exist."""
    missing = max(0, size - live)
    return missing if missing <= headroom else 0


def gang_backoff(failures: int, base: float = BACKOFF_BASE) -> float:
    """Seconds before a gang that failed `failures` times is launched again: `base` (60 s)
    · 2ⁿ for the n-th retry (n from 0), at most 30 min."""
    if failures <= 0:
        return 0.0
    return min(base * float(2 ** min(failures - 1, 10)), BACKOFF_CAP)


@dataclass(frozen=True)
class Member:
    """One member of a gang as the reconciler sees it: its instance's status, or a create
    that failed (`created` False: no server, `server` is the launch id)."""

    server: str  # server id, or the launch id of a create that failed
    pool: str
    state: InstanceStatus
    reason: str = ""  # the fault, for an ERROR member or a failed create
    created: bool = True

    @property
    def failed(self) -> bool:
        return not self.created or self.state == InstanceStatus.ERROR


@dataclass(frozen=True)
class GangEvent:
    token: str
    detail: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class GangDecision:
    """What to do with a gang this pass."""

    record: GangRecord  # to save
    delete: tuple[str, ...] = ()  # every member's server, on failure
    exclude: tuple[str, ...] = ()  # the failing pools
    events: tuple[GangEvent, ...] = ()
    may_launch: bool = False  # the acquirer may create the missing members now
    workload_failed: bool = False
    # the failing pools Nova found no valid host in, with the members asked of each
    no_host: tuple[tuple[str, int], ...] = ()


def no_valid_host(fault: str) -> bool:
    """Whether a fault is Nova's NoValidHost ("No valid host was found. ..."): the scheduling
    scope (the zone) cannot take the servers asked for, not that one pool failed."""
    text = fault.lower()
    return "no valid host" in text or "novalidhost" in text


def gang_step(record: GangRecord, members: Sequence[Member], policy: GangPolicy,
              now: float) -> GangDecision:
    """The gang's next step (design: Gangs), a pure function of what is stored and seen.

    - Any member whose create failed or that went ERROR, or members not all Ready
      `policy.deadline` after the launch: every member is deleted, ``GANG_FAILED {pool,
      reason}`` per failing pool, those pools excluded; the failure count grows, and past
      `policy.retries` the gang is ``GANG_UNSATISFIABLE`` and the workload failed.
    - All `size` members Ready: ``GANG_PROVISIONED`` once.
    - No member: a launch is allowed once the back-off after the last failure has passed —
      at once when that failure was NoValidHost in every failing pool (`relocate`: its zone
      is excluded, so the retry goes elsewhere; the failure still counts toward `retries`).
    """
    servers = tuple(sorted(m.server for m in members if m.created))
    failing = [m for m in members if m.failed]
    ready = [m for m in members if m.created and m.state == InstanceStatus.READY]
    if not failing and len(ready) >= record.size and members:
        if record.provisioned_at is not None:
            return GangDecision(record)
        done = GangRecord(record.workload, record.size, record.launched_at, record.failures,
                          record.failed_at, now)
        pools = sorted({m.pool for m in members})
        return GangDecision(done, events=(GangEvent(GANG_PROVISIONED, {
            "members": len(members), "pools": pools}),))
    late = bool(not failing and members and record.launched_at is not None
                and now - record.launched_at >= policy.deadline)
    if failing or late:
        if failing:
            by_pool: dict[str, str] = {}
            for m in sorted(failing, key=lambda m: (m.pool, m.server)):
                by_pool.setdefault(m.pool, m.reason or (
                    "create failed" if not m.created else str(m.state)))
        else:
            by_pool = {m.pool: f"not Ready within {policy.deadline:g}s"
                       for m in sorted(members, key=lambda m: m.pool)
                       if m.state != InstanceStatus.READY}
        failures = record.failures + 1
        events = [GangEvent(GANG_FAILED, {"pool": p, "reason": r, "attempt": failures})
                  for p, r in sorted(by_pool.items())]
        gave_up = failures > policy.retries
        if gave_up:
            events.append(GangEvent(GANG_UNSATISFIABLE, {"failures": failures,
                                                         "pools": sorted(by_pool)}))
        no_host = _no_host(failing)
        relocate = bool(no_host) and {p for p, _ in no_host} == set(by_pool)
        return GangDecision(
            GangRecord(record.workload, record.size, None, failures, now, None, relocate),
            delete=servers, exclude=tuple(sorted(by_pool)), events=tuple(events),
            workload_failed=gave_up, no_host=no_host)
    if not members:
        if record.failures > policy.retries:
            return GangDecision(record)
        wait = 0.0 if record.relocate else gang_backoff(record.failures, policy.backoff)
        ready_to_go = record.failed_at is None or now - record.failed_at >= wait
        return GangDecision(record, may_launch=ready_to_go)
    return GangDecision(record)  # booting, within the deadline


def _no_host(failing: Sequence[Member]) -> tuple[tuple[str, int], ...]:
    """The failing pools whose members failed with NoValidHost, each with its members."""
    counts: dict[str, int] = {}
    for m in failing:
        if no_valid_host(m.reason):
            counts[m.pool] = counts.get(m.pool, 0) + 1
    return tuple(sorted(counts.items()))


def zone_exclusions(decision: GangDecision, pools: Sequence[Pool],
                    flavors: Mapping[str, Flavor]) -> dict[str, str]:
    """The pools a gang's NoValidHost excludes besides the failing pool (pool → reason).

    Nova's NoValidHost for a multi-create of n servers of a flavor says the scheduling scope
    (the zone) cannot take n of that size: every other pool of that region and zone whose
    flavor is no smaller (vCPUs and RAM both at least as large) cannot hold the gang either,
    whichever correlation group it is in; a smaller flavor may still fit."""
    by_name = {p.name: p for p in pools}
    out: dict[str, str] = {}
    for name, count in decision.no_host:
        failed = by_name.get(name)
        size = flavors.get(failed.flavor) if failed is not None else None
        if failed is None or size is None:
            continue
        for pool in pools:
            other = flavors.get(pool.flavor)
            if pool.name == name or pool.name in out or other is None \
                    or (pool.region, pool.az) != (failed.region, failed.az) \
                    or other.vcpus < size.vcpus or other.ram < size.ram:
                continue
            out[pool.name] = (f"zone {failed.az} cannot hold {count} × {size.name} "
                              f"(NoValidHost in {name})")
    return out


BOOTED = frozenset({InstanceStatus.ACTIVE, InstanceStatus.READY})


def report_up(members: Sequence[Member], size: int) -> tuple[str, ...]:
    """Slurm (design: Gangs): the members whose nodes are reported up to slurmctld (their
    NodeAddr / NodeHostname): every member once all of them have booted (ACTIVE or Ready)
    and they make whole gangs of `size`; none while one is still being created, has failed,
    or the gang is short — so slurmctld never reaches part of a gang."""
    if size <= 0 or not members or len(members) % size:
        return ()
    if not all(m.created and m.state in BOOTED for m in members):
        return ()
    return tuple(sorted(m.server for m in members))


def gang_launched(record: GangRecord, now: float) -> GangRecord:
    """The record after the acquirer created the gang's members at `now` (the deadline runs
    from here)."""
    return GangRecord(record.workload, record.size, now, record.failures, record.failed_at, None)


def gang_booked(record: GangRecord, policy: GangPolicy, now: float) -> bool:
    """A provisioned gang is kept, idle or not, until `policy.booking` after it was Ready."""
    return record.provisioned_at is not None and now - record.provisioned_at < policy.booking


# --------------------------------------------------------------------------- the loop's view


MEMBER_STATES = frozenset({InstanceStatus.REQUESTED, InstanceStatus.BUILDING,
                           InstanceStatus.ACTIVE, InstanceStatus.READY, InstanceStatus.ERROR})


def gang_needed(pods: int, size: int) -> int:
    """The members a gang claim needs: ``pods // size`` gangs (at least one) of `size`."""
    return max(1, pods // size) * size if size > 0 else 0


def members_of(instances: Iterable[InstanceRecord], workload: str) -> tuple[Member, ...]:
    """The workload's gang members: its instances that are live or in ERROR (a unit being
    drained or deleted is no longer a member), by server id."""
    return tuple(Member(i.id, i.pool or "", i.status, i.fault or "")
                 for i in sorted(instances, key=lambda i: i.id)
                 if i.workload == workload and i.status in MEMBER_STATES)


def gang_pass(record: GangRecord, members: Sequence[Member], policy: GangPolicy,
              now: float) -> GangDecision:
    """`gang_step` as the loop runs it each pass.

    Members seen with no launch recorded (adopted after a crash) start the deadline now. A
    provisioned gang is left alone while no member failed (its units may be draining for a
    scale-down or a disruption: that is no gang failure), and once no member is left it is a
    fresh gang again (the next launch waits for no back-off); a member that fails after
    provisioning fails the whole gang.
    """
    if members and record.launched_at is None and record.provisioned_at is None:
        record = gang_launched(record, now)
    if record.provisioned_at is not None and not any(m.failed for m in members):
        if not members:
            fresh = GangRecord(record.workload, record.size, failures=record.failures,
                               failed_at=record.failed_at)
            return replace(gang_step(fresh, (), policy, now), record=fresh)
        ready = [m for m in members if m.state == InstanceStatus.READY]
        if len(ready) >= record.size and len(ready) == len(members):
            return gang_step(record, members, policy, now)
        return GangDecision(record)
    return gang_step(record, members, policy, now)


def may_launch_gang(decision: GangDecision, record: GangRecord, members: Sequence[Member],
                    missing: int, size: int) -> bool:
    """Whether the acquirer may create `missing` members of a gang workload now: a whole
    gang with no member live (`decision.may_launch`: not given up, the back-off passed), or,
    beside a provisioned gang with no failed member, what makes its members whole gangs
    again — more whole gangs (the claim grew), or the members it lost since (a reclaimed
    node, a unit a disruption replaces first), so a provisioned gang heals rather than
    staying short. Never part of a gang that is still starting."""
    if missing <= 0 or size <= 0:
        return False
    if not members:
        return decision.may_launch
    return (record.provisioned_at is not None and (len(members) + missing) % size == 0
            and not any(m.failed for m in members))


def gang_retry_due(record: GangRecord, policy: GangPolicy, now: float) -> bool:
    """A failed gang whose back-off has ended waits for its launch (not given up, not
    launched since): the controller plans and acquires for it then."""
    wait = 0.0 if record.relocate else gang_backoff(record.failures, policy.backoff)
    return (record.launched_at is None and record.failed_at is not None
            and 0 < record.failures <= policy.retries and now - record.failed_at >= wait)
