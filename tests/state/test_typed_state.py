"""The typed tables that replaced schema 1's JSON under string keys: each round-trips values."""

from __future__ import annotations

from scoctl.core.model import MetricCounters, RankingCache, TokenRecord


def test_dirty_marks_keep_the_latest_reason_and_clear_by_name(store):
    store.mark_dirty(["a", "b"], "units lost")
    store.mark_dirty(["b", "c"], "pool excluded")
    store.mark_dirty([], "nothing")
    assert store.dirty() == {"a": "units lost", "b": "pool excluded", "c": "pool excluded"}
    store.clear_dirty({"a", "c", "never-marked"})
    assert store.dirty() == {"b": "pool excluded"}


def test_the_last_scores_are_replaced_whole(store):
    assert store.last_scores() == {}
    store.save_last_scores({"p1": 0.91, "p2": 0.5})
    store.save_last_scores({"p2": 0.25, "p3": 1})
    assert store.last_scores() == {"p2": 0.25, "p3": 1.0}


def test_the_last_good_ranking_round_trips_and_is_replaced(store):
    assert store.last_good_ranking() is None
    first = RankingCache(url="http://127.0.0.1:1/r", id="r-1", fetched="2026-01-01T00:00:00Z",
                         scores={"p1": 0.9, "p2": 0.1})
    store.save_last_good_ranking(first)
    assert store.last_good_ranking() == first
    second = RankingCache(url="http://127.0.0.1:2/r", id="r-2", fetched="2026-01-02T00:00:00Z",
                          scores={"p3": 0.7})
    store.save_last_good_ranking(second)
    assert store.last_good_ranking() == second


def test_orphan_sightings_are_kept_per_region(store):
    store.save_orphans_seen("region-a", {"s1": "2026-01-01T00:00:00Z", "s2": "2026-01-01T00:01Z"})
    store.save_orphans_seen("region-b", {"s9": "2026-01-03T00:00:00Z"})
    store.save_orphans_seen("region-a", {"s2": "2026-01-01T00:01Z"})
    assert store.orphans_seen("region-a") == {"s2": "2026-01-01T00:01Z"}
    assert store.orphans_seen("region-b") == {"s9": "2026-01-03T00:00:00Z"}
    assert store.orphans_seen("region-c") == {}


def test_suspended_nodes_are_a_set_marked_and_cleared_by_name(store):
    store.mark_suspended(["n1", "n2"])
    store.mark_suspended(["n2", "n3"])
    store.clear_suspended(["n1", "unknown"])
    assert store.suspended_nodes() == frozenset({"n2", "n3"})


def test_node_shapes_are_replaced_per_node(store):
    store.save_node_shapes({"n1": {"cpu": 4000, "memory": 2**34, "nvidia.com/gpu": 1},
                            "n2": {"cpu": 8000, "memory": 2**35}})
    store.save_node_shapes({"n1": {"cpu": 2000, "memory": 2**33}})
    assert store.node_shapes() == {"n1": {"cpu": 2000, "memory": 2**33},
                                   "n2": {"cpu": 8000, "memory": 2**35}}


def test_metric_counters_start_at_zero_and_round_trip(store):
    assert store.metric_counters() == MetricCounters()
    counters = MetricCounters(cloud_calls={("region-a", "ok"): 7, ("region-a", "quota"): 1},
                              tokens_spent={"region-a": 8}, last_success=1767225600.5)
    store.save_metric_counters(counters)
    assert store.metric_counters() == counters
    store.save_metric_counters(MetricCounters(cloud_calls={("region-b", "ok"): 1}))
    assert store.metric_counters() == MetricCounters(cloud_calls={("region-b", "ok"): 1})


def test_the_state_has_no_key_value_table(store):
    tables = {name for (name,) in store.conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "kv" not in tables
    assert {"plan_dirty", "ranking_last_scores", "ranking_last_good", "orphans_seen",
            "slurm_suspended", "slurm_node_shapes", "metric_cloud_calls", "metric_tokens_spent",
            "run_last_success"} <= tables


def test_save_token_saves_the_decision_it_is_given_and_decides_nothing(store):
    row = store.ensure_workload("orders", kind="deployment", source="k8s", contract="T1")
    # POD_QUEUED alone would mean "queued": the store takes the record's status as decided
    saved = store.save_token(TokenRecord(workload="orders", token="POD_QUEUED", level="info",
                                         detail={"why": "test"}, workload_id=row.id,
                                         status="running", update_row=True,
                                         last_queued_reason="r"))
    assert saved is not None
    assert (saved.status, saved.last_token, saved.last_queued_reason) == ("running",
                                                                          "POD_QUEUED", "r")
    logged = store.save_token(TokenRecord(workload="orders", token="NOTE", level="warning",
                                          workload_id=row.id, status="running"))
    assert logged == saved  # without update_row the row is untouched
    assert store.save_token(TokenRecord(workload="ghost", token="NOTE", level="info")) is None
    events = [(e.workload, e.token, e.level, e.status) for e in store.events()]
    assert events == [("orders", "POD_QUEUED", "info", "running"),
                      ("orders", "NOTE", "warning", "running"), ("ghost", "NOTE", "info", None)]
