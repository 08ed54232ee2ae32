"""The plan stage: incremental re-planning, generations, ranking sources, the CLI contract."""

from __future__ import annotations

import http.server
import json
import textwrap
import threading
from pathlib import Path

import pytest

from scoctl.clock import FixedClock
from scoctl.config.schema import load_config
from scoctl.errors import ApiError
from scoctl.services.claims import record_claim
from scoctl.stages.plan import run_plan
from scoctl.state import Store, open_store

GI = 2**30


def write_config(tmp_path: Path, *, ranking: str | None = None, contract: str = "") -> Path:
    pools, scores = [], {}
    for g in range(5):
        for f, (flavor, depth) in enumerate([("c16", 8), ("c8", 8)]):
            name = f"{flavor}.g{g}.spot"
            pools.append(f"  - {{name: {name}, region: r1, az: az{g % 2}, flavor: {flavor}, "
                         f"group: g{g}, tier: reclaimable, depth: {depth}}}")
            scores[name] = round(0.9 - g * 0.03 - f * 0.01, 3)
    for g in range(2):
        name = f"c16.g{g}.res"
        pools.append(f"  - {{name: {name}, region: r1, az: az{g}, flavor: c16, group: g{g}, "
                     f"tier: committed, depth: 3}}")
        scores[name] = 0.95
    ranking = ranking or "ranking: {id: r-1, scores: " + json.dumps(scores) + "}"
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent("""\
        state: {state}
        regions:
          - name: r1
            launch: {{image: img, networks: [net]}}
        flavors:
          - {{name: c16, vcpus: 16, ram: 64Gi}}
          - {{name: c8, vcpus: 8, ram: 32Gi}}
        node_reserve: {{cpu: 0, memory: 0}}
        contracts:
          T1: {{floor: 0.30, pool_cap: 0.25, group_cap: 0.40, min_pools: 3{contract}}}
        """).format(state=tmp_path / "state.db", contract=contract)
        + "pools:\n" + "\n".join(pools) + "\n" + ranking + "\n")
    return path


def put(store: Store, name: str, cpu: int, pods: int = 1) -> None:
    record_claim(store, name, contract="T1", requests={"cpu": cpu * 1000, "memory": cpu * 4 * GI},
                    largest_pod={"cpu": 4000, "memory": 16 * GI}, pods=pods, source="k8s")


@pytest.fixture
def setup(tmp_path, make_store):
    config = load_config(write_config(tmp_path))
    clock = FixedClock()
    return config, make_store(clock), clock


def test_a_first_plan_commits_one_generation_for_every_claim(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    put(store, "beta", 32)
    result = run_plan(config, store, clock)
    assert result.committed and result.changed == ("alpha", "beta")
    plans = store.plans()
    assert set(plans) == {"alpha", "beta"}
    assert all(p.generation == result.generation for p in plans.values())
    assert store.latest_generation().ranking == "r-1"


def test_an_unchanged_claim_is_not_replanned_and_no_generation_is_written(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    first = run_plan(config, store, clock)
    again = run_plan(config, store, clock)
    assert not again.committed and again.changed == ()
    assert again.generation == first.generation


def test_a_change_to_one_claim_rewrites_only_that_workloads_rows(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    put(store, "beta", 32)
    first = run_plan(config, store, clock)
    put(store, "beta", 48)
    second = run_plan(config, store, clock)
    plans = store.plans()
    assert second.changed == ("beta",)
    assert plans["alpha"].generation == first.generation
    assert plans["beta"].generation == second.generation > first.generation


def test_an_exclusion_of_an_eligible_pool_replans_the_workloads_that_use_it(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    run_plan(config, store, clock)
    used = [u.pool for u in store.plans()["alpha"].pools if u.tier == "reclaimable"][0]
    store.exclude(used, "NoValidHost", "2099-01-01T00:00:00.000000Z")
    result = run_plan(config, store, clock)
    assert result.changed == ("alpha",)
    assert used not in {u.pool for u in store.plans()["alpha"].pools}


def test_a_dirty_workload_is_replanned_with_its_reason(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    run_plan(config, store, clock)
    store.mark_dirty({"alpha"}, "units lost")
    result = run_plan(config, store, clock)
    assert result.changed == ("alpha",) and result.reasons_for_change["alpha"] == "units lost"
    assert run_plan(config, store, clock).changed == ()


def test_a_removed_claim_drops_its_plan(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    run_plan(config, store, clock)
    store.conn.execute("DELETE FROM claims WHERE workload = 'alpha'")
    result = run_plan(config, store, clock)
    assert result.changed == ("alpha",) and "alpha" not in store.plans()


def test_a_dry_run_writes_nothing(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    result = run_plan(config, store, clock, dry_run=True)
    assert not result.committed and result.records
    assert store.latest_generation() is None and store.plans() == {}


def test_a_dry_run_names_the_generation_it_would_commit(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    assert run_plan(config, store, clock, dry_run=True).generation == 1  # an empty state
    first = run_plan(config, store, clock)
    put(store, "alpha", 128)
    dry = run_plan(config, store, clock, dry_run=True)
    assert (first.generation, dry.generation) == (1, 2) and not dry.committed
    assert {r.generation for r in dry.records.values()} == {2}
    assert store.latest_generation().generation == 1  # type: ignore[union-attr]
    assert run_plan(config, store, clock).generation == 2  # what the dry run announced


def test_a_ranking_change_replans_workloads_whose_eligible_pools_moved(tmp_path):
    ranking_file = tmp_path / "ranking.json"
    scores = {}
    for g in range(5):
        scores[f"c16.g{g}.spot"] = 0.9 - g * 0.03
        scores[f"c8.g{g}.spot"] = 0.8 - g * 0.03
    scores.update({"c16.g0.res": 0.95, "c16.g1.res": 0.95})
    ranking_file.write_text(json.dumps({"id": "r-1", "scores": scores}))
    config = load_config(write_config(tmp_path, ranking=f"ranking: {{file: {ranking_file}}}"))
    clock = FixedClock()
    with open_store(config.state, clock=clock, create=True) as store:
        put(store, "alpha", 64)
        run_plan(config, store, clock)
        ranking_file.write_text(json.dumps({"id": "r-2", "scores": {**scores,
                                                                    "c8.g4.spot": 0.99}}))
        result = run_plan(config, store, clock)
        assert result.changed == ("alpha",)
        assert store.latest_generation().ranking == "r-2"


class _Ranking(http.server.BaseHTTPRequestHandler):
    body = b"{}"
    status = 200

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(self.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_ranking_url_that_goes_down_falls_back_to_the_last_good_ranking_until_max_age(
        tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Ranking)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        scores = {f"c16.g{g}.spot": 0.9 for g in range(5)}
        _Ranking.body = json.dumps({"id": "r-url-1", "scores": scores}).encode()
        _Ranking.status = 200
        url = f"http://127.0.0.1:{server.server_address[1]}/ranking.json"
        config = load_config(write_config(
            tmp_path, ranking=f"ranking: {{url: '{url}', max_age: 10m}}"))
        clock = FixedClock()
        with open_store(config.state, clock=clock, create=True) as store:
            put(store, "alpha", 32)
            assert run_plan(config, store, clock).ranking.id == "r-url-1"
            _Ranking.status = 503
            clock.advance(300)
            stale = run_plan(config, store, clock, full=True)
            assert stale.ranking.stale and stale.ranking.id == "r-url-1"
            clock.advance(600)
            with pytest.raises(ApiError, match="max_age"):
                run_plan(config, store, clock, full=True)
    finally:
        server.shutdown()
        server.server_close()


def test_plan_cli_json_schema_check_and_explain(cli, tmp_path):
    config = write_config(tmp_path, contract=", strict: true")
    claims = tmp_path / "claims.json"
    claims.write_text(json.dumps({"claims": [
        {"workload": "alpha", "contract": "T1", "requests": {"cpu": 64, "memory": "256Gi"},
         "largest_pod": {"cpu": 4, "memory": "16Gi"}},
        {"workload": "huge", "contract": "T1", "requests": {"cpu": 5000, "memory": "20000Gi"},
         "largest_pod": {"cpu": 4, "memory": "16Gi"}}]}))
    result = cli("--config", str(config), "plan", "--claims", str(claims), "--dry-run",
                 "--json", "--check")
    assert result.code == 4, result.stderr   # `huge` is beyond every pool's depth
    body = result.json()
    assert set(body) >= {"generation", "ranking", "changed", "workloads"}
    by_name = {w["workload"]: w for w in body["workloads"]}
    assert by_name["alpha"]["feasible"] and not by_name["alpha"]["degraded"]
    assert not by_name["huge"]["feasible"] and by_name["huge"]["reasons"]
    for pool in by_name["alpha"]["pools"]:
        assert set(pool) == {"pool", "tier", "group", "units", "share"}
    assert not (tmp_path / "state.db").exists()   # a dry run wrote nothing
    explain = cli("--config", str(config), "plan", "--claims", str(claims), "--dry-run",
                  "--explain", "alpha")
    assert explain.code == 0 and "why each pool" in explain.stdout


def test_a_bad_claims_file_names_the_field_and_exits_2(cli, tmp_path):
    config = write_config(tmp_path)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: alpha, requests: {cpu: lots}, "
                      "largest_pod: {cpu: 1}}\n")
    result = cli("--config", str(config), "plan", "--claims", str(claims), "--dry-run")
    assert result.code == 2
    assert "claims[0].requests" in result.stderr


def test_the_seed_scenario_on_the_bundled_config_keeps_the_t1_contract(cli, tmp_path):
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: orders-daily, contract: T1, "
                      "requests: {cpu: 168, memory: 672Gi}, largest_pod: {cpu: 4, memory: 16Gi}}\n")
    result = cli("-q", "plan", "--claims", str(claims), "--dry-run", "--json", "--check")
    assert result.code == 0, result.stderr
    plan = result.json()["workloads"][0]
    assert plan["feasible"] and not plan["degraded"]
    committed = sum(p["share"] for p in plan["pools"] if p["tier"] == "committed")
    reclaimable = [p for p in plan["pools"] if p["tier"] == "reclaimable"]
    groups: dict[str, float] = {}
    for p in reclaimable:
        groups[p["group"]] = groups.get(p["group"], 0) + p["share"]
    assert committed >= 0.30
    assert all(p["share"] <= 0.15 + 1e-9 for p in reclaimable)
    assert all(share <= 0.30 + 1e-9 for share in groups.values())
    assert len(reclaimable) >= 8


def test_an_incremental_replan_leaves_the_depth_kept_plans_hold(setup):
    config, store, clock = setup
    put(store, "alpha", 96)
    put(store, "beta", 96)
    run_plan(config, store, clock)

    def committed(plans):
        return {name: {u.pool: u.units for u in p.pools if u.tier == "committed"}
                for name, p in plans.items()}

    before = committed(store.plans())
    put(store, "beta", 112)  # beta grows; alpha's committed units must stay alpha's
    assert run_plan(config, store, clock).changed == ("beta",)
    after = committed(store.plans())
    assert after["alpha"] == before["alpha"]
    depth = {p.name: p.depth for p in config.pools}
    for pool in depth:
        held = sum(units.get(pool, 0) for units in after.values())
        assert held <= depth[pool], f"{pool}: {held} units over depth {depth[pool]}"


def test_every_replanned_workload_gets_a_plan_event_and_an_unchanged_one_none(setup):
    config, store, clock = setup
    put(store, "alpha", 64)
    put(store, "beta", 32)
    first = run_plan(config, store, clock)
    put(store, "beta", 48)
    second = run_plan(config, store, clock)
    run_plan(config, store, clock)  # nothing changed: no event
    updates = [(e.workload, e.detail["generation"]) for e in store.events()
               if e.token == "PLAN_UPDATED"]
    assert updates == [("alpha", first.generation), ("beta", first.generation),
                       ("beta", second.generation)]
    store.conn.execute("DELETE FROM claims WHERE workload = 'alpha'")
    run_plan(config, store, clock)
    assert [e.workload for e in store.events() if e.token == "PLAN_REMOVED"] == ["alpha"]


def test_a_committed_claims_file_becomes_the_workloads_claims_and_the_next_plan_keeps_them(
    cli, tmp_path,
):
    config = write_config(tmp_path)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: alpha, contract: T1, requests: {cpu: 64, "
                      "memory: 256Gi}, largest_pod: {cpu: 4, memory: 16Gi}}\n")
    committed = cli("--config", str(config), "plan", "--claims", str(claims), "--json")
    assert committed.code == 0, committed.stderr
    assert committed.json()["changed"] == ["alpha"]

    again = cli("--config", str(config), "plan", "--json")

    assert again.code == 0, again.stderr
    assert again.json()["changed"] == []  # nothing to re-plan: the claim is the state's now
    assert [w["workload"] for w in again.json()["workloads"]] == ["alpha"]
    with open_store(tmp_path / "state.db") as store:
        claim = store.claim("alpha")
        assert claim is not None and (claim.source, claim.version) == ("file", 1)
        assert claim.requests == {"cpu": 64_000, "memory": 256 * GI}
        assert store.plans()["alpha"].claim_version == 1
        assert "PLAN_REMOVED" not in [e.token for e in store.events()]
        [generation] = {p.generation for p in store.plans().values()}
        latest = store.latest_generation()
        assert latest is not None and latest.generation == generation == 1


def test_a_claims_file_claim_is_planned_with_the_state_and_replaced_by_watch(setup, tmp_path):
    config, store, clock = setup
    put(store, "beta", 32)
    run_plan(config, store, clock)
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: alpha, contract: T1, requests: {cpu: 64, "
                      "memory: 256Gi}, largest_pod: {cpu: 4, memory: 16Gi}}\n")

    result = run_plan(config, store, clock, claims_path=claims)

    assert result.changed == ("alpha",) and result.reasons_for_change == {
        "alpha": "claims file"}
    assert set(store.plans()) == {"alpha", "beta"}  # beta's plan is kept
    put(store, "alpha", 16)  # a watch pass observes the workload: its claim replaces the file's
    replanned = run_plan(config, store, clock)
    assert replanned.changed == ("alpha",)
    claim = store.claim("alpha")
    assert claim is not None and (claim.source, claim.version) == ("k8s", 2)


def test_a_dry_run_of_a_claims_file_records_no_claim(setup, tmp_path):
    config, store, clock = setup
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: alpha, contract: T1, requests: {cpu: 64, "
                      "memory: 256Gi}, largest_pod: {cpu: 4, memory: 16Gi}}\n")
    result = run_plan(config, store, clock, claims_path=claims, dry_run=True)
    assert result.changed == ("alpha",) and not result.committed
    assert store.claims() == [] and store.latest_generation() is None
