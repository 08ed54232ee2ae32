"""The plan/fleet diff (pure): gaining pools, quota clamp, surplus."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.acquire import LaunchSnapshot, decide_launches
from scoctl.core.diff import (
    clamp_to_headroom,
    diff_plan,
    launches_needed,
    surplus,
)
from scoctl.core.model import Flavor, Headroom, PlanUnitRecord, PlanWorkloadRecord, Pool

GI = 2**30
POOLS = {name: Pool(name, "r1", "az1", "c16", "g1", "reclaimable", 50) for name in "abc"}
FLAVORS = {"c16": Flavor("c16", 16, 64 * GI)}


def test_only_pools_that_gain_units_get_a_launch_of_the_gain():
    launches = diff_plan({"w": {"a": 3, "b": 2, "c": 1}}, {("w", "a"): 1, ("w", "b"): 2,
                                                          ("w", "c"): 4}, POOLS, {"w": 7})
    assert [(p.pool, p.count, p.generation) for p in launches] == [("a", 2, 7)]


def test_slurm_claims_launch_one_instance_per_waiting_node_name():
    launches = launches_needed({"hpc": {"a": 2, "b": 1}}, {}, POOLS, {"hpc": 1},
                               claim_nodes={"hpc": ["n1", "n2", "n3"]},
                               held_nodes={"hpc": {"n2"}})
    assert [(p.pool, p.count, p.node_names) for p in launches] == [
        ("a", 1, ("n1",)), ("a", 1, ("n3",))]


def test_a_slurm_claim_whose_nodes_are_all_held_launches_nothing():
    assert launches_needed({"hpc": {"a": 2}}, {}, POOLS, {"hpc": 1},
                           claim_nodes={"hpc": ["n1"]}, held_nodes={"hpc": {"n1"}}) == []


def test_a_slurm_claim_with_no_node_named_yet_launches_nothing():
    """design: Operating/Gangs: a pending job's claim is planned, but its servers wait for the names
    Slurm resumes (an unnamed server's slurmd could register under no node)."""
    plans = {"hpc": PlanWorkloadRecord("hpc", 1, 1, "T2", None, True, False, (),
                                       (PlanUnitRecord("a", "reclaimable", "g1", 4, 1.0, 0.9),))}
    snapshot = LaunchSnapshot(plans=plans, claim_nodes={"hpc": ()}, pools=POOLS)
    assert decide_launches(snapshot) == []
    named = replace(snapshot, claim_nodes={"hpc": ("n1", "n2", "n3", "n4")})
    assert [p.node_names for p in decide_launches(named)] == [("n1",), ("n2",), ("n3",),
                                                              ("n4",)]
    # a Kubernetes claim (not in claim_nodes) launches unnamed units as planned
    assert [p.count for p in decide_launches(replace(snapshot, claim_nodes={}))] == [4]


def test_the_quota_clamp_shrinks_launches_in_order_and_names_the_limit():
    launches = diff_plan({"w": {"a": 3, "b": 3}}, {}, POOLS, {"w": 1})
    kept, short = clamp_to_headroom(launches, FLAVORS,
                                    Headroom(instances=None, cores=64, ram_mb=None))
    assert [(p.pool, p.count) for p in kept] == [("a", 3), ("b", 1)]
    assert [(s.pool, s.wanted, s.allowed, s.limit) for s in short] == [("b", 3, 1, "cores")]


def test_surplus_is_what_live_units_hold_above_the_plan():
    assert surplus({"w": {"a": 1}}, {("w", "a"): 3, ("w", "b"): 1, ("v", "a"): 0}) == {
        ("w", "a"): 2, ("w", "b"): 1}


@given(st.dictionaries(st.sampled_from("abc"), st.integers(0, 20), min_size=1),
       st.dictionaries(st.sampled_from("abc"), st.integers(0, 20)),
       st.integers(0, 200))
def test_clamped_launches_never_exceed_the_headroom_or_the_gain(target, live, cores):
    launches = diff_plan({"w": target}, {("w", p): n for p, n in live.items()}, POOLS, {})
    kept, _ = clamp_to_headroom(launches, FLAVORS, Headroom(None, cores, None))
    assert sum(p.count for p in kept) * 16 <= cores
    for p in kept:
        assert 0 < p.count <= target[p.pool] - live.get(p.pool, 0)
