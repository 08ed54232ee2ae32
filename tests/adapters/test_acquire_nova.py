"""The acquire stage through the real Nova adapter, against BOTH the emulator and real Nova.

Every test but the last runs twice through `nova_cloud` (the same code on the emulator and on
Nova's own in-process harness): the stage builds its cloud from the config's clouds.yaml with
`cloud_for`, as production does. Races that a real deployment sees (another client taking the
quota between our headroom read and our call, two launches passing the API quota check before
either is scheduled) are staged with `RacingCloud`, a wrapper of our own `Cloud` seam that runs
the competing launch at the exact moment; Nova itself is never patched.

The last test runs two real `scoctl acquire` processes sharing one host-wide token budget and
checks the emulator's timed call log: no 1-second window holds more mutating calls than the
budget allows.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pytest

from scoctl.adapters.cloud import Cloud
from scoctl.adapters.factory import cloud_for
from scoctl.clock import Clock, SystemClock
from scoctl.config.schema import Config, Region, load_config
from scoctl.core.model import (
    FlavorInfo,
    Headroom,
    LaunchRequest,
    LaunchResult,
    PlanUnitRecord,
    PlanWorkloadRecord,
    ServerInfo,
)
from scoctl.core.quantity import parse_resources
from scoctl.core.userdata import parse_boot_contract
from scoctl.host.budget import TokenBudget
from scoctl.runner.compose import acquire_with_fallback
from scoctl.services.claims import record_claim
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.stages.acquire import AcquireResult
from scoctl.stages.plan import run_plan
from scoctl.state import Store, open_store
from tests.builders import JOIN_FIELDS, held_units
from tests.fixtures.nova import NovaBackend, write_clouds_yaml

pytestmark = pytest.mark.nova

SECRET = "k8s-join-0123456789abcdef"
POOLS = """
  - {name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1, tier: reclaimable,
     depth: 50}
  - {name: small.a, region: region-a, az: nova, flavor: m1.small, group: g2, tier: reclaimable,
     depth: 50}
  - {name: tiny.res, region: region-a, az: nova, flavor: m1.tiny, group: g1, tier: committed,
     depth: 5}
  - {name: big.a, region: region-a, az: nova, flavor: m1.xlarge, group: g3, tier: reclaimable,
     depth: 50}
"""



def write_config(tmp: Path, *, cloud: str = "scoctl-test", rate: int = 10,
                 budget_dir: Path | None = None, state: Path | None = None) -> Path:
    """A config for the m1.* world both backends share; clouds.yaml sits in `tmp`."""
    (tmp / "join-token").write_text(SECRET + "\n")
    path = tmp / "config.yaml"
    path.write_text(f"""
state: {state or tmp / "state.db"}
budget_dir: {budget_dir or tmp / "budget"}
regions:
  - name: region-a
    cloud: {cloud}
    clouds_yaml: {tmp / "clouds.yaml"}
    mutating_calls_per_second: {rate}
    launch: {{image: {IMAGE_ID}, networks: [none]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
  - {{name: m1.small, vcpus: 1, ram: 2Gi}}
  - {{name: m1.xlarge, vcpus: 8, ram: 16Gi}}
pools:{POOLS}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{big.a: 0.99, small.a: 0.6, tiny.a: 0.5, tiny.res: 0.4}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
  - {{name: hpc, contract: T1, source: slurm}}
bootstrap: {{join_secret_file: {tmp / "join-token"}, {JOIN_FIELDS}}}
""")
    return path


def set_plan(store: Store, workload: str, units: dict[str, int]) -> int:
    tiers = {"tiny.res": "committed"}
    return store.commit_plan(ranking="r-1", full=False, plans=[PlanWorkloadRecord(
        workload=workload, generation=0, claim_version=1, contract="T1", ranking="r-1",
        feasible=True, degraded=False, reasons=(),
        pools=tuple(PlanUnitRecord(pool=p, tier=tiers.get(p, "reclaimable"), group="g",
                                   units=n, share=0.0, score=0.0)
                    for p, n in units.items()))])


class RacingCloud:
    """Our `Cloud`, with a competing client's action run at an exact moment of the stage."""

    def __init__(self, inner: Cloud, *, after_headroom: Callable[[], None] | None = None,
                 before_launch: Callable[[], None] | None = None) -> None:
        self.inner = inner
        self.after_headroom = after_headroom
        self.before_launch = before_launch

    def flavors(self) -> list[FlavorInfo]:
        return self.inner.flavors()

    def headroom(self) -> Headroom:
        seen = self.inner.headroom()
        if self.after_headroom is not None:
            hook, self.after_headroom = self.after_headroom, None
            hook()
        return seen

    def launch(self, request: LaunchRequest) -> LaunchResult:
        if self.before_launch is not None:
            hook, self.before_launch = self.before_launch, None
            hook()
        return self.inner.launch(request)

    def servers(self, tags: Iterable[str] = (), any_tags: Iterable[str] = (),
                reservation_id: str | None = None) -> list[ServerInfo]:
        return self.inner.servers(tags=tags, any_tags=any_tags, reservation_id=reservation_id)

    def server(self, server_id: str) -> ServerInfo | None:
        return self.inner.server(server_id)

    def delete(self, server_id: str) -> None:
        self.inner.delete(server_id)

    def image_id(self, ref: str) -> str:
        return self.inner.image_id(ref)


class Env:
    """One test's config, state and stage runner on one backend."""

    def __init__(self, backend: NovaBackend, tmp: Path,
                 make_store: Callable[[Clock], Store]) -> None:
        self.backend = backend
        self.config_path = write_config(tmp)
        self.config = load_config(self.config_path)
        self.clock = SystemClock()
        self.store = make_store(self.clock)  # SQLite or PostgreSQL (the `backend` fixture)
        self.connects = 0
        self.race: dict[str, Callable[[], None]] = {}

    def connect(self, config: Config, region: Region, budget: TokenBudget) -> Cloud:
        self.connects += 1
        cloud = cloud_for(config, region, budget=budget)
        return RacingCloud(cloud, after_headroom=self.race.pop("after_headroom", None),
                           before_launch=self.race.pop("before_launch", None))

    def acquire(self, **kwargs: object) -> AcquireResult:
        return acquire_with_fallback(self.config, self.store, self.clock, connect=self.connect,
                                     watch=40.0, poll=0.2, **kwargs)  # type: ignore[arg-type]

    def posts(self) -> int:
        emulator = self.backend.emulator
        assert emulator is not None
        return sum(1 for method, path, _ in emulator.calls()
                   if method == "POST" and path == "/v2.1/servers")

    def tokens(self, token: str) -> list[dict[str, object]]:
        return [dict(e.detail) for e in self.store.events() if e.token == token]


@pytest.fixture
def env(nova_cloud: NovaBackend, tmp_path: Path,
        make_store: Callable[[Clock], Store]) -> Iterator[Env]:
    yield Env(nova_cloud, tmp_path, make_store)


def test_one_call_per_gaining_pool_with_tags_metadata_and_user_data(env: Env) -> None:
    generation = set_plan(env.store, "web", {"tiny.a": 3, "small.a": 1})
    posts_before = env.posts() if env.backend.emulator else 0

    result = env.acquire()

    assert sorted((o.pool, o.requested, o.created) for o in result.launches) == [
        ("small.a", 1, 1), ("tiny.a", 3, 3)]
    assert result.calls == 2  # one multi-create per pool, nothing else mutating
    if env.backend.emulator:
        assert env.posts() - posts_before == 2
    servers = env.backend.cloud.servers(tags=["sco:managed"])
    assert len(servers) == 4
    by_pool: dict[str, set[str | None]] = {}
    for launch in result.launches:
        for server_id in launch.server_ids:
            server = env.backend.cloud.server(server_id)
            assert server is not None
            by_pool.setdefault(launch.pool, set()).add(server.reservation_id)
            recorded = env.store.instance(server_id)
            assert recorded is not None and recorded.spec_hash  # design: Drift: tagged as recorded
            assert server.tags == {"sco:managed", "sco:workload=web", f"sco:pool={launch.pool}",
                                   f"sco:gen={generation}", f"sco:launch={launch.launch_id}",
                                   f"sco:spec={recorded.spec_hash}"}
            assert server.metadata == {"sco:managed": "true", "sco:workload": "web",
                                       "sco:pool": launch.pool, "sco:gen": str(generation),
                                       "sco:launch": launch.launch_id}
            raw = env.backend.connection.compute.get_server(server_id)
            user_data = base64.b64decode(raw.user_data).decode()
            contract = parse_boot_contract(user_data)
            assert contract is not None and contract["pool"] == launch.pool
            assert contract["labels"]["sco/workload"] == "web"  # type: ignore[index]
            assert SECRET in user_data
    assert {pool: len(ids) for pool, ids in by_pool.items()} == {"tiny.a": 1, "small.a": 1}
    tiny = [s.name for s in servers if "sco:pool=tiny.a" in s.tags]
    launch_id = next(o.launch_id for o in result.launches if o.pool == "tiny.a")
    assert sorted(tiny) == [f"sco-web-{launch_id}-{i}" for i in (1, 2, 3)]
    assert {i.status for i in env.store.instances()} == {"active"}


def test_a_second_acquire_in_a_row_does_not_even_connect(env: Env) -> None:
    set_plan(env.store, "web", {"tiny.a": 2})
    env.acquire()
    connects = env.connects

    again = env.acquire()

    assert again.launches == () and again.calls == 0
    assert env.connects == connects
    assert len(env.backend.cloud.servers(tags=["sco:managed"])) == 2


def test_slurm_cloud_nodes_are_one_call_each_named_after_the_node(env: Env) -> None:
    record_claim(env.store, "hpc", contract="T1", requests=parse_resources({"cpu": "2"}),
                        largest_pod=parse_resources({"cpu": "1"}), pods=2, source="slurm",
                        nodes=["cloud-7", "cloud-8"])
    set_plan(env.store, "hpc", {"tiny.a": 2})

    result = env.acquire()

    assert result.calls == 2
    names = sorted(s.name for s in env.backend.cloud.servers(tags=["sco:workload=hpc"]))
    assert names == ["cloud-7", "cloud-8"]
    assert sorted((i.name, i.node_name) for i in env.store.instances()) == [
        ("cloud-7", "cloud-7"), ("cloud-8", "cloud-8")]


def test_the_launch_is_clamped_to_the_quota_headroom(env: Env) -> None:
    env.backend.set_quota(instances=3)
    set_plan(env.store, "web", {"tiny.a": 5})

    result = env.acquire()

    [launch] = result.launches
    assert (launch.requested, launch.created) == (3, 3)
    [short] = result.shortfalls
    assert (short.wanted, short.allowed, short.limit) == (5, 3, "instances")
    assert env.tokens("QUOTA_SHORTFALL")[0]["allowed"] == 3
    assert len(env.backend.cloud.servers(tags=["sco:managed"])) == 3


def test_a_403_when_another_client_took_the_quota_is_quota_not_capacity(env: Env) -> None:
    backend = env.backend
    backend.set_quota(instances=2)
    set_plan(env.store, "web", {"tiny.a": 2})

    def competitor_takes_the_quota() -> None:
        backend.cloud.launch(LaunchRequest(name="other", flavor="m1.tiny", image=backend.image,
                                           min_count=2, max_count=2, tags=("t:other",)))
        backend.wait_for(backend.cloud.headroom, lambda h: h.instances == 0)

    env.race["after_headroom"] = competitor_takes_the_quota

    result = env.acquire()

    [fault] = result.quota_faults
    assert fault.asynchronous is False and "Quota exceeded for instances" in fault.message
    assert [launch.status for launch in env.store.launches()] == ["failed"]
    assert env.store.exclusions() == [] and result.exclusions == ()
    assert env.tokens("QUOTA_EXCEEDED")[0]["pool"] == "tiny.a"
    assert backend.cloud.servers(tags=["sco:managed"]) == []
    assert result.ok


def test_servers_failing_novas_async_quota_recheck_are_quota_and_get_deleted(env: Env) -> None:
    backend = env.backend
    backend.set_quota(instances=4)
    set_plan(env.store, "web", {"tiny.a": 4})

    def competitor_races_us() -> None:
        # Both requests pass the API check before either is scheduled (Nova counts only
        # instances already in a cell): the conductor's recheck then fails ours.
        backend.cloud.launch(LaunchRequest(name="other", flavor="m1.tiny", image=backend.image,
                                           min_count=4, max_count=4, tags=("t:other",)))

    env.race["before_launch"] = competitor_races_us

    result = env.acquire()

    [launch] = result.launches
    assert launch.created == 4  # Nova accepted all four (202) ...
    [fault] = result.quota_faults  # ... then failed them in its recheck
    assert fault.asynchronous and fault.servers == 4 and fault.message.startswith("413:")
    assert env.store.exclusions() == []
    assert {i.status for i in env.store.instances()} == {"deleting"}
    assert held_units(env.store) == {}
    backend.wait_for(lambda: backend.cloud.servers(tags=["sco:managed"]),
                     lambda servers: all(s.status == "DELETED" for s in servers))
    assert result.calls == 1 + 4  # the create and four deletes, all through the budget


def test_no_valid_host_excludes_the_pool_and_the_fallback_launches_in_the_same_run(
    env: Env,
) -> None:
    record_claim(env.store, "web", contract="T1",
                        requests=parse_resources({"cpu": "2", "memory": "1Gi"}),
                        largest_pod=parse_resources({"cpu": "500m", "memory": "256Mi"}),
                        pods=4, source="k8s")
    run_plan(env.config, env.store, env.clock)
    assert [(u.pool, u.units) for u in env.store.plans()["web"].pools] == [("big.a", 1)]

    result = env.acquire()

    assert [(e.pool, e.workloads) for e in result.exclusions] == [("big.a", ("web",))]
    assert [e.pool for e in env.store.exclusions()] == ["big.a"]
    assert env.tokens("POOL_EXCLUDED")[0]["fault"] == "500: No valid host was found."
    assert result.replanned == ("web",)
    assert [(o.pool, o.created, o.round_no) for o in result.launches] == [
        ("big.a", 1, 0), ("small.a", 2, 1)]
    assert held_units(env.store) == {"web": {"small.a": 2}}
    live = [s for s in env.backend.cloud.servers(tags=["sco:workload=web"])
            if s.status != "DELETED"]
    assert sorted(s.flavor for s in live) == ["m1.small", "m1.small"]
    assert result.quota_faults == ()


# Real Nova does no rate limiting (a 503 comes from a proxy in front of it): emulator only.
@pytest.mark.parametrize("nova_cloud", ["emulator"], indirect=True)
def test_a_503_with_retry_after_is_retried_and_every_attempt_spends_a_token(env: Env) -> None:
    assert env.backend.emulator is not None
    set_plan(env.store, "web", {"tiny.a": 2})
    posts_before = env.posts()
    env.backend.emulator.inject(503, count=1, retry_after=0, methods=["POST"])

    result = env.acquire()

    [launch] = result.launches
    assert (launch.status, launch.created) == ("recorded", 2)
    assert result.calls == 2  # the refused attempt and the retry
    assert env.posts() - posts_before == 2
    assert len(env.backend.cloud.servers(tags=["sco:managed"])) == 2


# ---------------------------------------------------------------------- two processes, one budget


def mutating_windows(times: list[float], window: float = 1.0) -> int:
    """The most calls any `window`-second window holds."""
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while t - times[start] >= window:
            start += 1
        best = max(best, end - start + 1)
    return best


def test_two_concurrent_acquires_share_the_host_wide_token_budget(tmp_path: Path) -> None:
    rate = 5
    emulator = NovaEmulator({"quota": {"instances": -1, "cores": -1, "ram": -1},
                             "capacity": None,
                             "timing": {"schedule": 0.05, "recheck": 0.01, "active": 0.1,
                                        "delete": 0.05}}).start()
    budget = tmp_path / "budget"
    processes = []
    try:
        for name in ("one", "two"):
            home = tmp_path / name
            home.mkdir()
            write_clouds_yaml(home, "scoctl-test", emulator.url, f"project-{name}")
            config_path = write_config(home, rate=rate, budget_dir=budget)
            config = load_config(config_path)
            with open_store(config.state, create=True) as store:
                nodes = [f"{name}-{i}" for i in range(10)]
                record_claim(store, "hpc", contract="T1", requests=parse_resources({"cpu": "10"}),
                                largest_pod=parse_resources({"cpu": "1"}), pods=10,
                                source="slurm", nodes=nodes)
                set_plan(store, "hpc", {"tiny.a": 10})
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "scoctl", "--config", str(config_path), "acquire",
                 "--json", "--watch", "5"],
                cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=120) for p in processes]
        for process, (_, err) in zip(processes, outputs, strict=True):
            assert process.returncode == 0, err
        calls = sum(json.loads(out)["calls"] for out, _ in outputs)
        times = [t for t, method, path, _ in emulator.timed_calls()
                 if method in ("POST", "DELETE") and path.startswith("/v2.1/servers")]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        emulator.stop()

    assert calls == len(times) == 20  # one create per Slurm node, in both processes
    assert mutating_windows(times) <= rate
    assert max(times) - min(times) >= (len(times) / rate) - 1.0  # they did have to wait


def test_mutating_windows_counts_the_busiest_second() -> None:
    assert mutating_windows([0.0, 0.5, 0.99, 1.0, 1.2]) == 4
    assert mutating_windows([]) == 0
