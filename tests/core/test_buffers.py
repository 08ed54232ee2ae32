"""Capacity buffers (design: Buffers): desired chunks, windows, the claim that holds them, held."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from scoctl.core.buffers import (
    buffer_states,
    desired,
    held,
    in_window,
    tier_refusal,
    with_buffers,
)
from scoctl.core.cron import parse_cron
from scoctl.core.intake.common import ClaimDecision
from scoctl.core.model.buffers import Buffer, BufferTier
from scoctl.core.model.pools import (
    TIERS,
    Claim,
    Contract,
    Flavor,
    Limits,
    Pool,
    Tier,
    part_name,
)
from scoctl.core.model.vocabulary import PartSource
from scoctl.core.planner import WorkloadPlan, plan_workload

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
    unit: tuple[Tier, dict[str, int]] = ("committed", {"cpu": 8000, "memory": 32 * GIB})
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


# --- the buffer's part of the claim and its tier (design: Buffers; parts as in Constraints)
# ----------------

FLAVORS = {"c16": Flavor("c16", 16, 64 * GIB)}  # holds four 4-vCPU / 16 GiB pods
POOLS = tuple(Pool(f"{tier[:4]}-{i}", "region-a", f"az{i}", "c16", f"row-{i}", tier, 10)
              for tier in TIERS for i in (1, 2))
COMMITTED = {p.name for p in POOLS if p.tier == "committed"}
RECLAIMABLE = {p.name for p in POOLS if p.tier == "reclaimable"}
LOOSE = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
SPOT_FIRST = {p.name: 0.9 if p.tier == "reclaimable" else 0.5 for p in POOLS}


def planned(decision: ClaimDecision, contract: Contract = LOOSE) -> WorkloadPlan:
    claim = Claim(decision.workload, decision.contract, dict(decision.requests),
                  dict(decision.largest_pod), pods=decision.pods,
                  tolerates_reclaimable=decision.tolerates_reclaimable,
                  ineligible=dict(decision.ineligible), parts=decision.parts)
    return plan_workload(claim, contract, POOLS, FLAVORS, SPOT_FIRST, {}, {}, explain=True)


def test_the_buffer_is_a_part_of_its_own_after_the_pods_with_source_buffer() -> None:
    (out,) = with_buffers([claim(2)], [Buffer("web", replicas=3)], {}, {}, NOON, POOLS)
    pods, buffer = out.parts
    assert (pods.source, pods.pods, pods.requests) == (PartSource.PODS, 2, claim(2).requests)
    assert (buffer.source, buffer.pods, buffer.largest_pod) == (PartSource.BUFFER, 3, POD)
    assert buffer.requests == {"cpu": 3 * 4000, "memory": 3 * 16 * GIB}
    assert buffer.ineligible == {}  # tier any: every pool the pods may use
    assert part_name("web", 2, buffer) == "web/buffer" and part_name("web", 1, pods) == "web/1"
    # pods that are parts already keep them; the buffer comes after; at zero pods it is alone
    split = replace(claim(2), parts=(pods, pods))
    (kept,) = with_buffers([split], [Buffer("web", replicas=3)], {}, {}, NOON, POOLS)
    assert kept.parts[:2] == (pods, pods) and kept.parts[2].source == PartSource.BUFFER
    (alone,) = with_buffers([bare()], [Buffer("web", replicas=3)], {}, {"web": POD}, NOON, POOLS)
    assert [p.source for p in alone.parts] == [PartSource.BUFFER]


def test_a_buffers_tier_rules_out_the_other_tiers_pools_naming_it() -> None:
    committed = Buffer("web", replicas=3, tier="committed")
    (out,) = with_buffers([claim(2)], [committed], {}, {}, NOON, POOLS)
    assert out.parts[-1].ineligible == dict.fromkeys(
        sorted(RECLAIMABLE), "tier committed (the pool is reclaimable)")
    # a pool the pods rule out keeps the pods' reason (the claim's, for every part)
    pinned = replace(claim(2), ineligible={"recl-1": "nodeSelector zone=az2"})
    (out,) = with_buffers([pinned], [Buffer("web", replicas=3, tier="reclaimable")], {}, {},
                          NOON, POOLS)
    assert set(out.parts[-1].ineligible) == COMMITTED
    assert tier_refusal("any", POOLS[0]) is None and tier_refusal("committed", POOLS[0]) is None


@pytest.mark.parametrize(("tier", "pools"), [("committed", COMMITTED),
                                             ("reclaimable", RECLAIMABLE),
                                             ("any", RECLAIMABLE)])  # the better-ranked ones
def test_a_buffer_at_zero_pods_is_planned_in_the_pools_of_its_tier_only(
        tier: BufferTier, pools: set[str]) -> None:
    (out,) = with_buffers([bare()], [Buffer("web", replicas=3, tier=tier)], {}, {"web": POD},
                          NOON, POOLS)
    plan = planned(out)
    assert plan.feasible and not plan.degraded and plan.coverage >= 1 - 1e-9
    assert plan.units() and set(plan.units()) <= pools, plan.units()


def test_beside_its_pods_a_committed_buffer_holds_committed_units_under_the_same_limits() -> None:
    # 8 pods on the better-ranked reclaimable pools, and 4 chunks (one unit) that must be
    # committed: the plan is their sum
    (out,) = with_buffers([claim(8)], [Buffer("web", replicas=4, tier="committed")], {}, {},
                          NOON, POOLS)
    plan = planned(out)
    committed = sum(n for p, n in plan.units().items() if p in COMMITTED)
    assert committed == 1 and sum(plan.units().values()) == 3, plan.units()
    assert plan.feasible and not plan.degraded
    # without a tier the same buffer takes the reclaimable pools as the pods do
    (anywhere,) = with_buffers([claim(8)], [Buffer("web", replicas=4)], {}, {}, NOON, POOLS)
    assert set(planned(anywhere).units()) <= RECLAIMABLE
    # the workload's limits bind the parts together: 2 units for 3 units' worth
    limited = plan_workload(
        Claim("web", "T1", dict(out.requests), dict(out.largest_pod), pods=8, parts=out.parts,
              limits=Limits(units=2)), LOOSE, POOLS, FLAVORS, SPOT_FIRST, {}, {})
    assert sum(limited.units().values()) == 2 and limited.degraded
    assert any("LIMIT_REACHED" in r for r in limited.reasons), limited.reasons


def test_a_buffer_whose_tier_leaves_no_pool_is_planned_nowhere_and_the_plan_says_why() -> None:
    # the pods may run on committed pools only; a reclaimable buffer has nowhere to go
    pinned = replace(claim(4), ineligible=dict.fromkeys(sorted(RECLAIMABLE),
                                                        "nodeSelector sco/tier=committed"))
    (out,) = with_buffers([pinned], [Buffer("web", replicas=4, tier="reclaimable")], {}, {},
                          NOON, POOLS)
    buffer = out.parts[-1]
    assert buffer.source == PartSource.BUFFER and buffer.requests  # kept, not dropped
    assert {**out.ineligible, **buffer.ineligible}.keys() == {p.name for p in POOLS}
    assert set(buffer.ineligible.values()) == {"tier reclaimable (the pool is committed)"}
    plan = planned(out)
    # the pods' one unit, nothing for the buffer: the pods' plan holds, degraded, with why
    assert plan.units() == {"comm-1": 1} and plan.feasible and plan.degraded, plan
    (why,) = [r for r in plan.reasons if "web/buffer" in r]
    assert why.startswith("no eligible pool") and "web/buffer: 4 chunks" in why
    assert "the buffer's tier reclaimable (the pool is committed) rules it out" in why
    # --explain: at zero pods each pool says why the buffer may not use it
    (alone,) = with_buffers([replace(bare(), ineligible=pinned.ineligible)],
                            [Buffer("web", replicas=4, tier="reclaimable")], {}, {"web": POD},
                            NOON, POOLS)
    lines = {line.pool: line.reason for line in planned(alone).explain}
    assert lines["comm-1"] == ("web/buffer: the buffer's tier reclaimable (the pool is "
                               "committed) rules it out")
    assert lines["recl-1"] == ("web/buffer: the buffer's nodeSelector sco/tier=committed "
                               "rules it out")  # the pods' constraint is the buffer's too
    # a pod part with no pool at all is still infeasible, as before
    nowhere = replace(out, ineligible={p.name: "nodeSelector x=y" for p in POOLS})
    assert not planned(nowhere).feasible


def test_held_counts_only_the_units_of_the_buffers_tier() -> None:
    unit = {"cpu": 8000, "memory": 32 * GIB}  # two chunks each
    units: list[tuple[Tier, dict[str, int]]] = [("committed", unit), ("reclaimable", unit),
                                                ("reclaimable", unit)]
    claims = {"web": (1, {"cpu": 4 * 4000, "memory": 4 * 16 * GIB}, POD)}  # 1 pod + 3 chunks

    def held_of(tier: BufferTier) -> int:
        (state,) = buffer_states([Buffer("web", replicas=3, tier=tier)], claims,
                                 {"web": units}, NOON)
        return state.held

    assert held_of("any") == 3            # 24 vCPU less the pod's 4: three chunks
    assert held_of("committed") == 2      # one committed unit: two chunks at most
    assert held_of("reclaimable") == 3
    # the pods are counted on the other tiers' units first; beyond them, on the tier's
    assert held(POD, 3, {"cpu": 4 * 4000, "memory": 4 * 16 * GIB}, [unit, unit], [unit]) == 2
    assert held(POD, 3, {"cpu": 6 * 4000, "memory": 6 * 16 * GIB}, [unit, unit], [unit]) == 1
