"""Every value type the pure decisions take and give, in one namespace.

`pools` holds the configured world (flavors, pools, contracts, claims), `cloud`, `kubernetes`,
`slurm` (nodes) and `jobs` what the outside systems report, `records` (workloads, events,
tokens, disruption blocks), `ledger` (claims, counters), `fleet` and `plans` the rows of the
state, `notices` the reclaim notices. Each type is defined once, in its submodule; this package
only gathers them, importing each submodule on first use of one of its names (PEP 562): the
Slurm gate, run before every `sbatch`, needs only a few of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scoctl.core.model.cloud import (
        QUOTA_FAULT_CODE,
        FlavorInfo,
        Headroom,
        LaunchRequest,
        LaunchResult,
        Networks,
        ServerInfo,
    )
    from scoctl.core.model.fleet import (
        KEEP,
        ExclusionRecord,
        GangRecord,
        InstanceRecord,
        InstanceUpdate,
        Keep,
        LaunchRecord,
        RebalanceRecord,
    )
    from scoctl.core.model.jobs import FinishedJob, NodeRelease, SlurmJob
    from scoctl.core.model.join import BootstrapToken, TokenSecret
    from scoctl.core.model.kubernetes import (
        REVISION_ANNOTATION,
        Condition,
        Container,
        DeploymentInfo,
        EventInfo,
        InferenceServiceInfo,
        JobInfo,
        NodeEvent,
        NodeInfo,
        OwnerRef,
        Placement,
        PodEvent,
        PodInfo,
        ReplicaSetInfo,
        Requirement,
        ResourceQuotaInfo,
        Spread,
        Taint,
        Toleration,
        WorkloadRef,
    )
    from scoctl.core.model.latency import Histogram, LatencySample, Sighting
    from scoctl.core.model.leases import LeaseRecord
    from scoctl.core.model.ledger import ClaimRecord, MetricCounters
    from scoctl.core.model.notices import (
        NoticedRecord,
        NoticeKind,
        NoticeOutcome,
        NoticeRecord,
        NoticeSource,
    )
    from scoctl.core.model.plans import (
        PlanGeneration,
        PlanUnitRecord,
        PlanWorkloadRecord,
        RankingCache,
    )
    from scoctl.core.model.pools import (
        ISOLATIONS,
        KINDS,
        SLUG_RE,
        SOURCES,
        TIERS,
        Claim,
        ClaimPart,
        Contract,
        Flavor,
        Isolation,
        Kind,
        Limits,
        Pool,
        Source,
        Tier,
        flavor_allocatable,
        is_slug,
    )
    from scoctl.core.model.problems import APIS, Api, Problem
    from scoctl.core.model.records import (
        DisruptionBlock,
        EventRecord,
        NewEvent,
        TokenRecord,
        WorkloadRecord,
    )
    from scoctl.core.model.slurm import ELASTIC_FLAGS, OLDEST_REST_API, SlurmNode, rest_api_version

__all__ = [
    "ELASTIC_FLAGS", "KINDS", "OLDEST_REST_API", "QUOTA_FAULT_CODE", "SLUG_RE", "SOURCES", "TIERS",
    "BootstrapToken", "Claim", "ClaimPart", "ClaimRecord", "Contract", "EventRecord",
    "ExclusionRecord",
    "FinishedJob", "Flavor", "FlavorInfo", "Headroom", "Histogram", "InstanceRecord", "Kind",
    "LatencySample", "Limits", "LaunchRecord", "LaunchRequest", "LaunchResult", "MetricCounters",
    "Networks", "NodeRelease", "NoticeKind", "NoticeOutcome", "NoticeRecord", "NoticeSource",
    "NoticedRecord", "PlanGeneration", "PlanUnitRecord", "PlanWorkloadRecord", "Pool",
    "RankingCache", "ServerInfo", "Sighting", "SlurmJob", "SlurmNode", "Source", "Tier",
    "TokenRecord", "TokenSecret", "WorkloadRecord", "flavor_allocatable", "is_slug",
    "rest_api_version",
]
__all__ += ["ISOLATIONS", "Isolation"]  # workloads[].isolation
__all__ += ["LeaseRecord"]  # the leader lease (design: Runners)
__all__ += ["APIS", "Api", "Problem"]
__all__ += [  # the Kubernetes objects of the `Cluster` seam
    "REVISION_ANNOTATION", "Condition", "Container", "DeploymentInfo", "EventInfo",
    "InferenceServiceInfo", "JobInfo", "NodeEvent", "NodeInfo", "OwnerRef", "PodEvent",
    "PodInfo", "ReplicaSetInfo", "ResourceQuotaInfo", "Taint", "Toleration", "WorkloadRef",
    "Placement", "Requirement", "Spread",
]
__all__ += ["DisruptionBlock"]  # design: Disruption
__all__ += ["RebalanceRecord"]  # design: Rebalance
__all__ += ["GangRecord"]  # design: Gangs
__all__ += ["KEEP", "InstanceUpdate", "Keep", "NewEvent"]  # what a stage hands the store to save

# name -> the submodule that defines it (the names of the imports above, by submodule)
_NAMES: dict[str, tuple[str, ...]] = {
    "cloud": ("QUOTA_FAULT_CODE", "FlavorInfo", "Headroom", "LaunchRequest", "LaunchResult",
              "Networks", "ServerInfo"),
    "jobs": ("FinishedJob", "NodeRelease", "SlurmJob"),
    "join": ("BootstrapToken", "TokenSecret"),
    "kubernetes": ("REVISION_ANNOTATION", "Condition", "Container", "DeploymentInfo", "EventInfo",
                   "InferenceServiceInfo", "JobInfo", "NodeEvent", "NodeInfo", "OwnerRef",
                   "Placement", "PodEvent", "PodInfo", "ReplicaSetInfo", "Requirement",
                   "ResourceQuotaInfo", "Spread", "Taint", "Toleration", "WorkloadRef"),
    "latency": ("Histogram", "LatencySample", "Sighting"),
    "leases": ("LeaseRecord",),
    "ledger": ("ClaimRecord", "MetricCounters"),
    "notices": ("NoticedRecord", "NoticeKind", "NoticeOutcome", "NoticeRecord", "NoticeSource"),
    "problems": ("APIS", "Api", "Problem"),
    "pools": ("ISOLATIONS", "KINDS", "SLUG_RE", "SOURCES", "TIERS", "Claim", "ClaimPart",
              "Contract", "Flavor", "Isolation", "Kind",
              "Limits", "Pool", "Source", "Tier", "flavor_allocatable", "is_slug"),
    "fleet": ("KEEP", "ExclusionRecord", "GangRecord", "InstanceRecord", "InstanceUpdate", "Keep",
              "LaunchRecord", "RebalanceRecord"),
    "plans": ("PlanGeneration", "PlanUnitRecord", "PlanWorkloadRecord", "RankingCache"),
    "records": ("DisruptionBlock", "EventRecord", "NewEvent", "TokenRecord", "WorkloadRecord"),
    "slurm": ("ELASTIC_FLAGS", "OLDEST_REST_API", "SlurmNode", "rest_api_version"),
}
_HOME = {name: module for module, names in _NAMES.items() for name in names}


def __getattr__(name: str) -> Any:
    """A value type (or constant) of this namespace, importing its submodule once."""
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
