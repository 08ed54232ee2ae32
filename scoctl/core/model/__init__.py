"""Every value type the pure decisions take and give, in one namespace.

`pools` holds the configured world (flavors, pools, contracts, claims), `cloud` and `slurm` what
the outside systems report, `records` the rows of the state, `notices` the reclaim notices.
Each type is defined once, in its submodule; this package only gathers them.
"""

from scoctl.core.model.cloud import (
    QUOTA_FAULT_CODE,
    FlavorInfo,
    Headroom,
    LaunchRequest,
    LaunchResult,
    Networks,
    ServerInfo,
)
from scoctl.core.model.join import BootstrapToken, TokenSecret
from scoctl.core.model.latency import Histogram, LatencySample, Sighting
from scoctl.core.model.leases import LeaseRecord
from scoctl.core.model.notices import (
    NoticedRecord,
    NoticeKind,
    NoticeOutcome,
    NoticeRecord,
    NoticeSource,
)
from scoctl.core.model.pools import (
    KINDS,
    SLUG_RE,
    SOURCES,
    TIERS,
    Claim,
    Contract,
    Flavor,
    Kind,
    Pool,
    Source,
    Tier,
    flavor_allocatable,
    is_slug,
)
from scoctl.core.model.records import (
    ClaimRecord,
    EventRecord,
    ExclusionRecord,
    InstanceRecord,
    LaunchRecord,
    MetricCounters,
    PlanGeneration,
    PlanUnitRecord,
    PlanWorkloadRecord,
    RankingCache,
    TokenRecord,
    WorkloadRecord,
)
from scoctl.core.model.slurm import (
    ELASTIC_FLAGS,
    OLDEST_REST_API,
    FinishedJob,
    NodeRelease,
    SlurmJob,
    SlurmNode,
    rest_api_version,
)

__all__ = [
    "ELASTIC_FLAGS", "KINDS", "OLDEST_REST_API", "QUOTA_FAULT_CODE", "SLUG_RE", "SOURCES", "TIERS",
    "BootstrapToken", "Claim", "ClaimRecord", "Contract", "EventRecord", "ExclusionRecord",
    "FinishedJob", "Flavor", "FlavorInfo", "Headroom", "Histogram", "InstanceRecord", "Kind",
    "LatencySample", "LaunchRecord", "LaunchRequest", "LaunchResult", "MetricCounters",
    "Networks", "NodeRelease", "NoticeKind", "NoticeOutcome", "NoticeRecord", "NoticeSource",
    "NoticedRecord", "PlanGeneration", "PlanUnitRecord", "PlanWorkloadRecord", "Pool",
    "RankingCache", "ServerInfo", "Sighting", "SlurmJob", "SlurmNode", "Source", "Tier",
    "TokenRecord", "TokenSecret", "WorkloadRecord", "flavor_allocatable", "is_slug",
    "rest_api_version",
]
__all__ += ["LeaseRecord"]  # the leader lease (DESIGN §15)
