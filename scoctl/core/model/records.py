"""Typed rows of the state file, as the stages see them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from scoctl.core.model.pools import ClaimPart
from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus


@dataclass(frozen=True)
class WorkloadRecord:
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
class ClaimRecord:
    workload: str
    version: int
    contract: str
    requests: Mapping[str, int]
    largest_pod: Mapping[str, int]
    pods: int
    tolerates_reclaimable: bool
    source: str
    updated: str
    nodes: tuple[str, ...] = ()  # Slurm: the node names this claim asks for
    ineligible: Mapping[str, str] = field(default_factory=dict)  # pool -> the constraint (§22)
    zone_spread: int = 0  # maxSkew of the pods' DoNotSchedule zone spread, 0: none (§22)
    # per flavor, what the DaemonSet pods on a new unit request (§22)
    overhead: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    parts: tuple[ClaimPart, ...] = ()  # split by where its pods may run (§22)
    preferred: Mapping[str, int] = field(default_factory=dict)  # soft terms' weight per pool
    gang: int = 0  # members per gang (DESIGN §19), 0: not a gang


@dataclass(frozen=True)
class PlanGeneration:
    generation: int
    created: str
    ranking: str | None
    changed: tuple[str, ...]
    full: bool


@dataclass(frozen=True)
class PlanUnitRecord:
    pool: str
    tier: str
    group: str
    units: int
    share: float
    score: float


@dataclass(frozen=True)
class PlanWorkloadRecord:
    workload: str
    generation: int
    claim_version: int
    contract: str
    ranking: str | None
    feasible: bool
    degraded: bool
    reasons: tuple[str, ...]
    pools: tuple[PlanUnitRecord, ...]
    exclusions: tuple[str, ...] = ()
    explain: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class LaunchRecord:
    launch_id: str
    region: str
    workload: str
    pool: str
    generation: int
    count: int
    status: LaunchStatus
    created: str
    updated: str
    reservation_id: str | None = None
    error: str | None = None
    node_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstanceRecord:
    id: str
    name: str
    region: str
    workload: str | None
    pool: str | None
    generation: int | None
    launch_id: str | None
    # requested building active ready noticed draining deleting deleted error (DESIGN §7, §14)
    status: InstanceStatus
    created: str
    updated: str
    active_at: str | None = None
    ready_at: str | None = None
    idle_since: str | None = None
    fault: str | None = None
    node_name: str | None = None
    # DESIGN §16: the reason of its disruption and when it started (in flight while the status
    # is not deleted; kept afterwards for the budgets' rates), since when its node is unhealthy
    disruption: str | None = None
    disruption_at: str | None = None
    unhealthy_since: str | None = None
    spec_hash: str | None = None  # DESIGN §17: the launch spec it was created from
    # DESIGN §17: the keys of the config's labels (`pools[].labels`, `workloads[].node_labels`)
    # its Node was given, comma-separated: a key the config drops is removed (None: unknown)
    labels: str | None = None


class Keep(Enum):
    """The value of an `InstanceUpdate` field that leaves the row's value as it is."""

    KEEP = "keep"


KEEP: Final = Keep.KEEP


@dataclass(frozen=True)
class InstanceUpdate:
    """Set these fields of the instance row `id` (its ``updated`` becomes now): a field left
    at `KEEP` keeps its value, None clears a nullable one."""

    id: str
    status: InstanceStatus | Keep = KEEP
    active_at: str | None | Keep = KEEP
    ready_at: str | None | Keep = KEEP
    idle_since: str | None | Keep = KEEP
    fault: str | None | Keep = KEEP
    disruption: str | None | Keep = KEEP
    disruption_at: str | None | Keep = KEEP
    unhealthy_since: str | None | Keep = KEEP
    labels: str | None | Keep = KEEP

    @property
    def fields(self) -> dict[str, Any]:
        """The fields this update sets, by name."""
        return {name: value for name in ("status", "active_at", "ready_at", "idle_since", "fault",
                                         "disruption", "disruption_at", "unhealthy_since",
                                         "labels")
                if (value := getattr(self, name)) is not KEEP}


@dataclass(frozen=True)
class DisruptionBlock:
    """A (workload, reason) whose candidates a budget holds back (the `budget`-th of the
    workload's budgets), until time alone lifts it (`until`, RFC 3339; None: until a
    disruption ends). Stored so that DISRUPTION_BLOCKED is written once per change."""

    workload: str
    reason: str
    budget: int
    until: str | None = None


@dataclass(frozen=True)
class GangRecord:
    """What the state remembers of a gang between passes (DESIGN §19; `core.gang`): its
    members needed, and when (Unix seconds) it was launched, last failed and provisioned."""

    workload: str
    size: int
    launched_at: float | None = None  # the pass its members were created in
    failures: int = 0
    failed_at: float | None = None
    provisioned_at: float | None = None


@dataclass(frozen=True)
class RebalanceRecord:
    """A workload's rebalance between passes (DESIGN §18): the first trigger that holds, since
    when some trigger has held (RFC 3339), the units it moves (server ids), and when it was
    planned (None: waiting out `rebalance.stabilize`). Reconcile starts the planned moves as
    `rebalanced` disruptions under the budgets."""

    workload: str
    trigger: str
    since: str
    moves: tuple[str, ...] = ()
    planned: str | None = None


@dataclass(frozen=True)
class ExclusionRecord:
    """A pool on the negative cache until `until` (the one exclusion type: stored, decided by
    `core.faults.judge_fault` for a capacity fault or by `core.notice` for a reclaim notice,
    reported by acquire, reconcile and the notice stage). The state keeps one per pool, the
    later `until` with its reason: a shorter exclusion never cuts a longer one short.
    `workloads` are the ones whose launch hit the fault (not stored: the state keeps pool,
    reason and deadline)."""

    pool: str
    reason: str
    until: str
    workloads: tuple[str, ...] = ()


@dataclass(frozen=True)
class RankingCache:
    """The last ranking read from a URL: a URL that is down falls back to it until max_age."""

    url: str
    id: str
    fetched: str  # RFC 3339
    scores: Mapping[str, float]


@dataclass(frozen=True)
class MetricCounters:
    """What `scoctl run` counts across runs, for its metrics textfile."""

    cloud_calls: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (region, outcome)
    tokens_spent: Mapping[str, int] = field(default_factory=dict)  # by region
    last_success: float | None = None  # Unix time of the last fully successful pass


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
