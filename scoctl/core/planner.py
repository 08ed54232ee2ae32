"""The portfolio planner (design: Planner): a pure function from claims, pools and rankings to
plans.

No I/O, clock, randomness or logging: the `plan` stage gathers the inputs, calls `plan_all` and
records the result.

Coverage
    One instance of a flavor holds ``k = min_r ⌊allocatable[r] / largest_pod[r]⌋`` of the
    workload's largest pods, so it covers
    ``cov(f) = min over requested r of min(allocatable[r], k·largest_pod[r]) / claim[r]`` of the
    claim (`coverage`). ``allocatable`` is `Flavor.allocatable` (capacity minus the node reserve;
    the stage fills it in), or the capacity when that is empty. A requested resource the largest
    pod does not ask for is bounded by the allocatable alone.

Shares and caps
    A pool's ``share`` is its coverage over ``max(plan coverage, 1)``. The caps are enforced
    against the claim itself (denominator 1): a reclaimable pool's coverage never exceeds
    ``pool_cap`` and a correlation group's reclaimable coverage never exceeds ``group_cap``.
    Because a share divides by a number ≥ 1, every output ``share`` of a plan that is not
    ``degraded`` is within its cap, which is how invariant 3 is checked from the plan's JSON. The
    claim denominator is also monotone: adding or dropping units elsewhere never pushes another
    pool over its cap, so the fill and the waste drop cannot break a cap they already checked.
    Only reclaimable units count against the caps and ``min_pools``; committed units have none.
    A pool holds at most the whole claim's worth of coverage that matters, so a cap of 1 (100%)
    or more means "no cap" (the unit that covers the last bit may overshoot it).

Order
    ``key = score + depth_premium · depth / max depth`` over the workload's eligible pools, ties by
    pool name. ``depth`` here is the pool's own `Pool.depth` (what the fleet says it can still
    give), not what is left of it after workloads planned earlier in this run: the order of a
    workload's pools must not depend on which other workloads happen to be re-planned, or an
    incremental re-plan would disagree with a full one. What is left limits how many *new* units
    a workload may take (``depth_left``).

Depth
    A reclaimable pool's `Pool.depth` counts instances beyond the ones that already exist. A
    committed pool's depth is the reserved instances it holds, shared by every workload: the
    units that already exist in it, whichever workload holds them, are taken from it first
    (`initial_depth`), so that no generation plans more units there than it holds. A
    workload's current units (live and in-flight instances) need no more depth; units beyond
    them consume it. Committed and
    reclaimable depth are handed out in (contract tier, slug) order (`planning_order`); the
    units of plans kept from a previous generation keep consuming theirs. Units a plan drops
    give no depth back in the same run (the instances still exist until reconcile removes them).

Fill (per workload)
    (a) keep current units in pools that are still eligible (an excluded pool — a notice, a
    capacity fault — keeps its current units and takes no new ones); trim a pool above the pool
    cap to the cap, and a group above the group cap worst-keyed pool first. (b) floor: committed
    units best
    key first until committed coverage reaches the floor or committed depth runs out. (c)
    reclaimable units, each to the best-keyed pool within its pool cap, group cap and depth; while
    fewer than ``min_pools`` pools hold reclaimable units only pools holding none are candidates;
    until the claim is covered and, once any reclaimable unit is placed, ``min_pools`` pools
    hold one. (d) drop waste, a pool's idle units first (``idle``: when a claim shrinks, the
    units that run no work go before busy ones, so fewer pods move, design: Disruption), then worst
    key
    first: reclaimable units while the plan stays covered and
    keeps the pool count (all of them when committed units alone cover the claim), then
    committed units above the floor while the plan stays covered. (d) looks at every unit, kept
    or added, so a plan never holds a unit it could drop: this is what makes a re-plan of an
    unchanged claim a fixed point (no churn) and makes a shrunk claim give units back. A grown
    claim adds units; a current unit goes only if an added, larger unit made it redundant.
    If (d) freed room in a group while fewer than ``min_pools`` pools hold units, (c) runs again.

Degraded, infeasible (invariant 6)
    When the caps cannot all hold and the contract is not strict the planner relaxes, in order:
    ``min_pools`` (first to the number of pools that can take a unit; then, when spreading
    first leaves the claim uncovered, by covering first and spreading afterwards as far as the
    caps allow), then the group cap, then the pool cap down to "one unit per pool first" (every
    pool may take ``max(cap units, m)`` units, m = 1, 2, …). At each step, what reclaimable
    pools cannot cover within that step's caps is filled with committed units beyond the floor
    (best key first) before anything more is relaxed: a committed unit breaks no cap, and a
    re-plan that finds those units already placed must reach the same plan. The reasons are read
    off the final
    plan: one per constraint it breaks, and ``degraded`` is True when there is any. A strict
    contract never relaxes the caps; a plan it cannot cover, or whose units fit in fewer than
    ``min_pools`` pools, is ``feasible: False`` with the reason. A plan that covers less than the
    claim (depth exhausted everywhere) is ``feasible: False`` with the shortfall. A committed
    floor that committed depth cannot reach is reported (``floor_shortfall`` and a reason) but
    neither degrades nor fails the plan: reclaimable units cover the rest (invariant 2).

Where pods may run (design: Constraints)
    Pools the claim's pods rule out (`Claim.ineligible`) are not eligible. A flavor's
    allocatable is less the DaemonSet pods a new unit would run (`Claim.overhead`). A claim with
    a zone spread (`Claim.zone_spread`) is planned per zone (`_plan_spread`). Workload limits
    trim the fill (`_limit`); pool limits (`pools[].limits`) lower a pool's depth to what they
    leave beyond every workload's current units there (`_cap_depth`). A plan a limit holds
    back is feasible, degraded, with ``LIMIT_REACHED`` naming it. A claim of parts
    (`Claim.parts`) is planned part by part (`_plan_parts`).

Capacity buffers (design: Buffers)
    A buffer is a part of its workload's claim (source ``buffer``, after the pods' parts),
    planned like the others in the pools its tier leaves it. A buffer no pool can hold is
    planned nowhere: the plan stays feasible (the pods' demand is what it speaks of), is
    degraded, and its reason names why each pool is ruled out.

Floats
    Coverages are floats. Every sum the decisions read is a `math.fsum` over ``units · cov`` (exact
    rounding, independent of the order units were added), and every comparison allows ``EPS``
    (1e-9): covered means ``coverage ≥ 1 - EPS``, within a cap means ``coverage ≤ cap + EPS``.
    The same units therefore always give the same decisions, which the no-churn rule relies on.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import compress, repeat
from operator import attrgetter, truediv
from typing import TYPE_CHECKING, NamedTuple

from scoctl.core.model import Claim, Contract, Flavor, Limits, Pool, Tier, flavor_allocatable
from scoctl.core.model.pools import DEFAULT_DEPTH_PREMIUM, ClaimPart, part_name
from scoctl.core.model.vocabulary import PartSource
from scoctl.core.quantity import Resources, format_resources
from scoctl.errors import ConfigError

if TYPE_CHECKING:
    from scoctl.core.model.gangs import GangPolicy


EPS = 1e-9
_UNLIMITED = 1 << 62

_RESOURCE_KEY = tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class ExplainLine:
    """Why one pool holds no units of a workload, or why it holds no more (`plan --explain`)."""

    pool: str
    units: int
    reason: str


@dataclass(frozen=True)
class PoolPlan:
    """How many units of one pool a workload should hold."""

    pool: str
    tier: Tier
    group: str
    units: int
    share: float  # coverage / max(plan coverage, 1)
    score: float
    key: float
    coverage: float  # units · cov(flavor), as a fraction of the claim


@dataclass(frozen=True)
class WorkloadPlan:
    """One workload's plan: the pools and units, and whether it keeps its contract."""

    workload: str
    contract: str
    feasible: bool
    degraded: bool
    reasons: tuple[str, ...]
    pools: tuple[PoolPlan, ...]
    coverage: float
    committed_coverage: float
    floor_shortfall: float
    explain: tuple[ExplainLine, ...] = ()

    def units(self) -> dict[str, int]:
        """Units per pool."""
        return {p.pool: p.units for p in self.pools}


# --------------------------------------------------------------------------- coverage


def _resource_key(values: Resources) -> _RESOURCE_KEY:
    return tuple(sorted((k, v) for k, v in values.items() if v > 0))


def _bound(alloc: Resources, largest_pod: _RESOURCE_KEY) -> dict[str, int] | None:
    """Per resource, what one instance gives the workload; None when it cannot hold one pod."""
    k: int | None = None
    for name, amount in largest_pod:
        fit = alloc.get(name, 0) // amount
        k = fit if k is None else min(k, fit)
    if k is not None and k < 1:
        return None
    pods = dict(largest_pod)
    out: dict[str, int] = {}
    for name, amount in alloc.items():
        per_pod = pods.get(name, 0)
        out[name] = amount if (k is None or per_pod == 0) else min(amount, k * per_pod)
    return out


def _cov(bound: Mapping[str, int], requests: _RESOURCE_KEY) -> float:
    if not requests:
        return 0.0
    # min() over a generator, unrolled: this runs for every eligible flavor of every claim
    best = math.inf
    for name, amount in requests:
        value = bound.get(name, 0) / amount
        if value < best:
            best = value
    return best


def coverage(flavor: Flavor, claim: Claim) -> float:
    """The fraction of `claim` one instance of `flavor` covers (design: Planner ``cov(f)``).

    0 when the flavor cannot hold the claim's largest pod, lacks a requested resource, or the
    claim requests nothing.
    """
    bound = _bound(flavor_allocatable(flavor), _resource_key(claim.largest_pod))
    if bound is None:
        return 0.0
    return _cov(bound, _resource_key(claim.requests))


def pool_key(score: float, depth: int, max_depth: int, depth_premium: float) -> float:
    """A pool's order key: its score plus the depth premium scaled by the deepest eligible pool."""
    if max_depth <= 0:
        return score
    return score + depth_premium * max(depth, 0) / max_depth


def _natural(text: str) -> tuple[tuple[int, int, str], ...]:
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part)
        for part in re.split(r"(\d+)", text)
        if part
    )


def planning_order(claims: Iterable[Claim]) -> list[Claim]:
    """Claims in the order depth is handed out: contract tier (T1 < T2 < T10), then slug."""
    by_slug = sorted(claims, key=attrgetter("workload"))
    tiers = {name: i for i, name in enumerate(
        sorted({c.contract for c in by_slug}, key=_natural))}
    return sorted(by_slug, key=lambda c: tiers[c.contract])  # stable: slugs stay sorted


# --------------------------------------------------------------------------- context


class _Entry(NamedTuple):
    """One eligible pool of a workload shape (a tuple: thousands are built per shape)."""

    name: str
    tier: Tier
    group: str
    flavor: str
    depth: int
    score: float
    key: float
    # its place in the best-first order of its workload shape (lower is better): the
    # position, or the shape's order's rank where a narrower or preferring order derives
    # from it (`_Context.order`); only compared, never counted
    rank: int


class _Order:
    """The eligible pools of one workload shape, best key first, split by tier. An excluded
    pool is in `by_name` only: it keeps a workload's current units and takes no new ones
    (design: Notices: a notice excludes the pool for new units)."""

    __slots__ = ("entries", "max_depth", "by_name", "excluded", "committed", "reclaimable",
                 "ranked", "_ranked_of", "_ranked_flavors", "_live", "flavors", "has_committed",
                 "has_reclaimable", "columns", "covs", "zones")

    def __init__(self, entries: list[_Entry], excluded: frozenset[str], max_depth: int) -> None:
        self.entries = entries  # every pool, best key first (kept as built: `prune` leaves it)
        self.max_depth = max_depth  # the deepest pool that may take new units (the key's scale)
        self.by_name = {e.name: e for e in entries}
        self.excluded = excluded
        new = [e for e in entries if e.name not in excluded]  # pools that may take new units
        self.committed = [e for e in new if e.tier == "committed"]
        # Reclaimable pools per flavor, best key first: a flavor whose one unit is above the
        # pool cap is skipped as a whole instead of pool by pool.
        self.reclaimable: dict[str, list[_Entry]] = {}
        for e in new:
            if e.tier == "reclaimable":
                self.reclaimable.setdefault(e.flavor, []).append(e)
        # the same pools in one list, best key first (what merging the flavors' lists gives)
        self.ranked = [e for e in new if e.tier == "reclaimable"]
        self._ranked_of: dict[frozenset[str], list[_Entry]] = {}  # `ranked` of some flavors
        self._ranked_flavors: list[str] | None = None  # the flavor of each of `ranked`
        self._live: tuple[list[list[_Entry]], list[str]] | None = None  # `live`
        self.flavors = sorted({e.flavor for e in entries})
        self.has_committed = bool(self.committed)
        self.has_reclaimable = bool(self.reclaimable)
        # per requested resource, what one instance of each flavor gives (in `flavors` order),
        # filled by `_Context.coverages`
        self.columns: dict[str, list[int]] | None = None
        self.covs: dict[_RESOURCE_KEY, dict[str, float]] = {}  # `_Context.coverages`, by requests
        self.zones: list[str] | None = None  # `_Context.zones_of`

    def prune(self, depth_left: Mapping[str, int]) -> None:
        """Forget pools with no depth left: within one run depth only goes down, and a pool
        without depth can take no new unit (kept units are found through `by_name`)."""
        self.committed = [e for e in self.committed if depth_left.get(e.name, e.depth) > 0]
        self.ranked = [e for e in self.ranked if depth_left.get(e.name, e.depth) > 0]
        lists: dict[str, list[_Entry]] = {flavor: [] for flavor in self.reclaimable}
        for e in self.ranked:
            lists[e.flavor].append(e)
        self.reclaimable = lists
        self._ranked_of = {}
        self._ranked_flavors = None
        self._live = None

    def live(self) -> tuple[list[list[_Entry]], list[str]]:
        """The flavors' lists of reclaimable pools that are not empty, and their flavors, in
        `reclaimable`'s order (kept until the next prune: every fill of the shape asks)."""
        found = self._live
        if found is None:
            lists = [entries for entries in self.reclaimable.values() if entries]
            found = self._live = (lists, [entries[0].flavor for entries in lists])
        return found

    def ranked_of(self, flavors: frozenset[str]) -> list[_Entry]:
        """The reclaimable pools of `flavors`, best key first (kept until the next prune:
        the workloads of one shape and size allow the same flavors)."""
        found = self._ranked_of.get(flavors)
        if found is None:
            if self._ranked_flavors is None:
                self._ranked_flavors = [e.flavor for e in self.ranked]
            found = self._ranked_of[flavors] = list(compress(
                self.ranked, map(flavors.__contains__, self._ranked_flavors)))
        return found


class _Context:
    """Per-run lookups shared by every workload of a `plan_all` call."""

    def __init__(
        self,
        pools: Sequence[Pool],
        flavors: Mapping[str, Flavor],
        scores: Mapping[str, float],
        excluded: Collection[str],
        depth_premium: float,
    ) -> None:
        self.pools = sorted(pools, key=lambda p: p.name)
        self.flavors = flavors
        self.alloc = {name: flavor_allocatable(f) for name, f in flavors.items()}
        self.scores = scores
        self.excluded = frozenset(excluded)
        self.depth_premium = depth_premium
        self.zone = {p.name: p.az for p in self.pools}
        # pools[].limits: the most units all workloads together may hold, with the limit named
        self.pool_limits = {p.name: found for p in self.pools if p.flavor in flavors
                            and (found := pool_limit(p, flavors[p.flavor])) is not None}
        self.capped: set[str] = set()  # pools whose limit, not their depth, bounds new units
        self._base: _Context | None = None  # the context `less` derived this one from
        self._less: dict[tuple[object, ...], _Context] = {}

        self._score = {name: float(value) for name, value in scores.items()}
        # pools any workload could use (the excluded ones for their current units only), in
        # name order (the tie-break of the key)
        self._usable = [p for p in self.pools
                        if p.name in self._score and p.flavor in self.alloc]
        self._bounds: dict[_RESOURCE_KEY, dict[str, dict[str, int]]] = {}
        self._orders: dict[tuple[_RESOURCE_KEY, frozenset[str], bool, frozenset[str],
                                 tuple[tuple[str, int], ...]], _Order] = {}
        self._outside: dict[str, dict[str, str]] = {}  # `outside`, by zone

    def less(self, overhead: Mapping[str, Resources]) -> _Context:
        """This context with each flavor's allocatable less `overhead[flavor]` (what the
        DaemonSet pods on a new unit request, `Claim.overhead`), made once per overhead."""
        base = self._base or self
        key = tuple(sorted((f, tuple(sorted(r.items()))) for f, r in overhead.items()))
        found = base._less.get(key)
        if found is None:
            found = copy.copy(base)
            found._base = base
            found.alloc = {name: {r: max(v - overhead.get(name, {}).get(r, 0), 0)
                                  for r, v in alloc.items()}
                           for name, alloc in base.alloc.items()}
            # (`_outside` stays shared: the pools and their zones are the same)
            found._bounds, found._orders, found._less = {}, {}, {}
            base._less[key] = found
        return found

    def bounds(self, largest_pod: _RESOURCE_KEY) -> dict[str, dict[str, int]]:
        """Per flavor that holds the largest pod, what one instance gives."""
        found = self._bounds.get(largest_pod)
        if found is None:
            found = {}
            for name in sorted(self.alloc):
                bound = _bound(self.alloc[name], largest_pod)
                if bound is not None:
                    found[name] = bound
            self._bounds[largest_pod] = found
        return found

    def order(self, largest_pod: _RESOURCE_KEY, requests: _RESOURCE_KEY, tolerates: bool,
              ruled_out: frozenset[str] = frozenset(),
              preferred: tuple[tuple[str, int], ...] = ()) -> _Order:
        """The eligible pools of a workload shape, best key first; `ruled_out` are the pools
        its pods' placement rules out (`Claim.ineligible`); `preferred` (pool, weight) puts
        the pools the pods' soft terms prefer first, the heaviest first (`Claim.preferred`:
        soft terms only order pools, design: Constraints), the key ordering pools of equal
        weight."""
        names = frozenset(name for name, _ in requests)
        cache_key = (largest_pod, names, tolerates, ruled_out, preferred)
        found = self._orders.get(cache_key)
        if found is not None:
            return found
        if preferred:
            found = self._preferring(largest_pod, requests, tolerates, ruled_out, preferred)
            self._orders[cache_key] = found
            return found
        if ruled_out:
            found = self._narrowed(largest_pod, requests, tolerates, ruled_out)
            if found is not None:
                self._orders[cache_key] = found
                return found
        bounds = self.bounds(largest_pod)
        good = {f for f, b in bounds.items() if all(b.get(r, 0) > 0 for r in names)}
        eligible = [p for p in self._usable
                    if p.flavor in good and (tolerates or p.tier == "committed")
                    and p.name not in ruled_out]
        # the key scales depth by the pools that may take new units
        max_depth = max((p.depth for p in eligible if p.name not in self.excluded), default=0)
        score = self._score
        premium = self.depth_premium
        keys = {p.name: pool_key(score[p.name], p.depth, max_depth, premium) for p in eligible}
        # a stable sort of a name-ordered list: equal keys stay in name order
        keyed = sorted(eligible, key=lambda p: -keys[p.name])
        entries = [
            _Entry(p.name, p.tier, p.group, p.flavor, p.depth, score[p.name], keys[p.name], rank)
            for rank, p in enumerate(keyed)
        ]
        found = _Order(entries, self.excluded, max_depth)
        self._orders[cache_key] = found
        return found

    def _preferring(self, largest_pod: _RESOURCE_KEY, requests: _RESOURCE_KEY,
                    tolerates: bool, ruled_out: frozenset[str],
                    preferred: tuple[tuple[str, int], ...]) -> _Order:
        """`order` with `preferred`, from the order without it: the keys do not depend on
        the soft terms, and a stable sort by weight of a list sorted (stably, from name
        order) by key is the stable sort by (weight, key) of that name-ordered list: the
        preferred pools (a few of thousands) move to the front, heaviest first, each weight's
        in the order's order."""
        plain = self.order(largest_pod, requests, tolerates, ruled_out)
        weight = dict(preferred)
        by_name = plain.by_name

        def first(sign: int) -> list[_Entry]:  # the pools of weights of `sign`, heaviest first
            return sorted((by_name[name] for name, w in preferred
                           if w * sign > 0 and name in by_name),
                          key=lambda e: (-weight[e.name], e.rank))

        heavy, light = first(1), first(-1)
        moved = {e.name for e in heavy} | {e.name for e in light}
        # ranks that follow the new order: the pools of weight 0 keep theirs (in `plain`'s
        # order, so increasing), those before them (preferred) are ranked below 0, those
        # after them (a negative weight) above every rank of `plain`
        after = plain.entries[-1].rank + 1 if plain.entries else 0
        entries = [_Entry(e.name, e.tier, e.group, e.flavor, e.depth, e.score, e.key,
                          i - len(heavy)) for i, e in enumerate(heavy)]
        entries += [e for e in plain.entries if e.name not in moved] if moved else plain.entries
        entries += [_Entry(e.name, e.tier, e.group, e.flavor, e.depth, e.score, e.key,
                           after + i) for i, e in enumerate(light)]
        return _Order(entries, self.excluded, plain.max_depth)

    def _narrowed(self, largest_pod: _RESOURCE_KEY, requests: _RESOURCE_KEY, tolerates: bool,
                  ruled_out: frozenset[str]) -> _Order | None:
        """`order` with `ruled_out` taken from the shape's order without it, when that
        leaves the deepest pool that may take new units as deep (None otherwise): every
        key is then the same float, and a stable sort of a name-ordered list keeps the
        order of any part of it, so the pools left, best first, are that order's without
        the ruled-out ones — the very entries. Pods that constrain where
        they run rule out most pools of their shape, each workload its own."""
        whole = self.order(largest_pod, requests, tolerates)
        kept = [e for e in whole.entries if e.name not in ruled_out]
        excluded = self.excluded
        if max((e.depth for e in kept if e.name not in excluded), default=0) != whole.max_depth:
            return None
        return _Order(kept, excluded, whole.max_depth)  # their ranks still increase

    def outside(self, zone: str) -> dict[str, str]:
        """The pools outside `zone`, each with why a zone spread's share in `zone` may not
        use it (`_plan_spread`), in pool name order; made once per zone (a spread claim has
        a share per zone, and thousands of pools). The caller must not change it."""
        found = self._outside.get(zone)
        if found is None:
            found = self._outside[zone] = {
                p.name: f"topology spread (zone {self.zone[p.name]}, not {zone})"
                for p in self.pools if self.zone[p.name] != zone}
        return found

    def zones_of(self, order: _Order) -> list[str]:
        """The zones of `order`'s pools that may take new units, in name order."""
        if order.zones is None:
            order.zones = sorted({self.zone[e.name] for e in order.by_name.values()
                                  if e.name not in order.excluded})
        return order.zones

    def coverages(self, order: _Order, largest_pod: _RESOURCE_KEY,
                  requests: _RESOURCE_KEY) -> dict[str, float]:
        """`_cov` of every flavor of `order` (the shape's, `requests` not empty), by columns:
        this runs for every claim, over hundreds of flavors (the same floats, the same min).
        Kept per `requests` (a workload's fresh plan asks again, design: Rebalance); the caller must
        not change it."""
        found = order.covs.get(requests)
        if found is not None:
            return found
        columns = order.columns
        if columns is None:
            bounds = self.bounds(largest_pod)
            columns = order.columns = {
                name: [bounds[f].get(name, 0) for f in order.flavors] for name, _ in requests}
        ratios = [list(map(truediv, columns[name], repeat(amount))) for name, amount in requests]
        found = order.covs[requests] = dict(zip(
            order.flavors, ratios[0] if len(ratios) == 1 else map(min, *ratios), strict=True))
        return found

    def why_ineligible(self, pool: Pool, claim: Claim) -> str | None:
        """Why `pool` can never hold units of `claim`, or None when it is eligible."""
        if pool.name in self.excluded:
            return "excluded"
        if pool.name not in self.scores:
            return "not ranked (no score in the ranking)"
        if pool.tier == "reclaimable" and not claim.tolerates_reclaimable:
            return "reclaimable, and the workload's pods do not tolerate the reclaimable taint"
        constraint = claim.ineligible.get(pool.name)
        if constraint is not None:
            # a buffer's part inherits the pods' constraints beside its tier's (design: Buffers)
            whose = "the buffer's" if claim.buffer else "the pods'"
            return f"{whose} {constraint} rules it out"
        alloc = self.alloc.get(pool.flavor)
        if alloc is None:
            return f"unknown flavor {pool.flavor}"
        bound = _bound(alloc, _resource_key(claim.largest_pod))
        if bound is None:
            return (f"flavor {pool.flavor} cannot hold the largest pod "
                    f"({format_resources(claim.largest_pod)})")
        missing = sorted(r for r, _ in _resource_key(claim.requests) if bound.get(r, 0) <= 0)
        if missing:
            return f"flavor {pool.flavor} has no {', '.join(missing)}"
        return None


# --------------------------------------------------------------------------- one workload


def _pct(value: float) -> str:
    return f"{value * 100:.1f}%"


class _Fill:
    """The mutable working state of one workload's fill at one relaxation level."""

    def __init__(
        self,
        order: _Order,
        cov: Mapping[str, float],
        contract: Contract,
        current: Mapping[str, int],
        depth_left: Mapping[str, int],
        level: int,
        spread_first: bool = True,
        idle: Mapping[str, int] | None = None,
    ) -> None:
        self.order = order
        self.idle = idle or {}  # per pool: current units that run no work (design: Disruption)
        # (c) as written spreads one unit over min_pools pools first; when that leaves the
        # claim uncovered, the next try covers first and then spreads as far as the caps allow
        # (min_pools is the first thing to give).
        self.spread_first = spread_first
        self.cov = cov  # per flavor
        self.contract = contract
        self.current = current
        self.depth_left = depth_left
        self.level = level  # 0 all caps, 1 group cap relaxed, 2 pool cap relaxed too
        self.m = 1  # level 2: every pool may take max(cap units, m) units
        self.eff_min = contract.min_pools
        self.held: dict[str, int] = {}
        self.count = 0  # reclaimable pools holding units
        self.dead_seen = 0
        self._group_members: dict[str, set[str]] = {}
        self._total: float | None = None
        self._committed: float | None = None
        self._groups: dict[str, float] = {}
        self._cap_units: dict[str, int] = {}
        # by m: the flavors' lists the pool cap allows, and their flavors (None: every flavor)
        self._allowed: dict[int, tuple[list[list[_Entry]], frozenset[str] | None]] = {}

    # ---- bookkeeping

    def coverage_of(self, e: _Entry) -> float:
        return self.cov[e.flavor]

    def set_units(self, e: _Entry, n: int) -> None:
        before = self.held.get(e.name, 0)
        if n == before:
            return
        if n:
            self.held[e.name] = n
        else:
            del self.held[e.name]
        self._total = None
        if e.tier == "committed":
            self._committed = None
            return
        self._groups.pop(e.group, None)
        members = self._group_members.setdefault(e.group, set())
        if before == 0:
            self.count += 1
            members.add(e.name)
        elif n == 0:
            self.count -= 1
            members.discard(e.name)

    def add(self, e: _Entry, n: int) -> None:
        self.set_units(e, self.held.get(e.name, 0) + n)

    def total(self) -> float:
        if self._total is None:
            by_name = self.order.by_name
            self._total = math.fsum(n * self.coverage_of(by_name[p]) for p, n in self.held.items())
        return self._total

    def committed(self) -> float:
        if self._committed is None:
            by_name = self.order.by_name
            self._committed = math.fsum(
                n * self.coverage_of(by_name[p])
                for p, n in self.held.items()
                if by_name[p].tier == "committed"
            )
        return self._committed

    def group(self, group: str) -> float:
        found = self._groups.get(group)
        if found is None:
            by_name = self.order.by_name
            found = math.fsum(
                self.held[p] * self.coverage_of(by_name[p])
                for p in self._group_members.get(group, ())
            )
            self._groups[group] = found
        return found

    def covered(self) -> bool:
        return self.total() >= 1 - EPS

    # ---- limits

    def candidates(self) -> Iterator[_Entry]:
        """Reclaimable pools best key first, leaving out flavors the pool cap rules out."""
        found = self._allowed.get(self.m)  # at one level, the pool cap moves only with m
        if found is None:
            left, of = self.order.live()
            if self.level >= 2 or self.contract.pool_cap >= 1 - EPS:
                # every pool may take max(cap units, m >= 1) units, or the cap is no cap
                lists, flavors = left, None
            else:  # the flavors one unit of which the pool cap allows: `cap_units` >= 1,
                # floor(x) >= 1 being x >= 1, over hundreds of flavors in one loop
                caps = map(truediv, repeat(self.contract.pool_cap + EPS),
                           map(self.cov.__getitem__, of))
                allowed = list(map((1.0).__le__, caps))
                lists = list(compress(left, allowed))
                flavors = (None if len(lists) == len(left)
                           else frozenset(compress(of, allowed)))
            found = self._allowed[self.m] = (lists, flavors)
        lists, flavors = found
        if len(lists) == 1:
            return iter(lists[0])
        # the flavors' lists merged by rank are the ranked pools of the allowed flavors
        if flavors is None:
            return iter(self.order.ranked)
        return iter(self.order.ranked_of(flavors))

    def depth_room(self, e: _Entry) -> int:
        """Units the pool can still take: current units plus what is left of its depth."""
        left = max(self.depth_left.get(e.name, e.depth), 0)
        return self.current.get(e.name, 0) + left - self.held.get(e.name, 0)

    def cap_units(self, e: _Entry) -> int:
        """The most units the pool cap allows at this level."""
        units = self._cap_units.get(e.flavor)
        if units is None:
            if self.contract.pool_cap >= 1 - EPS:
                units = _UNLIMITED
            else:
                units = math.floor((self.contract.pool_cap + EPS) / self.coverage_of(e))
            self._cap_units[e.flavor] = units
        return max(units, self.m) if self.level >= 2 else units

    def group_room(self, e: _Entry) -> int:
        if self.level >= 1 or self.contract.group_cap >= 1 - EPS:
            return _UNLIMITED
        room = self.contract.group_cap - self.group(e.group) + EPS
        return max(math.floor(room / self.coverage_of(e)), 0)

    def can_take(self, e: _Entry) -> int:
        """How many more units the pool may take now (reclaimable pools)."""
        depth = self.depth_room(e)
        if depth <= 0:
            if self.depth_left.get(e.name, e.depth) <= 0:
                self.dead_seen += 1
            return 0
        cap = self.cap_units(e) - self.held.get(e.name, 0)
        if cap <= 0:
            return 0
        return min(depth, cap, self.group_room(e))

    # ---- steps

    def keep(self, kept: Mapping[str, int]) -> None:
        """(a) Current units in eligible pools, trimmed to this level's caps."""
        by_name = self.order.by_name
        for name in sorted(kept):
            self.set_units(by_name[name], kept[name])
        if self.level >= 2:
            return
        for name in sorted(self.held):
            e = by_name[name]
            if e.tier == "reclaimable" and self.held[name] > self.cap_units(e):
                self.set_units(e, self.cap_units(e))
        if self.level >= 1 or self.contract.group_cap >= 1 - EPS:
            return
        for group in sorted(self._group_members):
            members = sorted((by_name[p] for p in self._group_members[group]),
                             key=lambda e: -e.rank)
            for e in members:  # worst key first
                over = self.group(group) - self.contract.group_cap - EPS
                if over <= 0:
                    break
                drop = min(self.held[e.name], math.ceil(over / self.coverage_of(e)))
                self.set_units(e, self.held[e.name] - drop)

    def _take_committed(self, target: float, value: Callable[[], float]) -> None:
        for e in self.order.committed:
            if value() >= target - EPS:
                return
            room = self.depth_room(e)
            if room <= 0:
                if self.depth_left.get(e.name, e.depth) <= 0:
                    self.dead_seen += 1
                continue
            need = max(math.ceil((target - EPS - value()) / self.coverage_of(e)), 1)
            self.add(e, min(room, need))
            while value() < target - EPS and self.depth_room(e) > 0:
                self.add(e, 1)

    def floor(self) -> None:
        """(b) Committed units, best key first, up to the floor or until committed depth ends."""
        self._take_committed(self.contract.floor, self.committed)

    def overflow(self) -> None:
        """Committed units beyond the floor when reclaimable pools cannot cover the claim."""
        self._take_committed(1.0, self.total)

    def _spread(self) -> None:
        for e in self.candidates():
            if self.count >= self.eff_min:
                return
            if e.name not in self.held and self.can_take(e) >= 1:
                self.add(e, 1)
        if self.count < self.eff_min:
            self.eff_min = self.count  # min_pools relaxed as little as the pools allow

    def _volume(self) -> None:
        for e in self.candidates():
            if self.covered():
                return
            room = self.can_take(e)
            if room <= 0:
                continue
            need = max(math.ceil((1 - EPS - self.total()) / self.coverage_of(e)), 1)
            self.add(e, min(room, need))
            while not self.covered() and self.can_take(e) > 0:
                self.add(e, 1)

    def _new_pool_possible(self) -> bool:
        return any(e.name not in self.held and self.can_take(e) >= 1
                   for e in self.candidates())

    def reclaim(self) -> None:
        """(c) and (d): reclaimable units by key under the caps (committed units beyond the
        floor for what they cannot cover), then drop waste; again while dropping waste freed
        room for a new pool and fewer than min_pools pools hold reclaimable units."""
        if self.level >= 2:
            self.eff_min = 0
            while not self.covered():
                self._volume()
                if self.covered():
                    break
                if not any(self.depth_room(e) > 0 for e in self.candidates()):
                    break
                self.m += 1
            if not self.covered():
                self.overflow()
            if self.covered():
                self.drop_waste()
            return
        spread = self.spread_first
        while True:
            self.eff_min = self.contract.min_pools
            if spread and (self.count > 0 or not self.covered()):
                self._spread()
            spread = True
            self._volume()
            if not self.covered():
                self.overflow()
            if not self.covered():
                return
            self.drop_waste()
            if self.count == 0 or self.count >= self.contract.min_pools:
                return
            if not self._new_pool_possible():
                return

    def _waste_order(self, tier: str) -> list[tuple[_Entry, int | None]]:
        """The pools of `tier` in the order (d) removes their units, each with at most how
        many it gives in that turn (None: any): first the pools' idle units (design: Disruption: a
        shrunk claim removes empty units first, so fewer pods move), worst key first, then
        every unit, worst key first."""
        by_name = self.order.by_name
        held = sorted((by_name[p] for p in self.held if by_name[p].tier == tier),
                      key=lambda e: -e.rank)
        first: list[tuple[_Entry, int | None]] = [
            (e, min(self.idle[e.name], self.current.get(e.name, 0))) for e in held
            if self.idle.get(e.name, 0) > 0]
        return first + [(e, None) for e in held]

    def drop_waste(self) -> None:
        """(d) Remove units the plan does not need: idle ones first, then worst key first."""
        by_name = self.order.by_name
        if self.count and self.committed() >= 1 - EPS:
            for name in sorted(self.held):
                if by_name[name].tier == "reclaimable":
                    self.set_units(by_name[name], 0)
        for e, most in self._waste_order("reclaimable"):
            n = self.held.get(e.name, 0)
            r = min(n, _removable(self.total() - (1 - EPS), self.coverage_of(e)))
            if most is not None:
                r = min(r, most)
            if r == n and self.count - 1 < self.eff_min:
                r = n - 1
            if r > 0:
                self.set_units(e, n - r)
        for e, most in self._waste_order("committed"):
            n = self.held.get(e.name, 0)
            slack = min(self.total() - (1 - EPS), self.committed() - (self.contract.floor - EPS))
            r = min(n, _removable(slack, self.coverage_of(e)))
            if most is not None:
                r = min(r, most)
            if r > 0:
                self.set_units(e, n - r)


def _removable(slack: float, per_unit: float) -> int:
    """How many units of `per_unit` coverage fit in `slack` (0 when slack is negative)."""
    if slack < 0:
        return 0
    r = math.floor(slack / per_unit)
    while r > 0 and r * per_unit > slack:
        r -= 1
    return r




# --------------------------------------------------------------------------- results


def _relaxation_reasons(fill: _Fill, contract: Contract) -> list[str]:
    """One reason per cap the final plan breaks (measured against the claim, as enforced)."""
    by_name = fill.order.by_name
    reasons: list[str] = []
    if 0 < fill.count < contract.min_pools:
        reasons.append(
            f"min_pools relaxed: reclaimable units in {fill.count} pools, "
            f"contract {contract.name} asks {contract.min_pools}"
        )
    groups = sorted(g for g, members in fill._group_members.items() if members)
    over_groups = [g for g in groups
                   if contract.group_cap < 1 - EPS and fill.group(g) > contract.group_cap + EPS]
    if over_groups:
        detail = "; ".join(f"{g} holds {_pct(fill.group(g))}" for g in over_groups)
        reasons.append(
            f"group cap relaxed: {detail} of the claim (cap {_pct(contract.group_cap)})"
        )
    over_pools = sorted(
        name for name, n in fill.held.items()
        if by_name[name].tier == "reclaimable" and contract.pool_cap < 1 - EPS
        and n * fill.coverage_of(by_name[name]) > contract.pool_cap + EPS
    )
    if over_pools:
        shown = ", ".join(
            f"{name} holds {_pct(fill.held[name] * fill.coverage_of(by_name[name]))}"
            for name in over_pools[:5]
        )
        more = f" and {len(over_pools) - 5} more" if len(over_pools) > 5 else ""
        reasons.append(
            f"pool cap relaxed: {shown}{more} of the claim (cap {_pct(contract.pool_cap)})"
        )
    return reasons


def _explain(
    ctx: _Context, fill: _Fill, claim: Claim, current: Mapping[str, int]
) -> tuple[ExplainLine, ...]:
    """Why each pool outside the plan was skipped, and why pools in it hold no more."""
    lines: list[ExplainLine] = []
    contract = fill.contract
    for pool in ctx.pools:
        name = pool.name
        had = current.get(name, 0)
        e = fill.order.by_name.get(name)
        reason: str | None
        if e is None:
            reason = ctx.why_ineligible(pool, claim) or "not eligible"
            if had:
                reason = f"{had} current units dropped: {reason}"
            lines.append(ExplainLine(name, 0, reason))
            continue
        n = fill.held.get(name, 0)
        left = max(fill.depth_left.get(name, e.depth), 0)
        if name in fill.order.excluded:
            reason = "excluded: keeps its current units, takes no new ones" if n else "excluded"
        elif e.tier == "committed":
            if fill.depth_room(e) <= 0:
                reason = "no committed depth left" if n == 0 else "committed depth exhausted"
            elif n == 0:
                reason = "not needed: better-keyed pools meet the floor and cover the claim"
            else:
                reason = None
        elif fill.depth_room(e) <= 0:
            reason = "no depth left" if n == 0 else f"depth exhausted ({left} new units allowed)"
        elif fill.cap_units(e) <= n:
            reason = (
                f"one unit covers {_pct(fill.coverage_of(e))} of the claim, above the pool cap "
                f"{_pct(contract.pool_cap)}"
                if n == 0
                else f"at the pool cap ({_pct(contract.pool_cap)})"
            )
        elif fill.level == 0 and fill.group_room(e) <= 0:
            reason = f"group {e.group} is at its cap ({_pct(contract.group_cap)})"
        elif n == 0:
            reason = "not needed: better-keyed pools cover the claim"
        else:
            reason = None
        if had > n:
            dropped = f"{had - n} of {had} current units dropped"
            reason = f"{dropped}: {reason}" if reason else dropped
        if reason is not None:
            lines.append(ExplainLine(name, n, reason))
    return tuple(lines)


def _no_eligible_pool(ctx: _Context, claim: Claim) -> str:
    """Why no pool at all can hold units of `claim`: the pools grouped by their reason."""
    classes: dict[str, list[str]] = {}
    for pool in ctx.pools:
        classes.setdefault(ctx.why_ineligible(pool, claim) or "not eligible", []).append(pool.name)
    parts = []
    for why, names in classes.items():
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        parts.append(f"{why} ({len(names)} pools: {shown})" if len(names) > 1
                     else f"{why} (pool {shown})")
    # nothing can hold a unit, so the whole claim is short
    return "no eligible pool (100.0% short): " + ("; ".join(parts) or "no pool is configured")


def _result(
    ctx: _Context,
    fill: _Fill,
    claim: Claim,
    contract: Contract,
    current: Mapping[str, int],
    want_explain: bool,
) -> WorkloadPlan:
    by_name = fill.order.by_name
    total = fill.total()
    committed = fill.committed()
    denominator = max(total, 1.0)
    reasons: list[str] = []
    feasible = True
    if total < 1 - EPS:
        feasible = False
        if not (fill.order.has_committed or fill.order.has_reclaimable or fill.held):
            reasons.append(_no_eligible_pool(ctx, claim))
        elif contract.strict:
            reasons.append(
                f"strict contract {contract.name}: the caps and depth allow only {_pct(total)} "
                f"of the claim ({_pct(1 - total)} short)"
            )
        else:
            reasons.append(
                f"depth exhausted: the plan covers {_pct(total)} of the claim "
                f"({_pct(1 - total)} short)"
            )
    floor_shortfall = 0.0
    if committed < contract.floor - EPS:
        floor_shortfall = contract.floor - committed
        why = ("committed depth exhausted" if fill.order.has_committed
               else "no eligible committed pool")
        reasons.append(
            f"floor shortfall: committed coverage {_pct(committed)} is below the floor "
            f"{_pct(contract.floor)} ({why}); reclaimable units cover the rest"
        )
    relaxed = _relaxation_reasons(fill, contract)
    degraded = False
    if contract.strict:
        if relaxed:
            feasible = False
            reasons.extend(
                f"strict contract {contract.name}: " + r.split(": ", 1)[1]
                .replace("reclaimable units in", "reclaimable units fit in only")
                for r in relaxed
            )
    elif relaxed:
        degraded = True
        reasons.extend(relaxed)
    pools = tuple(
        PoolPlan(
            pool=e.name,
            tier=e.tier,
            group=e.group,
            units=fill.held[e.name],
            share=fill.held[e.name] * fill.coverage_of(e) / denominator,
            score=e.score,
            key=e.key,
            coverage=fill.held[e.name] * fill.coverage_of(e),
        )
        for e in sorted((by_name[p] for p in fill.held),
                        key=lambda e: (e.tier != "committed", e.rank))
    )
    return WorkloadPlan(
        workload=claim.workload,
        contract=contract.name,
        feasible=feasible,
        degraded=degraded,
        reasons=tuple(reasons),
        pools=pools,
        coverage=total,
        committed_coverage=committed,
        floor_shortfall=floor_shortfall,
        explain=_explain(ctx, fill, claim, current) if want_explain else (),
    )


def _empty_plan(
    ctx: _Context, claim: Claim, contract: Contract, current: Mapping[str, int], want: bool
) -> WorkloadPlan:
    """A claim that requests nothing is covered by no units; current units are released."""
    explain: tuple[ExplainLine, ...] = ()
    if want:
        explain = tuple(
            ExplainLine(p.name, 0, f"{current[p.name]} current units dropped: the claim is empty"
                        if current.get(p.name) else "the claim requests nothing")
            for p in ctx.pools
        )
    return WorkloadPlan(claim.workload, contract.name, True, False, (), (), 1.0, 0.0, 0.0,
                        explain)


def _plan_one(
    ctx: _Context,
    claim: Claim,
    contract: Contract,
    current: Mapping[str, int],
    depth_left: Mapping[str, int],
    want_explain: bool,
    prune: bool,
    idle: Mapping[str, int] | None = None,
) -> WorkloadPlan:
    current = {p: n for p, n in current.items() if n > 0}
    requests = _resource_key(claim.requests)
    if not requests:
        return _empty_plan(ctx, claim, contract, current, want_explain)
    if claim.overhead:
        ctx = ctx.less(claim.overhead)
        claim = replace(claim, overhead={})
    if len(claim.parts) > 1 or any(p.source == PartSource.BUFFER for p in claim.parts):
        return _plan_parts(ctx, claim, contract, current, depth_left, want_explain, prune, idle)
    if claim.zone_spread:
        spread = _plan_spread(ctx, claim, contract, current, depth_left, want_explain, prune)
        if spread is not None:
            return spread
    largest = _resource_key(claim.largest_pod)
    order = ctx.order(largest, requests, claim.tolerates_reclaimable,
                      frozenset(claim.ineligible), tuple(sorted(claim.preferred.items())))
    cov = ctx.coverages(order, largest, requests)
    kept = {p: n for p, n in current.items() if p in order.by_name}
    if not order.has_reclaimable:
        levels: tuple[tuple[int, bool], ...] = ((0, True),)
    elif contract.strict:
        levels = ((0, True), (0, False))
    else:
        levels = ((0, True), (0, False), (1, True), (1, False), (2, False))
    fill: _Fill | None = None
    dead = 0
    for level, spread_first in levels:
        fill = _Fill(order, cov, contract, current, depth_left, level, spread_first, idle)
        fill.keep(kept)
        fill.floor()
        fill.reclaim()
        dead += fill.dead_seen
        if fill.covered():
            break
    assert fill is not None
    if prune and dead + fill.dead_seen > 16:
        order.prune(depth_left)
    limited = _limit(ctx, fill, claim.limits)
    plan = _result(ctx, fill, claim, contract, current, want_explain)
    if limited is None and plan.coverage < 1 - EPS:
        limited = _pool_limit_reached(ctx, fill)
    if limited is None:
        return plan
    reasons = tuple(r for r in plan.reasons if not r.startswith("depth exhausted"))
    return replace(plan, feasible=True, degraded=True,
                   reasons=(f"{LIMIT_REACHED}: {limited} (the plan covers "
                            f"{_pct(plan.coverage)} of the claim)", *reasons))


LIMIT_REACHED = "LIMIT_REACHED"


def pool_limit(pool: Pool, flavor: Flavor) -> tuple[int, str] | None:
    """The most units `pools[].limits` let every workload together hold in `pool` (of
    `flavor`), with the limit that sets it named; None when the pool has no limits."""
    limits = pool.limits
    if not limits:
        return None
    found = []
    if limits.units is not None:
        found.append((limits.units, f"pools[{pool.name}].limits.units {limits.units}"))
    for name, most in sorted(limits.resources.items()):
        each = flavor.capacity.get(name, 0)
        if each > 0:
            found.append((most // each, f"pools[{pool.name}].limits.{name} "
                                        f"{format_resources({name: most})}"))
    return min(found) if found else None


def _cap_depth(ctx: _Context, depth_left: dict[str, int],
               current_by_workload: Mapping[str, Mapping[str, int]]) -> None:
    """Lower each limited pool's depth to what its `pools[].limits` leave beyond the units
    every workload holds there now (a lowered limit stops new units; it takes none away)."""
    held: dict[str, int] = {}
    for units in current_by_workload.values():
        for pool, n in units.items():
            if n > 0 and pool in ctx.pool_limits:
                held[pool] = held.get(pool, 0) + n
    by_name = {p.name: p for p in ctx.pools}
    for pool, (most, _) in ctx.pool_limits.items():
        room = most - held.get(pool, 0)
        if room < depth_left.get(pool, by_name[pool].depth):
            depth_left[pool] = room
            ctx.capped.add(pool)


def _pool_limit_reached(ctx: _Context, fill: _Fill) -> str | None:
    """The `pools[].limits` that leave a short plan short: limited pools it may use whose
    limit (not their depth) left them no room, named; None when there are none."""
    names = [ctx.pool_limits[e.name][1] for e in fill.order.by_name.values()
             if e.name in ctx.capped and e.name not in fill.order.excluded
             and fill.depth_room(e) <= 0]
    if not names:
        return None
    return "; ".join(sorted(names)[:3]) + ("; ..." if len(names) > 3 else "")


def _shares(total: int, weights: Sequence[int]) -> list[int]:
    """`total` split in proportion to `weights` (largest remainder, ties to the first): the
    parts sum to `total`."""
    whole = sum(weights)
    parts = [total * w // whole for w in weights]
    rest = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in rest[:total - sum(parts)]:
        parts[i] += 1
    return parts


def _plan_spread(
    ctx: _Context,
    claim: Claim,
    contract: Contract,
    current: Mapping[str, int],
    depth_left: Mapping[str, int],
    want_explain: bool,
    prune: bool,
) -> WorkloadPlan | None:
    """A claim whose pods spread over zones (``DoNotSchedule``, design: Constraints): its pods are
    dealt to the zones of its eligible pools as evenly as they go (zone name order takes the
    extra ones), so two zones' shares differ by at most one pod, within any maxSkew; each
    zone's share (its pods' fraction of the requests, rounded up) is planned in that zone's
    pools alone, under the contract scaled to the share (the caps over the share, ``min_pools``
    its part of the pools), with its part of the limits. None when fewer than two zones have
    eligible pools (nothing to split)."""
    order = ctx.order(_resource_key(claim.largest_pod), _resource_key(claim.requests),
                      claim.tolerates_reclaimable, frozenset(claim.ineligible))
    zones = ctx.zones_of(order)
    if len(zones) < 2:
        return None
    pods = max(claim.pods, 1)
    dealt = [pods // len(zones) + (1 if i < pods % len(zones) else 0)
             for i in range(len(zones))]
    shares = [(z, n) for z, n in zip(zones, dealt, strict=True) if n]
    weights = [n for _, n in shares]
    units = (_shares(claim.limits.units, weights) if claim.limits.units is not None
             else [None] * len(shares))
    limited = {r: _shares(most, weights) for r, most in claim.limits.resources.items()}
    plans: list[tuple[str, float, WorkloadPlan]] = []
    for i, (zone, n) in enumerate(shares):
        part = n / pods
        sub = replace(
            claim, requests={r: -(-v * n // pods) for r, v in claim.requests.items()}, pods=n,
            ineligible={**claim.ineligible, **ctx.outside(zone)}, zone_spread=0,
            limits=Limits({r: parts[i] for r, parts in limited.items()}, units[i],
                          share_of=claim.limits))
        terms = replace(contract, pool_cap=contract.pool_cap / part,
                        group_cap=contract.group_cap / part,
                        min_pools=math.ceil(contract.min_pools * part - EPS))
        zone_current = {p: k for p, k in current.items() if ctx.zone.get(p) == zone}
        plans.append((zone, part, _plan_one(ctx, sub, terms, zone_current, depth_left,
                                            want_explain, prune)))
    mine = {zone for zone, _, _ in plans}
    explain = tuple(line for zone, _, plan in plans for line in plan.explain
                    if ctx.zone.get(line.pool) == zone
                    or (zone == plans[0][0] and ctx.zone.get(line.pool) not in mine))
    return _summed(claim, contract, [(part, plan) for _, part, plan in plans],
                   tuple(f"{reason} (zone {zone}'s share of the spread)"
                         for zone, _, plan in plans for reason in plan.reasons), explain)


def _summed(claim: Claim, contract: Contract, plans: Sequence[tuple[float, WorkloadPlan]],
            reasons: tuple[str, ...], explain: tuple[ExplainLine, ...]) -> WorkloadPlan:
    """The plan of a claim planned in shares (a zone spread's zones, a claim's parts): each
    share's plan weighted by its fraction of the claim, the units of a pool summed."""
    total = math.fsum(share * plan.coverage for share, plan in plans)
    denominator = max(total, 1.0)
    summed: dict[str, PoolPlan] = {}
    for share, plan in plans:
        for pool in plan.pools:
            was = summed.get(pool.pool)
            coverage = pool.coverage * share + (was.coverage if was else 0.0)
            summed[pool.pool] = replace(pool, units=pool.units + (was.units if was else 0),
                                        coverage=coverage, share=coverage / denominator)
    return WorkloadPlan(
        workload=claim.workload, contract=contract.name,
        feasible=all(plan.feasible for _, plan in plans),
        degraded=any(plan.degraded for _, plan in plans), reasons=reasons,
        pools=tuple(sorted(summed.values(),
                           key=lambda p: (p.tier != "committed", -p.key, p.pool))),
        coverage=total,
        committed_coverage=math.fsum(share * plan.committed_coverage for share, plan in plans),
        floor_shortfall=math.fsum(share * plan.floor_shortfall for share, plan in plans),
        explain=explain)


def _plan_parts(
    ctx: _Context,
    claim: Claim,
    contract: Contract,
    current: Mapping[str, int],
    depth_left: Mapping[str, int],
    want_explain: bool,
    prune: bool,
    idle: Mapping[str, int] | None,
) -> WorkloadPlan:
    """A claim whose pods differ in where they may run (design: Constraints, `Claim.parts`: the
    claims
    `<workload>/<n>`), or that keeps a buffer (design: Buffers, the part `<workload>/buffer`, its
    chunks counted as pods): each part is planned in its own eligible pools, in order (the
    part that may use the fewest pools first, the buffer last), under the contract scaled to
    its share of the pods (as a zone spread's shares are), with its share of the limits, from
    the current units of its pools that the parts before it did not keep, on the depth they
    left; the plan is their sum, each pool's coverage weighted by its part's share. A buffer
    no pool can hold is planned nowhere: feasible, degraded, with why."""
    weights = [max(part.pods, 1) for part in claim.parts]
    whole = sum(weights)
    pods = sum(part.pods for part in claim.parts if part.source != PartSource.BUFFER)
    units = (_shares(claim.limits.units, weights) if claim.limits.units is not None
             else [None] * len(claim.parts))
    limited = {r: _shares(most, weights) for r, most in claim.limits.resources.items()}
    left = {p: n for p, n in current.items() if n > 0}
    depth = {**{p.name: p.depth for p in ctx.pools}, **depth_left}  # missing: its whole depth
    plans: list[tuple[str, float, WorkloadPlan]] = []
    for i, part in enumerate(claim.parts):
        share = weights[i] / whole
        sub = replace(claim, requests=dict(part.requests), largest_pod=dict(part.largest_pod),
                      pods=part.pods, ineligible={**claim.ineligible, **part.ineligible},
                      zone_spread=part.zone_spread, parts=(), preferred=dict(part.preferred),
                      limits=Limits({r: shares[i] for r, shares in limited.items()}, units[i],
                                    share_of=claim.limits),
                      buffer=part.source == PartSource.BUFFER)
        terms = replace(contract, pool_cap=contract.pool_cap / share,
                        group_cap=contract.group_cap / share,
                        min_pools=max(1, math.ceil(contract.min_pools * share - EPS)))
        mine = {p: n for p, n in left.items() if p not in sub.ineligible}
        if sub.buffer and not any(ctx.why_ineligible(pool, sub) is None for pool in ctx.pools):
            # the buffer's tier leaves it no pool: it is short (that, and why, is all its plan
            # says), the pods' plan still holds
            plan = WorkloadPlan(
                claim.workload, contract.name, True, True, (_no_eligible_pool(ctx, sub),), (),
                0.0, 0.0, 0.0, tuple(ExplainLine(pool.name, 0, ctx.why_ineligible(pool, sub)
                                                 or "") for pool in ctx.pools)
                if want_explain else ())
        else:
            plan = _plan_one(ctx, sub, terms, mine, depth, want_explain, prune,
                             idle={p: n for p, n in (idle or {}).items() if p in mine})
        for pool in plan.pools:
            kept = min(pool.units, mine.get(pool.pool, 0))
            if kept:
                left[pool.pool] -= kept
            new = pool.units - kept
            if new > 0 and pool.pool in depth:
                depth[pool.pool] -= new
        plans.append((part_name(claim.workload, i + 1, part), share, plan))
    said = {pool.pool for _, _, plan in plans for pool in plan.pools}  # explained by units
    explain: list[ExplainLine] = []
    for name, _, plan in plans:
        for line in plan.explain:
            if line.pool not in said:
                said.add(line.pool)
                explain.append(replace(line, reason=f"{name}: {line.reason}"))
    reasons = tuple(f"{reason} ({name}: {_part_size(part, pods)})"
                    for (name, _, plan), part in zip(plans, claim.parts, strict=True)
                    for reason in plan.reasons)
    return _summed(claim, contract, [(share, plan) for _, share, plan in plans], reasons,
                   tuple(explain))


def _part_size(part: ClaimPart, pods: int) -> str:
    """A part's size as its reasons give it: its pods of the claim's, or its buffer's chunks."""
    if part.source == PartSource.BUFFER:
        return f"{part.pods} chunk{'' if part.pods == 1 else 's'}"
    return f"{part.pods} of {pods} pods"


def _over(held: Mapping[str, int], by_name: Mapping[str, _Entry], flavors: Mapping[str, Flavor],
          limits: Limits) -> str | None:
    """The first limit the units in `held` exceed, named as the config gives it (a share's
    limit by the workload's, with the share's part), or None."""
    whole = limits.share_of
    if limits.units is not None and sum(held.values()) > limits.units:
        if whole is not None and whole.units is not None:
            return (f"workloads[].limits.units {whole.units} ({limits.units} of them for this "
                    "share)")
        return f"workloads[].limits.units {limits.units}"
    for name, most in sorted(limits.resources.items()):
        total = sum(n * flavors[by_name[p].flavor].capacity.get(name, 0)
                    for p, n in held.items())
        if total > most:
            given = whole.resources.get(name) if whole is not None else None
            if given is not None:
                return (f"workloads[].limits.{name} {format_resources({name: given})} "
                        f"({format_resources({name: most})} of it for this share)")
            return f"workloads[].limits.{name} {format_resources({name: most})}"
    return None


def _limit(ctx: _Context, fill: _Fill, limits: Limits) -> str | None:
    """Trim the fill to the workload's limits (design: Constraints): units are removed worst key
    first, reclaimable before committed, while the units' flavors' capacity or their count
    exceeds a limit. Returns the limit that bound, or None when none did."""
    if not limits:
        return None
    by_name = fill.order.by_name
    bound = None
    while fill.held:
        over = _over(fill.held, by_name, ctx.flavors, limits)
        if over is None:
            break
        bound = over
        worst = max((by_name[p] for p in fill.held),
                    key=lambda e: (e.tier == "reclaimable", e.rank))
        fill.add(worst, -1)
    return bound


# --------------------------------------------------------------------------- public entry points


def plan_workload(
    claim: Claim,
    contract: Contract,
    pools: Sequence[Pool],
    flavors: Mapping[str, Flavor],
    scores: Mapping[str, float],
    current: Mapping[str, int],
    depth_left: Mapping[str, int],
    excluded: Collection[str] = frozenset(),
    depth_premium: float = DEFAULT_DEPTH_PREMIUM,
    explain: bool = False,
    idle: Mapping[str, int] | None = None,
) -> WorkloadPlan:
    """Plan one workload's whole claim (design: Planner fill (a)–(d)).

    `current`: units the workload already holds per pool (live and in-flight instances).
    `depth_left`: new units (beyond `current`) each pool may still give this workload; a pool
    missing from it offers its whole `Pool.depth`. `scores`: the ranking; unranked pools are not
    eligible. With `explain`, the plan lists why each other pool was skipped or capped.
    `idle`: how many of `current`'s units per pool run no work; a shrunk claim gives those
    back first (design: Disruption), then units worst key first.
    """
    ctx = _Context(pools, flavors, scores, excluded, depth_premium)
    if ctx.pool_limits:
        depth_left = dict(depth_left)
        _cap_depth(ctx, depth_left, {claim.workload: current})
    return _plan_one(ctx, claim, contract, current, depth_left, explain, prune=False,
                     idle=idle)


def plan_all(
    claims: Iterable[Claim],
    contracts: Mapping[str, Contract],
    pools: Sequence[Pool],
    flavors: Mapping[str, Flavor],
    scores: Mapping[str, float],
    current_by_workload: Mapping[str, Mapping[str, int]],
    excluded: Collection[str] = frozenset(),
    depth_premium: float = DEFAULT_DEPTH_PREMIUM,
    only: Collection[str] | None = None,
    previous: Mapping[str, WorkloadPlan] | None = None,
    explain: Collection[str] = (),
    promised: Mapping[str, int] | None = None,
    idle_by_workload: Mapping[str, Mapping[str, int]] | None = None,
    fresh: dict[str, WorkloadPlan] | None = None,
    gang_policy: GangPolicy | None = None,
    moves_again: Callable[[WorkloadPlan, WorkloadPlan, Contract], bool] | None = None,
) -> dict[str, WorkloadPlan]:
    """Plan every claim, or re-plan only some of them, sharing pool depth between workloads.

    Depth (committed and reclaimable) is handed out in `planning_order` (contract tier, then
    slug). With `only`, just those workloads (and any claim without a `previous` plan) are
    re-planned; every other claim keeps its previous plan, whose new units (beyond the
    workload's current units) still consume depth. A previous plan whose claim is gone is
    dropped. Returns the plans in planning order. Workloads named in `explain` get explain
    lines. `promised`, when given, must be
    `promised_depth(plan_rows(previous), current_by_workload)`: a caller that keeps it up to
    date saves a pass over every previous plan. `idle_by_workload[slug]`: the workload's
    current units per pool that run no work (`plan_workload`'s `idle`). `fresh`, when given,
    receives the fresh plan (`plan_fresh`, design: Rebalance) of each re-planned workload that holds
    current units (one that holds none has nothing to move), planned first
    in the same context, so the pools' order, bounds and coverages are worked out once for
    both. A gang claim (`Claim.gang`) is planned by `core.gang.plan_gang` under `gang_policy`
    (the config's `gang` defaults when None). `moves_again(plan, fresh, contract)`: whether
    a rebalance would move `plan` to the fresh plan (`core.rebalance.triggers`); a shrunk
    plan it would move is made again toward the fresh plan (`_shrunk_onto`, design: Truth: one
    target after a shrink). Raises `ConfigError` for a claim naming an unknown contract or a
    slug planned twice.
    """
    ctx = _Context(pools, flavors, scores, excluded, depth_premium)
    ordered = planning_order(claims)
    seen = {c.workload for c in ordered}
    if len(seen) != len(ordered):
        twice = sorted({a.workload for a, b in zip(ordered, ordered[1:], strict=False)
                        if a.workload == b.workload})
        raise ConfigError(f"workload {', '.join(twice)} has more than one claim")
    unknown = {c.contract for c in ordered} - contracts.keys()
    if unknown:
        claim = next(c for c in ordered if c.contract in unknown)
        raise ConfigError(
            f"workload {claim.workload} names unknown contract {claim.contract!r}",
            field="contract",
        )
    previous = previous or {}
    explain_set = frozenset(explain)
    if only is None:
        replan = seen
    else:  # set algebra, not a Python loop: an incremental run touches few workloads
        replan = (seen & set(only)) | (seen - previous.keys())
    depth_left = initial_depth(ctx.pools, current_by_workload)
    _cap_depth(ctx, depth_left, current_by_workload)
    empty: Mapping[str, int] = {}
    if fresh is not None:  # before any plan prunes the shared orders; a workload that holds
        # no unit has nothing to move: its fresh plan is not needed
        fresh.update(_fresh(ctx, [c for c in ordered if c.workload in replan
                                  and any(current_by_workload.get(c.workload, empty).values())],
                            contracts, current_by_workload, depth_left))
    if promised is None:
        for claim in ordered:
            if claim.workload not in replan:
                _consume(depth_left, previous[claim.workload],
                         current_by_workload.get(claim.workload, empty))
    else:
        for pool, units in promised.items():
            if pool in depth_left:
                depth_left[pool] -= units
        # plans about to be replaced, and plans whose claim is gone, give their depth back
        for slug in sorted(replan | (previous.keys() - seen)):
            if slug in previous:
                _consume(depth_left, previous[slug], current_by_workload.get(slug, empty), -1)
    out: dict[str, WorkloadPlan] = {}
    for claim in ordered:
        slug = claim.workload
        if slug not in replan:
            out[slug] = previous[slug]
            continue
        current = current_by_workload.get(slug, empty)
        if claim.gang > 0:
            from scoctl.core.gang import plan_gang  # gang builds on this
            from scoctl.core.model.gangs import DEFAULT_GANG_POLICY

            plan = plan_gang(claim, contracts[claim.contract], claim.gang,
                             gang_policy or DEFAULT_GANG_POLICY, ctx.pools, flavors, scores,
                             current, depth_left, excluded, depth_premium,
                             explain=slug in explain_set)
        else:
            plan = _plan_one(ctx, claim, contracts[claim.contract], current, depth_left,
                             slug in explain_set, prune=True,
                             idle=(idle_by_workload or {}).get(slug))
            if moves_again is not None and sum(plan.units().values()) < sum(current.values()):
                target = (fresh or {}).get(slug) or _fresh(
                    ctx, [claim], contracts, {slug: current}, depth_left)[slug]
                plan = _shrunk_onto(ctx, claim, contracts[claim.contract], plan, target,
                                    current, depth_left, moves_again, slug in explain_set)
        _consume(depth_left, plan, current)
        out[slug] = plan
    return out


def _shrunk_onto(ctx: _Context, claim: Claim, contract: Contract, plan: WorkloadPlan,
                 target: WorkloadPlan, current: Mapping[str, int],
                 depth_left: Mapping[str, int],
                 moves_again: Callable[[WorkloadPlan, WorkloadPlan, Contract], bool],
                 want_explain: bool) -> WorkloadPlan:
    """A shrunk `plan` a rebalance would move to the fresh plan `target` (its committed units
    beyond the floor's need, too few pools, a cap broken) is made again from the current units
    the fresh plan keeps (per pool, at most what it holds there): consolidation then moves the
    fleet once, onto the plan a rebalance leaves alone, rather than shrinking it to a plan a
    rebalance moves again (the 42 → 10 second launch wave). Kept as it is when the target
    is not a plan to move to, or the plan made again is no better."""
    if (not target.feasible or target.degraded or target.coverage < 1 - EPS
            or not moves_again(plan, target, contract)):
        return plan
    want = target.units()
    kept = {pool: min(n, want.get(pool, 0)) for pool, n in current.items()}
    again = _plan_one(ctx, claim, contract, kept, depth_left, want_explain, prune=False)
    if not again.feasible or again.degraded or again.coverage < 1 - EPS \
            or moves_again(again, target, contract):
        return plan
    return again


def initial_depth(pools: Iterable[Pool],
                  current_by_workload: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    """The new units (beyond each workload's current units) each pool can give before any
    plan takes some: a reclaimable pool its `Pool.depth`; a committed pool its depth less the
    units every workload already holds in it (its reserved instances are shared by all)."""
    out = {p.name: p.depth for p in pools}
    committed = {p.name for p in pools if p.tier == "committed"}
    for units in current_by_workload.values():
        for pool, n in units.items():
            if pool in committed and n > 0:
                out[pool] -= n
    return out


def _consume(
    depth_left: dict[str, int], plan: WorkloadPlan, current: Mapping[str, int], sign: int = 1
) -> None:
    """Take a plan's new units (beyond the workload's current units) out of the pools' depth
    (or, with ``sign=-1``, give them back)."""
    for p in plan.pools:
        new = p.units - current.get(p.pool, 0)
        if new > 0 and p.pool in depth_left:
            depth_left[p.pool] -= sign * new


def plan_rows(plans: Mapping[str, WorkloadPlan]) -> Iterator[tuple[str, str, int]]:
    """The (workload, pool, units) rows of `plans`: the shape the state stores them in."""
    for slug in sorted(plans):
        for p in plans[slug].pools:
            yield slug, p.pool, p.units


def promised_depth(
    rows: Iterable[tuple[str, str, int]], current_by_workload: Mapping[str, Mapping[str, int]]
) -> dict[str, int]:
    """Per pool, the new units (beyond each workload's current units) that plan rows
    (workload, pool, units) take from its depth: what `plan_all` subtracts for the plans it
    keeps. The plan stage passes the stored rows (`Store.planned_units`) so that tens of
    thousands of kept plans are never rebuilt as values; `plan_rows` turns plans into rows."""
    out: dict[str, int] = {}
    empty: Mapping[str, int] = {}
    for workload, pool, units in rows:
        new = units - current_by_workload.get(workload, empty).get(pool, 0)
        if new > 0:
            out[pool] = out.get(pool, 0) + new
    return out


def plan_fresh(
    claims: Iterable[Claim],
    contracts: Mapping[str, Contract],
    pools: Sequence[Pool],
    flavors: Mapping[str, Flavor],
    scores: Mapping[str, float],
    current_by_workload: Mapping[str, Mapping[str, int]],
    excluded: Collection[str] = frozenset(),
    depth_premium: float = DEFAULT_DEPTH_PREMIUM,
) -> dict[str, WorkloadPlan]:
    """Each claim planned afresh (design: Rebalance): the same claim, contract, exclusions, scores
    and depth, as if the workload held no unit. A pool offers what it has beyond every
    workload's current units (`initial_depth`, so a committed pool's reserved instances others
    hold stay theirs) plus this workload's own units there (they would be given back). Each
    workload is planned on its own: fresh plans take no depth from each other, since they are
    what each workload should hold, not a generation. One context serves every claim, so the
    cost is one more planning pass over the same pools. Raises `ConfigError` for an unknown
    contract."""
    ctx = _Context(pools, flavors, scores, excluded, depth_premium)
    base = initial_depth(ctx.pools, current_by_workload)
    _cap_depth(ctx, base, current_by_workload)
    ordered = planning_order(claims)
    for claim in ordered:
        if claim.contract not in contracts:
            raise ConfigError(
                f"workload {claim.workload} names unknown contract {claim.contract!r}",
                field="contract")
    return _fresh(ctx, ordered, contracts, current_by_workload, base)


def _fresh(ctx: _Context, claims: Sequence[Claim], contracts: Mapping[str, Contract],
           current_by_workload: Mapping[str, Mapping[str, int]],
           base: Mapping[str, int]) -> dict[str, WorkloadPlan]:
    """`plan_fresh` in a context: `base` is each pool's depth beyond every current unit."""
    empty: Mapping[str, int] = {}
    out: dict[str, WorkloadPlan] = {}
    for claim in claims:
        contract = contracts[claim.contract]
        own = current_by_workload.get(claim.workload, empty)
        depth: Mapping[str, int] = base
        if own:
            depth = dict(base)
            for pool, n in own.items():
                if n > 0 and pool in depth:
                    depth[pool] += n
        out[claim.workload] = _plan_one(ctx, claim, contract, empty, depth, False,
                                        prune=False)
    return out
