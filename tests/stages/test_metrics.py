"""Metrics counters survive between runs in the state and add up pass after pass."""

from __future__ import annotations

from scoctl.core.model import MetricCounters
from scoctl.services.metrics import RunSample, collect


def test_counters_add_up_across_passes_and_the_last_success_outlives_a_failed_pass(store):
    collect(store, RunSample(calls={("region-a", "ok"): 3}, tokens_spent={"region-a": 3},
                             succeeded_at=1767225600.0))
    text = collect(store, RunSample(calls={("region-a", "ok"): 2, ("region-a", "quota"): 1},
                                    tokens_spent={"region-a": 3}))

    assert 'scoctl_cloud_calls_total{outcome="ok",region="region-a"} 5' in text
    assert 'scoctl_cloud_calls_total{outcome="quota",region="region-a"} 1' in text
    assert 'scoctl_budget_tokens_spent_total{region="region-a"} 6' in text
    assert "scoctl_last_success_timestamp_seconds 1767225600.0" in text
    assert store.metric_counters() == MetricCounters(
        cloud_calls={("region-a", "ok"): 5, ("region-a", "quota"): 1},
        tokens_spent={"region-a": 6}, last_success=1767225600.0)


def test_the_leader_gauge_says_which_regions_this_runner_leads(store):
    text = collect(store, RunSample(leader={"region-a": True, "region-b": False}))

    assert "# TYPE scoctl_leader gauge" in text
    assert 'scoctl_leader{region="region-a"} 1' in text
    assert 'scoctl_leader{region="region-b"} 0' in text
