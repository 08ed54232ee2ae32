"""Capacity buffers (DESIGN §20): desired chunks, windows, the claim that holds them, held."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from scoctl.core.buffers import buffer_states, desired, held, in_window, with_buffers
from scoctl.core.cron import parse_cron
from scoctl.core.intake.common import ClaimDecision
from scoctl.core.model.buffers import Buffer
from scoctl.core.model.pools import Limits

GIB = 1024**3
POD = {"cpu": 4000, "memory": 16 * GIB}
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def claim(pods: int, workload: str = "web") -> ClaimDecision:
    return ClaimDecision(workload=workload, contract="T1", kind="deployment", source="k8s",
                         requests={k: v * pods for k, v in POD.items()},
                         largest_pod=dict(POD) if pods else {}, pods=pods)


def bare(workload: str = "web") -> ClaimDecision:
    return ClaimDecision(workload=workload, contract="T1", kind="deployment", source="k8s",
                         requests={}, largest_pod={}, pods=0)


@pytest.mark.parametrize(("replicas", "percentage", "pods", "want"), [
    (3, 0, 0, 3),      # replicas alone, at zero demand
    (0, 10, 42, 5),    # ⌈10% × 42⌉ = ⌈4.2⌉
    (2, 10, 42, 5),    # the larger of the two
    (6, 10, 42, 6),
    (0, 50, 0, 0),     # a percentage of no pods
    (0, 20, 5, 1),     # exactly 1, not 2 (no float drift)
])
def test_desired_is_the_larger_of_replicas_and_the_percentage_rounded_up(
        replicas: int, percentage: float, pods: int, want: int) -> None:
    buffer = Buffer("web", replicas=replicas, percentage=percentage)
    assert desired(buffer, POD, pods, NOON) == want


def test_limits_cap_the_chunks_by_count_and_by_summed_resources() -> None:
    assert desired(Buffer("web", replicas=9, limits=Limits(units=4)), POD, 0, NOON) == 4
    # 20 vCPU hold five 4-vCPU chunks; 40 GiB hold two 16 GiB ones
    by_cpu = Buffer("web", replicas=9, limits=Limits(resources={"cpu": 20000}))
    assert desired(by_cpu, POD, 0, NOON) == 5
    both = Buffer("web", replicas=9, limits=Limits(resources={"cpu": 20000,
                                                              "memory": 40 * GIB}))
    assert desired(both, POD, 0, NOON) == 2


def test_outside_its_window_a_buffer_is_zero_in_its_time_zone() -> None:
    # 08:00-18:00 in Europe/Berlin (UTC+1 in December): 07:00-17:00 UTC
    office = Buffer("web", replicas=3, schedule=parse_cron("0 8 * * *"), duration=10 * 3600,
                    time_zone="Europe/Berlin")
    at = {h: desired(office, POD, 0, NOON.replace(hour=h)) for h in (6, 7, 16, 17)}
    assert at == {6: 0, 7: 3, 16: 3, 17: 0}
    assert in_window(Buffer("web", replicas=1), NOON)


def test_a_buffer_of_the_largest_pod_without_any_pod_seen_wants_nothing() -> None:
    assert desired(Buffer("web", replicas=3), None, 0, NOON) == 0
    # and writes no claim for it (an empty one would be a claim of nothing)
    assert with_buffers([], [Buffer("web", replicas=3)], {"web": bare()}, {}, NOON) == ()


def test_the_buffer_joins_its_workloads_claim_and_keeps_the_pod_count() -> None:
    (out,) = with_buffers([claim(2)], [Buffer("web", replicas=3)], {}, {}, NOON)
    assert out.requests == {"cpu": 5 * 4000, "memory": 5 * 16 * GIB}
    assert out.largest_pod == POD and out.pods == 2


def test_at_zero_demand_the_buffer_is_the_claim_of_the_stored_largest_pod() -> None:
    (out,) = with_buffers([bare()], [Buffer("web", replicas=3)], {}, {"web": POD}, NOON)
    assert out.requests == {"cpu": 12000, "memory": 48 * GIB} and out.pods == 0
    # a workload with no claim this pass starts from its bare claim
    (fresh,) = with_buffers([], [Buffer("web", replicas=3)], {"web": bare()}, {"web": POD},
                            NOON)
    assert fresh.requests == out.requests


def test_a_chunk_of_its_own_grows_the_largest_pod_so_the_flavor_holds_it() -> None:
    gpu = Buffer("web", chunk={"cpu": 8000, "nvidia.com/gpu": 1}, replicas=2)
    (out,) = with_buffers([claim(1)], [gpu], {}, {}, NOON)
    assert out.requests == {"cpu": 4000 + 16000, "memory": 16 * GIB, "nvidia.com/gpu": 2}
    assert out.largest_pod == {"cpu": 8000, "memory": 16 * GIB, "nvidia.com/gpu": 1}


def test_other_workloads_claims_pass_unchanged_and_in_order() -> None:
    claims = [claim(1, "api"), claim(2, "web"), claim(3, "zed")]
    out = with_buffers(claims, [Buffer("web", replicas=1)], {}, {}, NOON)
    assert [c.workload for c in out] == ["api", "web", "zed"]
    assert out[0] == claims[0] and out[2] == claims[2] and out[1].requests["cpu"] == 12000
    # outside the window the claim is the pods' alone
    closed = Buffer("web", replicas=1, schedule=parse_cron("0 0 1 1 *"), duration=60)
    assert with_buffers(claims, [closed], {}, {}, NOON) == tuple(claims)


def test_held_counts_whole_chunks_of_ready_allocatable_beyond_the_pods() -> None:
    unit = {"cpu": 8000, "memory": 32 * GIB}  # holds two chunks
    # claim of 1 pod + 3 chunks; two units: 16 vCPU, 4 used by the pod -> 3 chunks held
    requests = {"cpu": 4 * 4000, "memory": 4 * 16 * GIB}
    assert held(POD, 3, requests, [unit, unit]) == 3
    assert held(POD, 3, requests, [unit]) == 1
    assert held(POD, 3, requests, []) == 0
    assert held(None, 3, requests, [unit]) == 0
    # never more than desired
    assert held(POD, 1, {"cpu": 4000, "memory": 16 * GIB}, [unit, unit, unit]) == 1


def test_buffer_states_report_desired_held_and_short() -> None:
    unit = {"cpu": 8000, "memory": 32 * GIB}
    states = buffer_states([Buffer("web", replicas=3), Buffer("api", replicas=1)],
                           {"web": (0, {"cpu": 12000, "memory": 48 * GIB}, POD)},
                           {"web": [unit, unit]}, NOON)
    assert [(s.workload, s.desired, s.held, s.short) for s in states] == [
        ("web", 3, 3, False), ("api", 0, 0, False)]
    (short,) = buffer_states([Buffer("web", replicas=3)],
                             {"web": (0, {"cpu": 12000, "memory": 48 * GIB}, POD)},
                             {"web": [unit]}, NOON)
    assert (short.desired, short.held, short.short) == (3, 2, True)


def test_short_reports_an_unmet_buffer_past_the_grace_once() -> None:
    from scoctl.core.buffers import BufferState, short

    unmet, met = BufferState("web", 3, 1, POD), BufferState("api", 2, 2, POD)
    ages = {"web": (4, 400.0), "api": (1, 900.0)}
    assert short([unmet, met], ages, [], 300) == (
        ("web", {"desired": 3, "held": 1, "claim_version": 4}),)
    assert short([unmet], {"web": (4, 10.0)}, [], 300) == ()   # still within the grace
    assert short([unmet], ages, ["web"], 300) == ()            # already reported
    assert short([unmet], {}, [], 300) == ()                   # no claim: nothing planned yet


def test_a_claim_without_pods_keeps_the_largest_pod_outside_the_window() -> None:
    closed = Buffer("web", replicas=3, schedule=parse_cron("0 0 1 1 *"), duration=60)
    (out,) = with_buffers([bare()], [closed], {}, {"web": POD}, NOON)
    assert (out.requests, out.largest_pod, out.pods) == ({}, POD, 0)
    opened = NOON.replace(month=1, day=1, hour=0)
    (back,) = with_buffers([bare()], [closed], {}, {"web": out.largest_pod}, opened)
    assert back.requests == {"cpu": 12000, "memory": 48 * GIB}
