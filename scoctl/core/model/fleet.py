"""Typed rows of the state file for the fleet (launches, instances, gangs, rebalances,
exclusions), as the stages see them. Their own module so that a hook recording a workload row
(`records`) does not build them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus


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
    # requested building active ready noticed draining deleting deleted error (design: Reconciler,
    # Notices)
    status: InstanceStatus
    created: str
    updated: str
    active_at: str | None = None
    ready_at: str | None = None
    idle_since: str | None = None
    fault: str | None = None
    node_name: str | None = None
    # design: Disruption: the reason of its disruption and when it started (in flight while the
    # status
    # is not deleted; kept afterwards for the budgets' rates), since when its node is unhealthy
    disruption: str | None = None
    disruption_at: str | None = None
    unhealthy_since: str | None = None
    spec_hash: str | None = None  # design: Drift: the launch spec it was created from
    # design: Drift: the keys of the config's labels (`pools[].labels`, `workloads[].node_labels`)
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
class GangRecord:
    """What the state remembers of a gang between passes (design: Gangs; `core.gang`): its
    members needed, and when (Unix seconds) it was launched, last failed and provisioned.
    `relocate`: the last failure was a zone that cannot hold the gang (NoValidHost), now
    excluded, so the next launch goes elsewhere at once, waiting for no back-off."""

    workload: str
    size: int
    launched_at: float | None = None  # the pass its members were created in
    failures: int = 0
    failed_at: float | None = None
    provisioned_at: float | None = None
    relocate: bool = False


@dataclass(frozen=True)
class RebalanceRecord:
    """A workload's rebalance between passes (design: Rebalance): the first trigger that holds,
    since
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
