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


def test_disruption_decisions_add_up_across_passes_and_eligible_units_are_this_pass(store):
    from scoctl.core.disruption import Blocked, Disruption
    from scoctl.core.model.disruption import DEFAULT_BUDGETS
    from scoctl.core.model.vocabulary import DisruptionReason as R
    from scoctl.core.reconcile import Decision
    from scoctl.services.metrics import disruption_sample

    def unit(n: int, reason: R, replace: bool) -> Disruption:
        return Disruption(f"s-{n}", f"n-{n}", "web", "p", reason, replace)

    first = Decision(started=(unit(1, R.EMPTY, False), unit(2, R.DRIFTED, True)),
                     blocked=(Blocked(unit(3, R.EMPTY, False), DEFAULT_BUDGETS[0]),))
    started, eligible = disruption_sample([first])
    collect(store, RunSample(disruptions=started, eligible=eligible))
    second = Decision(paused=(unit(3, R.EMPTY, False),))
    started, eligible = disruption_sample([Decision(started=(unit(3, R.EMPTY, False),)),
                                           second])
    text = collect(store, RunSample(disruptions=started, eligible=eligible))

    total = "scoctl_voluntary_disruption_decisions_total"
    assert f'{total}{{decision="delete",reason="empty",workload="web"}} 2' in text
    assert f'{total}{{decision="replace",reason="drifted",workload="web"}} 1' in text
    eligible_line = 'scoctl_voluntary_disruption_eligible_units{reason="empty",workload="web"} 2'
    assert eligible_line in text  # this pass: one started, one held by the pause
    assert "drifted" not in text.split("scoctl_voluntary_disruption_eligible_units", 1)[1]
    assert store.metric_counters().disruptions == {("web", "empty", "delete"): 2,
                                                   ("web", "drifted", "replace"): 1}


def test_the_paused_gauge_follows_the_pause(store):
    from datetime import timedelta

    from scoctl.clock import SystemClock
    from scoctl.core.model.vocabulary import PauseScope
    from scoctl.services import controls

    now = SystemClock().now()
    controls.pause(store, [PauseScope.LAUNCHES], now=now, until=now + timedelta(minutes=2),
                   reason="x", author="op")
    text = collect(store, RunSample(now=now + timedelta(minutes=1)))
    assert 'scoctl_paused{scope="launches"} 1' in text
    assert 'scoctl_paused{scope="disruptions"} 0' in text
    later = collect(store, RunSample(now=now + timedelta(minutes=3)))
    assert 'scoctl_paused{scope="launches"} 0' in later


def test_the_cost_counter_adds_what_each_pass_accrued(store):
    collect(store, RunSample(cost={}, cost_at=100.0))  # the first write starts the count
    collect(store, RunSample(cost={"web": 0.25}, cost_at=200.0))
    text = collect(store, RunSample(cost={"web": 0.5, "api": 1.0}, cost_at=300.0,
                                    efficiency={("web", "cpu"): 0.42}))
    assert 'scoctl_workload_cost_total{workload="web"} 0.75' in text
    assert 'scoctl_workload_cost_total{workload="api"} 1.0' in text
    assert 'scoctl_workload_efficiency_ratio{resource="cpu",workload="web"} 0.42' in text
    assert store.metric_counters().cost_at == 300.0
