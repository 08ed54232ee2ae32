"""The acquire stage against the in-package `FakeCloud` and a real temporary state file."""

from __future__ import annotations

import base64
import itertools
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.cloud import Cloud
from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import Config, Region, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.diff import waiting_node_names
from scoctl.core.model import (
    InstanceRecord,
    LaunchRecord,
    NodeRelease,
    PlanUnitRecord,
    PlanWorkloadRecord,
)
from scoctl.core.quantity import parse_resources
from scoctl.core.userdata import RECLAIMABLE_TAINT, parse_boot_contract
from scoctl.errors import NotLeader, PermanentError, QuotaExceeded, Refused, TemporaryError
from scoctl.host.budget import TokenBudget
from scoctl.runner.compose import acquire_with_fallback, reconcile_and_release
from scoctl.services.claims import record_claim
from scoctl.stages.acquire import AcquireResult, run_acquire
from scoctl.stages.plan import run_plan
from scoctl.state import Store, open_store
from tests.builders import JOIN_CA_HASH, JOIN_ENDPOINT, JOIN_FIELDS, held_units
from tests.fixtures.state import StateProbe

SECRET = "join-token-s3cr3t-value"



def make_config(tmp: Path, *, regions: int = 1) -> Config:
    region_b = ("  - name: region-b\n    cloud: region-b\n    mutating_calls_per_second: 1000\n"
                "    launch: {image: img-b, networks: [none]}\n") if regions > 1 else ""
    pool_b = ("  - {name: small.b, region: region-b, az: nova, flavor: m1.small, group: g4, "
              "tier: reclaimable, depth: 50}\n") if regions > 1 else ""
    text = f"""
state: {tmp}/state.db
budget_dir: {tmp}/budget
regions:
  - name: region-a
    cloud: region-a
    mutating_calls_per_second: 1000
    launch: {{image: img-a, networks: [none], security_groups: [default]}}
{region_b}flavors:
  - {{name: m1.small, vcpus: 1, ram: 2Gi}}
  - {{name: m1.medium, vcpus: 2, ram: 4Gi}}
  - {{name: m1.xlarge, vcpus: 8, ram: 16Gi}}
pools:
  - {{name: small.a, region: region-a, az: nova, flavor: m1.small, group: g1,
     tier: reclaimable, depth: 50}}
  - {{name: medium.a, region: region-a, az: nova, flavor: m1.medium, group: g2,
     tier: reclaimable, depth: 50}}
  - {{name: big.a, region: region-a, az: nova, flavor: m1.xlarge, group: g3,
     tier: reclaimable, depth: 50}}
  - {{name: res.a, region: region-a, az: nova, flavor: m1.small, group: g1,
     tier: committed, depth: 5}}
{pool_b}contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{big.a: 0.99, medium.a: 0.6, small.a: 0.5, res.a: 0.4}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
  - {{name: hpc, contract: T1, source: slurm}}
bootstrap: {{join_secret_file: {tmp}/join-token, {JOIN_FIELDS}}}
timeouts: {{negative_cache: 3m}}
"""
    (tmp / "join-token").write_text(SECRET + "\n")
    return parse_config(load_located(text, str(tmp / "config.yaml")), path=tmp / "config.yaml")


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return make_config(tmp_path)


@pytest.fixture
def fake() -> Iterator[FakeCloud]:
    cloud = FakeCloud()
    yield cloud
    cloud.reset()


def connect_to(fake: FakeCloud):  # type: ignore[no-untyped-def]
    def connect(config: Config, region: Region, budget: TokenBudget) -> Cloud:
        fake.spend_token = budget
        return fake

    return connect


def set_plan(store: Store, workload: str, units: Mapping[str, int]) -> int:
    tiers = {"res.a": "committed"}
    return store.commit_plan(ranking="r-1", full=False, plans=[PlanWorkloadRecord(
        workload=workload, generation=0, claim_version=1, contract="T1", ranking="r-1",
        feasible=True, degraded=False, reasons=(),
        pools=tuple(PlanUnitRecord(pool=p, tier=tiers.get(p, "reclaimable"), group="g",
                                   units=n, share=0.0, score=0.0)
                    for p, n in units.items()))])


def add_instances(store: Store, workload: str, pool: str, count: int, *,
                  status: str = "ready") -> None:
    for i in range(count):
        store.upsert_instance(InstanceRecord(
            id=f"old-{pool}-{i}", name=f"old-{pool}-{i}", region="region-a", workload=workload,
            pool=pool, generation=1, launch_id=None, status=status, created=store.now(),
            updated=store.now()))


def acquire(config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
            **kwargs: object) -> AcquireResult:
    """`scoctl acquire`: the stage with its same-run fallback and the Slurm hand-back."""
    return acquire_with_fallback(config, store, clock, connect=connect_to(fake),
                                 poll=0.5, **kwargs)  # type: ignore[arg-type]


def tokens(store: Store, token: str) -> list[dict[str, object]]:
    return [dict(e.detail) for e in store.events() if e.token == token]


def test_only_pools_that_gain_units_get_one_multi_create_call_each(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 3, "medium.a": 2, "res.a": 1})
    add_instances(store, "web", "medium.a", 2)
    add_instances(store, "web", "res.a", 1)

    result = acquire(config, store, clock, fake)

    [request] = fake.launch_calls()
    assert (request.flavor, request.az, request.min_count, request.max_count) == (
        "m1.small", "nova", 1, 3)
    assert request.image == "img-a" and request.networks == "none"
    assert request.security_groups == ("default",)
    [launch] = result.launches
    assert (launch.workload, launch.pool, launch.requested, launch.created) == (
        "web", "small.a", 3, 3)
    assert launch.status == "recorded" and launch.reservation_id
    assert [r.status for r in store.launches()] == ["recorded"]
    assert held_units(store) == {"web": {"small.a": 3, "medium.a": 2, "res.a": 1}}
    assert tokens(store, "INSTANCES_LAUNCHED")[0]["created"] == 3
    assert result.calls == 1 and result.ok


def test_new_servers_are_recorded_building_then_active_after_the_watch(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})

    unwatched = acquire(config, store, clock, fake, watch=0)

    assert {i.status for i in store.instances()} == {"building"}
    assert {i.launch_id for i in store.instances()} == {unwatched.launches[0].launch_id}
    set_plan(store, "web", {"small.a": 4})
    acquire(config, store, clock, fake)
    statuses = sorted(i.status for i in store.instances())
    assert statuses == ["active", "active", "building", "building"]


def test_servers_carry_the_tags_metadata_and_user_data_of_their_contract(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    generation = set_plan(store, "web", {"small.a": 2})

    result = acquire(config, store, clock, fake)

    launch_id = result.launches[0].launch_id
    [spec] = {i.spec_hash for i in store.instances()}  # design: Drift: recorded at launch
    assert spec is not None and len(spec) == 12 and int(spec, 16) >= 0
    expected_tags = {"sco:managed", "sco:workload=web", "sco:pool=small.a",
                     f"sco:gen={generation}", f"sco:launch={launch_id}", f"sco:spec={spec}"}
    servers = fake.servers(tags=[f"sco:launch={launch_id}"])
    assert sorted(s.name for s in servers) == [f"sco-web-{launch_id}-1", f"sco-web-{launch_id}-2"]
    for server in servers:
        assert server.tags == expected_tags
        assert server.metadata == {"sco:managed": "true", "sco:workload": "web",
                                   "sco:pool": "small.a", "sco:gen": str(generation),
                                   "sco:launch": launch_id}
        encoded = fake.user_data_of(server.id)
        assert encoded is not None
        user_data = base64.b64decode(encoded).decode()
        assert SECRET in user_data
        contract = parse_boot_contract(user_data)
        assert contract is not None
        assert (contract["workload"], contract["pool"], contract["generation"],
                contract["launch"], contract["reclaimable"]) == (
            "web", "small.a", generation, launch_id, True)
        # exclusive, the default isolation: the workload's own taint beside the reclaimable one
        assert contract["taints"] == [RECLAIMABLE_TAINT, "sco/workload=web:NoSchedule"]
        assert (f"--register-with-taints={RECLAIMABLE_TAINT},sco/workload=web:NoSchedule"
                in user_data)


def test_the_join_secret_never_reaches_the_state_or_the_result(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud, probe: StateProbe,
) -> None:
    set_plan(store, "web", {"small.a": 1})

    result = acquire(config, store, clock, fake)
    dry = acquire(config, store, clock, fake, dry_run=True)

    raw = probe.raw()
    assert b"small.a" in raw  # the launch really is in what we look at
    assert SECRET.encode() not in raw
    assert SECRET not in repr(result) and SECRET not in repr(dry)


def test_a_second_acquire_in_a_row_makes_no_cloud_call_at_all(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2, "medium.a": 1})
    acquire(config, store, clock, fake)
    fake.calls.clear()

    again = acquire(config, store, clock, fake)

    assert fake.calls == []
    assert again.launches == () and again.calls == 0


def test_quota_headroom_clamps_the_launches_and_records_the_shortfall(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    fake.set_quota(instances=10, cores=5, ram_mb=None)
    set_plan(store, "web", {"medium.a": 2, "small.a": 4})

    result = acquire(config, store, clock, fake)

    counts = {r.flavor: r.max_count for r in fake.launch_calls()}
    assert counts == {"m1.medium": 2, "m1.small": 1}  # 5 cores: 2×2 + 1×1
    [short] = result.shortfalls
    assert (short.pool, short.wanted, short.allowed, short.limit) == ("small.a", 4, 1, "cores")
    assert tokens(store, "QUOTA_SHORTFALL") == [
        {"pool": "small.a", "wanted": 4, "allowed": 1, "limit": "cores", "region": "region-a"}]


def test_no_headroom_at_all_makes_no_create_call(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    fake.set_quota(instances=0)
    set_plan(store, "web", {"small.a": 2})

    result = acquire(config, store, clock, fake)

    assert fake.launch_calls() == [] and result.calls == 0
    assert store.launches() == []
    assert [s.allowed for s in result.shortfalls] == [0]


def test_a_403_quota_answer_fails_the_launch_but_keeps_the_pool_eligible(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    fake.fail_next("launch", QuotaExceeded("Nova: Quota exceeded for instances: Requested 1"))

    result = acquire(config, store, clock, fake)

    [launch] = store.launches()
    assert launch.status == "failed" and "Quota exceeded" in (launch.error or "")
    [fault] = result.quota_faults
    assert (fault.pool, fault.asynchronous) == ("small.a", False)
    assert tokens(store, "QUOTA_EXCEEDED")[0]["pool"] == "small.a"
    assert set(tokens(store, "QUOTA_EXCEEDED")[0]) == {"pool", "launch", "servers", "fault",
                                                       "region"}
    assert store.exclusions() == [] and result.exclusions == ()
    assert result.ok  # quota is a domain outcome, not a failed run
    assert held_units(store) == {}  # the units are free for the next run


def test_servers_failing_the_async_quota_recheck_are_deleted_and_not_excluded(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 3})
    fake.fail_quota_recheck(1)

    result = acquire(config, store, clock, fake)

    [fault] = result.quota_faults
    assert (fault.servers, fault.asynchronous) == (3, True)
    assert fault.message.startswith("413:")
    assert fake.servers() == []
    assert {i.status for i in store.instances()} == {"deleting"}
    assert {i.fault for i in store.instances()} == {fault.message}
    assert store.exclusions() == []
    assert result.calls == 1 + 3  # one create, three deletes, all through the budget
    assert [e.token for e in store.events()].count("QUOTA_EXCEEDED") == 1


def test_no_valid_host_excludes_the_pool_and_the_workload_falls_back_in_the_same_run(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    record_claim(store, "web", contract="T1",
                 requests=parse_resources({"cpu": "4", "memory": "4Gi"}),
                    largest_pod=parse_resources({"cpu": "500m", "memory": "512Mi"}), pods=8,
                    source="k8s")
    run_plan(config, store, clock)
    assert [(u.pool, u.units) for u in store.plans()["web"].pools] == [("big.a", 1)]
    fake.no_valid_host(flavor="m1.xlarge")

    result = acquire(config, store, clock, fake)

    [exclusion] = store.exclusions()
    assert exclusion.pool == "big.a"
    assert exclusion.until == rfc3339(clock.now() + timedelta(seconds=180))
    assert [(e.pool, e.workloads) for e in result.exclusions] == [("big.a", ("web",))]
    assert tokens(store, "POOL_EXCLUDED")[0]["pool"] == "big.a"
    # the one fault rule (core.faults) gives acquire and reconcile the same detail shape
    assert set(tokens(store, "POOL_EXCLUDED")[0]) == {"pool", "launch", "servers", "fault",
                                                      "region", "until"}
    assert result.replanned == ("web",)
    assert [(u.pool, u.units) for u in store.plans()["web"].pools] == [("medium.a", 2)]
    assert [(o.pool, o.created, o.round_no) for o in result.launches] == [
        ("big.a", 1, 0), ("medium.a", 2, 1)]
    assert [s.flavor for s in fake.servers()] == ["m1.medium", "m1.medium"]  # ERROR one deleted
    assert held_units(store) == {"web": {"medium.a": 2}}


def test_an_excluded_pool_stays_excluded_only_for_the_negative_cache(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    record_claim(store, "web", contract="T1",
                 requests=parse_resources({"cpu": "4", "memory": "4Gi"}),
                    largest_pod=parse_resources({"cpu": "500m", "memory": "512Mi"}), pods=8,
                    source="k8s")
    run_plan(config, store, clock)
    fake.no_valid_host(flavor="m1.xlarge")
    acquire(config, store, clock, fake)

    clock.advance(179)
    assert [e.pool for e in store.exclusions()] == ["big.a"]
    clock.advance(2)
    assert store.exclusions() == []


def test_slurm_cloud_nodes_get_one_call_per_node_named_after_it(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "3"}),
                    largest_pod=parse_resources({"cpu": "1"}), pods=3, source="slurm",
                    nodes=["cloud-1", "cloud-2", "cloud-3"])
    set_plan(store, "hpc", {"small.a": 3})

    result = acquire(config, store, clock, fake)

    calls = fake.launch_calls()
    assert [(r.name, r.min_count, r.max_count) for r in calls] == [
        ("cloud-1", 1, 1), ("cloud-2", 1, 1), ("cloud-3", 1, 1)]
    assert sorted((i.name, i.node_name) for i in store.instances()) == [
        ("cloud-1", "cloud-1"), ("cloud-2", "cloud-2"), ("cloud-3", "cloud-3")]
    assert sorted(launch.node_names for launch in store.launches()) == [
        ("cloud-1",), ("cloud-2",), ("cloud-3",)]
    for request in calls:
        contract = parse_boot_contract(request.user_data or "")
        assert contract is not None
        assert contract["slurm"] == {"node_name": request.name,
                                     "features": ["small.a", "m1.small", "reclaimable"]}
    assert result.calls == 3
    fake.calls.clear()
    assert acquire(config, store, clock, fake).launches == () and fake.calls == []


def test_a_slurm_cloud_node_boots_without_the_kubernetes_join_credentials(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    # slurmd needs its node name, never kubeadm's secret, endpoint or CA hash
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "1"}),
                 largest_pod=parse_resources({"cpu": "1"}), pods=1, source="slurm",
                 nodes=["cloud-1"])
    set_plan(store, "hpc", {"small.a": 1})
    set_plan(store, "web", {"medium.a": 1})

    acquire(config, store, clock, fake)

    by_name = {request.name.split("-")[0]: request.user_data or ""
               for request in fake.launch_calls()}
    assert sorted(by_name) == ["cloud", "sco"]
    slurm, kubernetes = by_name["cloud"], by_name["sco"]
    assert "NODE_NAME=cloud-1\n" in slurm
    assert SECRET not in slurm and JOIN_ENDPOINT not in slurm and JOIN_CA_HASH not in slurm
    assert ("SCO_JOIN_ENDPOINT=\n" in slurm and "SCO_JOIN_CA_HASH=\n" in slurm
            and "SCO_JOIN_TOKEN=\n" in slurm)
    # the Kubernetes launch of the same run still gets all three
    assert f"SCO_JOIN_TOKEN={SECRET}\n" in kubernetes
    assert f"SCO_JOIN_ENDPOINT={JOIN_ENDPOINT}\n" in kubernetes
    assert f"SCO_JOIN_CA_HASH={JOIN_CA_HASH}\n" in kubernetes


def test_a_slurm_claim_launches_only_for_node_names_no_unit_holds(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "2"}),
                    largest_pod=parse_resources({"cpu": "1"}), pods=2, source="slurm",
                    nodes=["cloud-1", "cloud-2"])
    set_plan(store, "hpc", {"small.a": 1, "medium.a": 2})
    store.add_launch(LaunchRecord(
        launch_id="l-000000000001", region="region-a", workload="hpc", pool="medium.a",
        generation=1, count=1, status="intent", created=store.now(), updated=store.now(),
        node_names=("cloud-1",)))

    acquire(config, store, clock, fake)

    assert [r.name for r in fake.launch_calls()] == ["cloud-2"]


def test_waiting_node_names_skips_names_already_held() -> None:
    assert waiting_node_names({"hpc": ["a", "b", "c"], "w": ["x"]},
                              {"hpc": {"b"}, "w": {"x"}}) == {"hpc": ["a", "c"]}


def test_dry_run_prints_the_calls_it_would_make_and_makes_none(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2, "medium.a": 1})

    result = acquire(config, store, clock, fake, dry_run=True)

    assert fake.mutating_calls() == 0 and result.calls == 0
    assert [method for method, _ in fake.calls] == ["headroom"]
    assert store.launches() == [] and store.instances() == [] and store.events() == []
    assert [(c.pool, c.flavor, c.min_count, c.max_count) for c in result.planned] == [
        ("medium.a", "m1.medium", 1, 1), ("small.a", "m1.small", 1, 2)]
    for call in result.planned:
        assert SECRET not in call.user_data and "***" in call.user_data
        assert "sco:managed" in call.tags


def test_a_launch_left_in_flight_by_a_crash_is_adopted_not_launched_again(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    first = acquire(config, store, clock, fake, watch=0)
    launch_id = first.launches[0].launch_id
    # Simulate a crash between the call and the record: forget the record, keep the intent.
    store.conn.execute("DELETE FROM instances")
    store.update_launch(launch_id, status="intent")
    fake.calls.clear()

    result = acquire(config, store, clock, fake)

    assert len(fake.launch_calls()) == 1  # the first run's create only
    assert fake.mutating_calls() == 0
    assert [(o.launch_id, o.status, o.created) for o in result.launches] == [
        (launch_id, "adopted", 2)]
    assert [r.status for r in store.launches()] == ["recorded"]
    assert tokens(store, "LAUNCH_ADOPTED")[0]["launch"] == launch_id
    assert held_units(store) == {"web": {"small.a": 2}}


def test_an_intent_without_servers_still_counts_and_blocks_a_second_launch(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    store.add_launch(LaunchRecord(
        launch_id="l-00000000000a", region="region-a", workload="web", pool="small.a",
        generation=1, count=2, status="intent", created=store.now(), updated=store.now()))

    result = acquire(config, store, clock, fake)

    assert fake.mutating_calls() == 0 and result.launches == ()
    assert [r.status for r in store.launches()] == ["intent"]


def test_a_call_that_may_have_reached_nova_is_left_in_flight_never_retried_blindly(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    fake.fail_next("launch", TemporaryError("Nova answered 500: boom"))

    result = acquire(config, store, clock, fake)

    [outcome] = result.launches
    assert outcome.status == "intent" and not result.ok
    assert [r.status for r in store.launches()] == ["intent"]
    assert acquire(config, store, clock, fake).launches == ()  # still in flight: no relaunch
    assert len(fake.launch_calls()) == 1


def test_a_call_refused_before_any_work_fails_at_once_and_the_next_acquire_relaunches(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    fake.fail_next("launch", Refused("Nova answered 429: slow down", delay=5))

    result = acquire(config, store, clock, fake, watch=0)

    [outcome] = result.launches
    assert outcome.status == "failed" and not result.ok
    assert [r.status for r in store.launches()] == ["failed"]  # not in flight: no wait
    [refused] = tokens(store, "LAUNCH_REFUSED")
    assert refused["launch"] == outcome.launch_id and "429" in str(refused["message"])
    assert held_units(store) == {}
    # at once (no settle window, no launch timeout): the units are launched again
    again = acquire(config, store, clock, fake, watch=0)
    assert [(o.status, o.created) for o in again.launches] == [("recorded", 2)]
    assert len(fake.launch_calls()) == 2
    assert held_units(store) == {"web": {"small.a": 2}}


def test_an_intent_no_server_carries_the_tag_of_is_relaunched_after_the_settle_window(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    assert config.timeouts.launch_settle == 30.0  # the default
    set_plan(store, "web", {"small.a": 2})
    fake.fail_next("launch", TemporaryError("Nova answered 500: boom"))  # created nothing
    [unsure] = acquire(config, store, clock, fake, watch=0).launches
    assert unsure.status == "intent"

    clock.advance(29)
    assert acquire(config, store, clock, fake, watch=0).launches == ()  # may still show up
    clock.advance(1)
    result = acquire(config, store, clock, fake, watch=0)

    assert [(o.status, o.created) for o in result.launches] == [("recorded", 2)]
    assert [(r.launch_id == unsure.launch_id, r.status) for r in store.launches()] == [
        (True, "failed"), (False, "recorded")]
    [lapsed] = tokens(store, "LAUNCH_TIMEOUT")
    assert (lapsed["launch"], lapsed["servers"], lapsed["settle"]) == (unsure.launch_id, 0, 30.0)
    assert len(fake.launch_calls()) == 2
    assert held_units(store) == {"web": {"small.a": 2}}


def test_region_limits_the_launches_to_that_regions_pools(
    tmp_path: Path, clock: FixedClock, fake: FakeCloud,
) -> None:
    config = make_config(tmp_path, regions=2)
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        set_plan(store, "web", {"small.a": 1, "small.b": 2})

        only_b = acquire(config, store, clock, fake, region="region-b")
        assert [(o.pool, o.region) for o in only_b.launches] == [("small.b", "region-b")]
        assert [r.image for r in fake.launch_calls()] == ["img-b"]
        both = acquire(config, store, clock, fake)
        assert [o.pool for o in both.launches] == ["small.a"]


def test_a_watch_that_cannot_reach_nova_keeps_the_recorded_launches(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2})
    fake.fail_next("servers", TemporaryError("Nova unreachable: ConnectFailure"))

    result = acquire(config, store, clock, fake)

    assert result.ok and [o.status for o in result.launches] == ["recorded"]
    assert {i.status for i in store.instances()} == {"building"}


def test_a_refused_launch_is_failed_reported_and_the_others_still_run(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    set_plan(store, "web", {"small.a": 2, "medium.a": 1})
    fake.fail_next("launch", PermanentError("Nova answered 400: Invalid key_name provided."))

    result = acquire(config, store, clock, fake)

    assert not result.ok and "Invalid key_name" in result.errors[0]
    assert sorted(o.status for o in result.launches) == ["failed", "recorded"]
    assert [e.level for e in store.events() if e.token == "LAUNCH_FAILED"] == ["error"]


class RecordingSlurm:
    """Slurm as acquire sees it: only `update_node` is ever called (recorded here)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, str, str | None]] = []

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        self.updates.append((name, state, reason))


def slurm_claim(store: Store, nodes: list[str]) -> None:
    record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": str(len(nodes))}),
                    largest_pod=parse_resources({"cpu": "1"}), pods=len(nodes),
                    source="slurm", nodes=nodes)


def test_a_slurm_node_whose_launch_is_refused_goes_back_to_powered_down_never_down(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    slurm_claim(store, ["cloud-1", "cloud-2"])
    set_plan(store, "hpc", {"small.a": 2})
    slurm = RecordingSlurm()
    fake.fail_next("launch", QuotaExceeded("Nova: Quota exceeded for instances: Requested 1"))

    result = acquire(config, store, clock, fake, scheduler=slurm)

    assert [(o.node_names, o.status) for o in result.launches] == [
        (("cloud-1",), "failed"), (("cloud-2",), "recorded")]
    assert [(n, s) for n, s, _ in slurm.updates] == [("cloud-1", "POWER_DOWN_FORCE")]
    assert result.powered_down == ("cloud-1",)
    claim = store.claim("hpc")
    assert claim is not None and claim.nodes == ("cloud-2",)  # Slurm requeues cloud-1's job
    fake.calls.clear()
    assert acquire(config, store, clock, fake, scheduler=slurm).launches == ()
    assert fake.mutating_calls() == 0  # the released node is not launched again by scoctl


def test_a_refused_slurm_launch_without_slurm_at_hand_still_leaves_the_claim(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    slurm_claim(store, ["cloud-1"])
    set_plan(store, "hpc", {"small.a": 1})
    fake.fail_next("launch", PermanentError("Nova answered 400: Invalid key_name provided."))

    result = acquire(config, store, clock, fake)

    assert result.powered_down == ("cloud-1",) and not result.ok
    claim = store.claim("hpc")
    assert claim is not None and claim.nodes == ()
    assert [e.detail["reason"] for e in store.events() if e.token == "SLURM_NODES_RELEASED"] == [
        "launch refused"]


def test_slurm_nodes_failing_the_async_quota_recheck_are_powered_down(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    slurm_claim(store, ["cloud-1"])
    set_plan(store, "hpc", {"small.a": 1})
    slurm = RecordingSlurm()
    fake.fail_quota_recheck(1)

    result = acquire(config, store, clock, fake, scheduler=slurm)

    [fault] = result.quota_faults
    assert fault.asynchronous
    assert [(n, s) for n, s, _ in slurm.updates] == [("cloud-1", "POWER_DOWN_FORCE")]
    assert fake.servers() == []


def test_a_capacity_fault_on_a_slurm_node_falls_back_without_powering_it_down(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    slurm_claim(store, ["cloud-1"])
    run_plan(config, store, clock)
    assert [(u.pool, u.units) for u in store.plans()["hpc"].pools] == [("big.a", 1)]
    slurm = RecordingSlurm()
    fake.no_valid_host(flavor="m1.xlarge")

    result = acquire(config, store, clock, fake, scheduler=slurm)

    assert slurm.updates == [] and result.powered_down == ()
    assert [(o.pool, o.node_names, o.round_no) for o in result.launches] == [
        ("big.a", ("cloud-1",), 0), (result.launches[1].pool, ("cloud-1",), 1)]
    assert result.launches[1].pool != "big.a" and result.launches[1].created == 1
    assert [s.name for s in fake.servers()] == ["cloud-1"]


def test_the_acquire_stage_alone_returns_the_lost_workload_and_replans_nothing(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    record_claim(store, "web", contract="T1",
                 requests=parse_resources({"cpu": "4", "memory": "4Gi"}),
                    largest_pod=parse_resources({"cpu": "500m", "memory": "512Mi"}), pods=8,
                    source="k8s")
    first = run_plan(config, store, clock)
    fake.no_valid_host(flavor="m1.xlarge")

    result = run_acquire(config, store, clock, connect=connect_to(fake),
                         poll=0.5)

    assert result.lost == ("web",) and result.replanned == ()
    assert [(o.pool, o.round_no) for o in result.launches] == [("big.a", 0)]
    assert [e.pool for e in store.exclusions()] == ["big.a"]
    latest = store.latest_generation()
    assert latest is not None and latest.generation == first.generation  # no re-plan here
    assert store.dirty() == {"web": "pool big.a excluded"}  # the next plan re-plans it


def test_the_acquire_stage_alone_returns_the_slurm_nodes_to_hand_back(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
) -> None:
    slurm_claim(store, ["cloud-1"])
    set_plan(store, "hpc", {"small.a": 1})
    fake.fail_next("launch", QuotaExceeded("Nova: Quota exceeded for instances: Requested 1"))

    result = run_acquire(config, store, clock, connect=connect_to(fake))

    assert result.release == (NodeRelease("cloud-1", "launch refused: quota exceeded"),)
    assert result.powered_down == ()
    claim = store.claim("hpc")
    assert claim is not None and claim.nodes == ("cloud-1",)  # the power stage drops it


def test_a_lease_lost_in_one_region_leaves_the_other_regions_reconciled_then_exits_75(
    tmp_path: Path, clock: FixedClock,
) -> None:
    """Deposed in region-a mid-pass (a fenced call there is refused): region-b is still
    reconciled (the server the provider took back there is found gone) and then the pass
    reports the refusal (NotLeader: exit 75 naming the leader)."""
    config = make_config(tmp_path, regions=2)
    clouds = {"region-a": FakeCloud(_ids=itertools.count(1)),  # server ids unique, as in Nova
              "region-b": FakeCloud(_ids=itertools.count(1000))}
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        set_plan(store, "web", {"small.a": 1, "small.b": 1})
        for name, cloud in clouds.items():
            acquire(config, store, clock, cloud, region=name)
        ids = {name: cloud.servers()[0].id for name, cloud in clouds.items()}
        assert len(set(ids.values())) == 2
        for name, cloud in clouds.items():
            cloud.delete(ids[name])  # both taken back behind scoctl's back
        clouds["region-a"].fail_next("servers", NotLeader("region-a", "other-host:1", 7))
        with pytest.raises(NotLeader, match="other-host:1"):
            reconcile_and_release(config, store, clock, clouds=clouds, discover=False)
        b, a = store.instance(ids["region-b"]), store.instance(ids["region-a"])
        assert b is not None and b.status == "deleted"  # region-b was served all the same
        assert a is not None and a.status == "active"  # region-a: nothing done there
        assert [e.detail["server"] for e in store.events()
                if e.token == "INSTANCE_RECLAIMED"] == [ids["region-b"]]
