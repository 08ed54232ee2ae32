"""Fault → exclusion or quota (design: Acquirer, Reconciler): one rule, one event detail shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scoctl.clock import rfc3339
from scoctl.core.faults import (
    FaultVerdict,
    fault_text,
    is_quota_fault,
    judge_fault,
    merge_exclusions,
)
from scoctl.core.model import ExclusionRecord, ServerInfo

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SHAPE = {"pool", "launch", "servers", "fault", "region"}


def error_server(code: int | None, message: str | None) -> ServerInfo:
    return ServerInfo(id="s-1", name="n", status="ERROR", fault_code=code, fault_message=message)


def judge(*, quota: bool, pool: str | None = "p1", workload: str | None = "web",
          ) -> FaultVerdict:
    return judge_fault(workload=workload, pool=pool, region="r1", fault="500: No valid host",
                       quota=quota, launch="l-1", servers=2, now=NOW, negative_cache=180)


def test_a_capacity_fault_excludes_the_pool_for_the_negative_cache_and_replans() -> None:
    verdict = judge(quota=False)
    until = rfc3339(NOW + timedelta(seconds=180))
    assert verdict.token == "POOL_EXCLUDED" and not verdict.quota
    assert verdict.exclusion == ExclusionRecord("p1", "capacity fault: 500: No valid host", until,
                                                ("web",))
    assert dict(verdict.detail) == {"pool": "p1", "launch": "l-1", "servers": 2,
                                    "fault": "500: No valid host", "region": "r1",
                                    "until": until}
    assert verdict.replan == "pool p1 excluded"


def test_a_quota_fault_keeps_the_pool_and_has_the_same_detail_shape() -> None:
    quota, capacity = judge(quota=True), judge(quota=False)
    assert quota.token == "QUOTA_EXCEEDED" and quota.exclusion is None and quota.quota
    assert set(quota.detail) == SHAPE and set(capacity.detail) == SHAPE | {"until"}


def test_a_fault_without_a_pool_excludes_nothing() -> None:
    assert judge(quota=False, pool=None).exclusion is None


def test_quota_is_413_or_a_quota_message_and_the_text_carries_the_code() -> None:
    assert is_quota_fault(error_server(413, "Quota exceeded for cores"))
    assert is_quota_fault(error_server(500, "Quota exceeded for instances"))
    assert not is_quota_fault(error_server(500, "No valid host was found."))
    assert not is_quota_fault(ServerInfo(id="s", name="n", status="ACTIVE"))
    assert fault_text(error_server(500, " No valid host was found. ")) == \
        "500: No valid host was found."
    assert fault_text(error_server(None, None)) == "no fault message"


def test_exclusions_of_one_pool_merge_their_workloads() -> None:
    a = ExclusionRecord("p1", "first", "t1", ("web",))
    b = ExclusionRecord("p1", "second", "t2", ("api",))
    c = ExclusionRecord("p0", "other", "t3", ())
    assert merge_exclusions([a, b, c]) == [c, ExclusionRecord("p1", "first", "t1",
                                                              ("api", "web"))]
