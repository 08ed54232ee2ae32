"""scoctl's one vocabulary: instance and launch statuses, disruption reasons, Nova server
statuses as scoctl reads them, claim parts' sources, and the names of its tags and labels.

Each word is defined here once. `StrEnum` members are `str`s, so they compare equal to, and are
stored and printed as, the words the state, the JSON output and the events have always used;
the state's SQL is the only other place where a status is spelled out.
"""

from __future__ import annotations

from enum import StrEnum


class InstanceStatus(StrEnum):
    """An instance's life (design: Reconciler, Notices): requested → building → active → ready, then
    noticed (a reclaim notice: between ready and draining) → draining → deleting → deleted,
    or error."""

    REQUESTED = "requested"
    BUILDING = "building"
    ACTIVE = "active"
    READY = "ready"
    NOTICED = "noticed"
    DRAINING = "draining"
    DELETING = "deleting"
    DELETED = "deleted"
    ERROR = "error"


class WorkloadStatus(StrEnum):
    """A managed workload's status (design: Statuses): pending → queued → preparing → running, or
    failed at once when no node can ever hold it; then how it ended (a job succeeded, failed
    or was cancelled; a deployment stopped or was deleted)."""

    PENDING = "pending"
    QUEUED = "queued"
    PREPARING = "preparing"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    STOPPED = "stopped"
    DELETED = "deleted"


class LaunchStatus(StrEnum):
    """A launch intent (design: Acquirer): recorded before the call, then called, then recorded with
    its servers; failed when the call failed for sure."""

    INTENT = "intent"
    CALLED = "called"
    RECORDED = "recorded"
    FAILED = "failed"


class ServerStatus(StrEnum):
    """A Nova server's status, normalised once by the Nova adapter: Nova's BUILD (and the
    states a server passes while it builds) → BUILD, ACTIVE, ERROR, DELETED (gone, or going),
    anything else (SHUTOFF, PAUSED, …) → OTHER."""

    BUILD = "BUILD"
    ACTIVE = "ACTIVE"
    ERROR = "ERROR"
    DELETED = "DELETED"
    OTHER = "OTHER"


class DisruptionReason(StrEnum):
    """Why a live unit is disrupted (design: Disruption): every voluntary change, and a reclaim."""

    EMPTY = "empty"
    UNDERUTILIZED = "underutilized"
    DRIFTED = "drifted"
    EXPIRED = "expired"
    REBALANCED = "rebalanced"
    UNHEALTHY = "unhealthy"
    NOTICED = "noticed"
    LATE = "late"  # a unit of a launch failed before its servers appeared: above the plan


class PauseScope(StrEnum):
    """What an operator's pause stops (`scoctl pause`): new servers, or the start of voluntary
    disruptions. Reclaim notices are handled under either."""

    LAUNCHES = "launches"
    DISRUPTIONS = "disruptions"


class BudgetLimit(StrEnum):
    """What part of a disruption budget leaves no room: its `units` in flight,
    or its start `rate`."""

    UNITS = "units"
    RATE = "rate"


class EventLevel(StrEnum):
    """An event's level, least severe first (`scoctl events --level` shows one and those
    above it)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    def at_least(self) -> tuple[str, ...]:
        """This level and every more severe one."""
        levels = list(EventLevel)
        return tuple(level.value for level in levels[levels.index(self):])


class PartSource(StrEnum):
    """What demand a claim part is (design: Buffers, Constraints): some of the workload's pods (or
    jobs),
    or its capacity buffer's chunks."""

    PODS = "pods"
    BUFFER = "buffer"


class RebalanceTrigger(StrEnum):
    """Why a workload's fleet should move back (design: Rebalance), in the order they are named."""

    DEGRADED = "degraded"  # the current plan is degraded, the fresh one is not
    POOL_CAP = "pool_cap"  # a reclaimable pool above the pool cap
    GROUP_CAP = "group_cap"  # a correlation group's reclaimable units above the group cap
    MIN_POOLS = "min_pools"  # reclaimable units in fewer than min_pools pools
    COMMITTED = "committed"  # committed units beyond what the floor needs
    GAIN = "gain"  # the fresh plan's mean key better by rebalance.min_gain


class ConfigReload(StrEnum):
    """The event a controller records for a SIGHUP: the config reloaded (info), or refused
    for an error — naming its file, line and field — while the old config stays (warning)."""

    RELOADED = "CONFIG_RELOADED"
    REFUSED = "CONFIG_RELOAD_REFUSED"


class PlacementToken(StrEnum):
    """Placement truth: why a workload's pods do not run on its units (the workload is
    queued with the reason)."""

    NOT_ISOLATED = "POD_NOT_ISOLATED"  # managed pods lack the workload's toleration / selector
    UNPLACED = "PODS_UNPLACED"  # pending pods its Ready units have no room for


# Nova tags on every server scoctl launches (design: Acquirer): `sco:managed`, then key=value ones
TAG_MANAGED = "sco:managed"
TAG_WORKLOAD = "sco:workload"
TAG_POOL = "sco:pool"
TAG_GENERATION = "sco:gen"
TAG_LAUNCH = "sco:launch"
TAG_SPEC = "sco:spec"  # design: Drift: the launch spec hash
# server metadata: a reclaim notice's deadline (design: Notices)
META_RECLAIM_AT = "sco:reclaim-at"

# Kubernetes labels scoctl reads and writes
LABEL_MANAGED = "sco/managed"  # on the objects and Nodes scoctl manages ("true")
LABEL_WORKLOAD = "sco/workload"  # a pod's workload
LABEL_CONTRACT = "sco/contract"  # a pod's contract tier
LABEL_POOL = "sco/pool"
LABEL_LAUNCH = "sco/launch"
LABEL_INSTANCE = "sco/instance"  # a Node's server id, set by user-data


def tag(key: str, value: object) -> str:
    """One key=value tag, e.g. ``tag(TAG_POOL, "c4.xlarge.az1.spot")``."""
    return f"{key}={value}"
