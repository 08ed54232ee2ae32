"""The state file: all SQL lives in this package (DESIGN §9).

`Store` is the typed interface the stages use; `scoctl.state.sqlite` implements it over SQLite
through sqlite-utils. A PostgreSQL store for several runners can implement the same methods.
"""

from scoctl.state.records import (
    ClaimRecord,
    EventRecord,
    ExclusionRecord,
    InstanceRecord,
    LaunchRecord,
    PlanGeneration,
    PlanUnitRecord,
    PlanWorkloadRecord,
    WorkloadRecord,
)
from scoctl.state.sqlite import SCHEMA_VERSION, Store

__all__ = [
    "SCHEMA_VERSION",
    "ClaimRecord",
    "EventRecord",
    "ExclusionRecord",
    "InstanceRecord",
    "LaunchRecord",
    "PlanGeneration",
    "PlanUnitRecord",
    "PlanWorkloadRecord",
    "Store",
    "WorkloadRecord",
]
