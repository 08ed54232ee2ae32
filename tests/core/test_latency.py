"""Placement latency, pure: sightings, their observations, histograms and quantiles."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.latency import (
    all_ready,
    cumulative,
    first_sight,
    observe,
    progress,
    quantile,
    sight,
)
from scoctl.core.model import Histogram, Sighting
from scoctl.core.model.latency import BUCKETS, DECISION, READY


def test_growth_opens_a_sighting_and_keeps_the_earliest_first_sight() -> None:
    first = sight(None, "orders", 3, grew=True, seen=100.0)
    assert first == Sighting("orders", 3, 100.0)
    again = sight(first, "orders", 4, grew=True, seen=101.0)
    assert again == Sighting("orders", 4, 100.0)  # still waiting: the older sight counts


def test_a_shrink_opens_nothing_and_growth_after_the_plan_starts_anew() -> None:
    assert sight(None, "orders", 2, grew=False, seen=5.0) is None
    planned = Sighting("orders", 3, 100.0, planned=101.0)
    assert sight(planned, "orders", 4, grew=True, seen=120.0) == Sighting("orders", 4, 120.0)


def test_a_plan_of_the_version_closes_the_decision_and_ready_nodes_the_whole_wait() -> None:
    s = Sighting("orders", 3, 100.0)
    early = progress([s], {"orders": 2}, {}, 100.5, give_up=1200)
    assert early.observations == () and early.keep == () and early.drop == ()
    decided = progress([s], {"orders": 3}, {"orders": False}, 101.2, give_up=1200)
    assert [(o.metric, round(o.seconds, 3)) for o in decided.observations] == [(DECISION, 1.2)]
    assert decided.keep == (Sighting("orders", 3, 100.0, planned=101.2),)
    done = progress(decided.keep, {"orders": 3}, {"orders": True}, 130.0, give_up=1200)
    assert [(o.metric, o.seconds) for o in done.observations] == [(READY, 30.0)]
    assert done.drop == ("orders",)


def test_nodes_already_ready_close_both_at_once_and_stale_sightings_are_dropped() -> None:
    both = progress([Sighting("a", 1, 10.0)], {"a": 1}, {"a": True}, 11.0, give_up=60)
    assert [o.metric for o in both.observations] == [DECISION, READY] and both.drop == ("a",)
    stale = progress([Sighting("b", 1, 0.0, planned=1.0), Sighting("c", 2, 0.0)],
                     {"b": 1}, {"b": False}, 61.0, give_up=60)
    assert stale.observations == () and set(stale.drop) == {"b", "c"}
    gone = progress([Sighting("d", 1, 0.0, planned=1.0)], {}, {}, 2.0, give_up=60)
    assert gone.drop == ("d",)


def test_all_ready_needs_every_planned_unit() -> None:
    assert all_ready(2, ["ready", "ready", "building"])
    assert not all_ready(3, ["ready", "ready", "building"])
    assert not all_ready(0, [])


@given(st.lists(st.floats(min_value=0.0, max_value=5000.0), max_size=60))
def test_histogram_counts_every_observation_in_the_first_bucket_that_holds_it(values) -> None:
    h = Histogram()
    for v in values:
        h = observe(h, v)
    pairs = cumulative(h)
    assert pairs[-1] == ("+Inf", len(values)) and h.count == len(values)
    for (le, n) in pairs[:-1]:
        assert n == sum(1 for v in values if v <= float(le))
    assert [le for le, _ in pairs[:-1]] == [repr(b) for b in BUCKETS]
    assert abs(h.total - sum(values)) < 1e-6


def test_quantiles_by_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert quantile(values, 0.5) == 50.0 and quantile(values, 0.99) == 99.0
    assert quantile([], 0.5) is None and quantile([3.0], 0.99) == 3.0


def test_new_demand_begins_at_the_earliest_pod_made_since_the_claims_previous_version() -> None:
    # pods at 100 and 130 were in the previous version (written at 140); 150 and 160 are new
    assert first_sight([100.0, 130.0, 160.0, 150.0], since=140.0, now=170.0) == 150.0
    assert first_sight([100.0, 130.0], since=None, now=170.0) == 100.0  # a first claim
    assert first_sight([100.0], since=140.0, now=170.0) is None  # nothing says: own sight
    assert first_sight([], since=None, now=170.0) is None
    assert first_sight([175.0], since=None, now=170.0) == 170.0  # the API server runs ahead
