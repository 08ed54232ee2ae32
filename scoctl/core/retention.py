"""What the state keeps (design: State), pure: from the config's `retention` and `now`, the cutoffs
before which rows are pruned, and how many rows one pass may prune.

Events older than ``retention.events`` (default 30 days) go, and so do instances that ended
(``deleted``) and launches that settled (``recorded``, ``failed``) last changed more than
``retention.instances`` / ``retention.launches`` ago (default 7 days); live instances and
launches still in flight are never pruned, whatever their age. One pass prunes at most
`PRUNE_BATCH` rows of each table, so a backlog (a state that was never pruned) drains over a
few passes instead of in one long write transaction.

The SQLite schema never lets an event within `EVENTS_FLOOR` of the newest one go (migration 3),
so the events cutoff is never later than that before `now`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus
from scoctl.core.timefmt import rfc3339

PRUNE_BATCH = 1000  # rows per table and pass
EVENTS_FLOOR = 86400.0  # seconds of events no pruning may touch (the schema's trigger)
ENDED_INSTANCES = (InstanceStatus.DELETED,)
SETTLED_LAUNCHES = (LaunchStatus.RECORDED, LaunchStatus.FAILED)


@dataclass(frozen=True)
class Pruning:
    """One pass's pruning: rows (of those statuses) older than each cutoff (RFC 3339), at most
    `batch` of each table, oldest first."""

    events_before: str
    instances_before: str
    launches_before: str
    instance_statuses: tuple[InstanceStatus, ...] = ENDED_INSTANCES
    launch_statuses: tuple[LaunchStatus, ...] = SETTLED_LAUNCHES
    batch: int = PRUNE_BATCH


def _before(now: datetime, seconds: float) -> str:
    """`now` minus `seconds`, as text; "" (older than every row) when that is before year 1."""
    try:
        return rfc3339(now - timedelta(seconds=seconds))
    except OverflowError:
        return ""


def pruning(*, events: float, instances: float, launches: float, now: datetime,
            batch: int = PRUNE_BATCH) -> Pruning:
    """The pruning of a pass at `now`, keeping `events` seconds of events (never less than
    `EVENTS_FLOOR`) and `instances` / `launches` seconds of ended instances and settled
    launches."""
    return Pruning(events_before=_before(now, max(events, EVENTS_FLOOR)),
                   instances_before=_before(now, instances),
                   launches_before=_before(now, launches), batch=batch)
