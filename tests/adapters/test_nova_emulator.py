"""Emulator-only behaviour: faults real Nova never produces (429/503/500), the adapter's retry
against them, pagination and tag filters at the HTTP level, and the emulator's control API."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from scoctl.adapters.nova import NovaCloud
from scoctl.adapters.retry import RetryPolicy
from scoctl.core.model import LaunchRequest
from scoctl.errors import (
    ConfigError,
    InsufficientCapacity,
    QuotaExceeded,
    Refused,
    TemporaryError,
)
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from tests.fixtures.nova import write_clouds_yaml

pytestmark = pytest.mark.nova


class Budget:
    """Counts the tokens the adapter spends (one per attempt of a mutating call)."""

    def __init__(self) -> None:
        self.spent = 0

    def __call__(self) -> None:
        self.spent += 1


@pytest.fixture
def emulator() -> Iterator[NovaEmulator]:
    with NovaEmulator(seed={"timing": {"schedule": 0.0, "recheck": 0.0, "active": 0.0}}) as emu:
        yield emu


@pytest.fixture
def slept() -> list[float]:
    return []


@pytest.fixture
def budget() -> Budget:
    return Budget()


@pytest.fixture
def cloud(
    emulator: NovaEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    slept: list[float],
    budget: Budget,
) -> Iterator[NovaCloud]:
    monkeypatch.setenv(
        "OS_CLIENT_CONFIG_FILE", str(write_clouds_yaml(tmp_path, "emu", emulator.url, "demo"))
    )
    policy = RetryPolicy(max_attempts=4, base_delay=0.5, sleep=slept.append,
                         rng=random.Random(7))
    adapter = NovaCloud.connect("emu", retry=policy, spend_token=budget)
    yield adapter
    adapter.connection.close()


@pytest.fixture
def http(emulator: NovaEmulator) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=emulator.url,
        headers={"X-Auth-Token": "admin:demo", "OpenStack-API-Version": "compute 2.93"},
    ) as client:
        yield client


def launch(name: str, count: int = 1, **overrides: object) -> LaunchRequest:
    fields: dict[str, object] = {"name": name, "flavor": "m1.tiny", "image": IMAGE_ID,
                                 "min_count": count, "max_count": count, "tags": (f"t:{name}",)}
    fields.update(overrides)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def posts(emulator: NovaEmulator) -> list[int]:
    return [status for method, path, status in emulator.calls()
            if method == "POST" and path == "/v2.1/servers"]


def test_429_retry_after_is_honoured_and_every_attempt_spends_a_token(
    emulator: NovaEmulator, cloud: NovaCloud, slept: list[float], budget: Budget
) -> None:
    emulator.inject(429, count=1, retry_after=3, methods=["POST"])

    result = cloud.launch(launch("w", 2))

    # never sooner than Retry-After; a little jitter on top staggers callers told the same
    assert slept == [3.0 + random.Random(7).uniform(0, 0.5)]
    assert 3.0 <= slept[0] <= 3.5
    assert budget.spent == 2
    assert posts(emulator) == [429, 202]
    assert [s.name for s in result.servers] == ["w-1", "w-2"]


def test_503_on_a_read_waits_retry_after_and_spends_no_token(
    emulator: NovaEmulator, cloud: NovaCloud, slept: list[float], budget: Budget
) -> None:
    emulator.inject(503, count=2, retry_after=1)

    assert cloud.headroom().instances == 10
    expected_rng = random.Random(7)
    assert slept == [1.0 + expected_rng.uniform(0, 0.5) for _ in range(2)]
    assert slept[0] != slept[1]  # two waits for the same Retry-After are not in lock-step
    assert budget.spent == 0


def test_500s_back_off_with_full_jitter_and_give_up_after_max_attempts(
    emulator: NovaEmulator, cloud: NovaCloud, slept: list[float], budget: Budget
) -> None:
    emulator.inject(500, count=10, methods=["DELETE"])

    with pytest.raises(TemporaryError):
        cloud.delete("0b2bd3bf-37a5-4d8b-93a4-6d3b0b0e8f1e")

    expected_rng = random.Random(7)
    assert slept == [expected_rng.uniform(0, 0.5 * 2**i) for i in range(3)]
    assert budget.spent == 4


def test_a_launch_whose_answer_was_lost_is_adopted_not_launched_twice(
    emulator: NovaEmulator, cloud: NovaCloud, budget: Budget
) -> None:
    emulator.inject(500, count=1, methods=["POST"], after=True)  # Nova did the work

    result = cloud.launch(launch("lost", 3))

    assert result.adopted
    assert posts(emulator) == [500]
    assert sorted(s.name for s in result.servers) == ["lost-1", "lost-2", "lost-3"]
    assert len(cloud.servers(tags=["t:lost"])) == 3
    assert budget.spent == 1  # the one create; the lookup that adopted is a read


def lookups(emulator: NovaEmulator) -> list[str]:
    """The calls in order: P for a create, L for a servers listing."""
    return [("P" if method == "POST" else "L") for method, path, _ in emulator.calls()
            if path in ("/v2.1/servers", "/v2.1/servers/detail")]


def test_a_503_answered_after_nova_did_the_work_is_adopted_not_launched_twice(
    emulator: NovaEmulator, cloud: NovaCloud, budget: Budget
) -> None:
    # issue 17 item 2: the adapter took a 503 for a refusal and created the servers again
    emulator.inject(503, count=1, retry_after=1, methods=["POST"], after=True)

    result = cloud.launch(launch("gw", 6))

    assert result.adopted
    assert posts(emulator) == [503]
    assert len(cloud.servers(tags=["t:gw"])) == 6
    assert lookups(emulator)[:2] == ["P", "L"]  # looked up before any second create
    assert budget.spent == 1


def test_a_503_before_any_work_is_looked_up_then_retried_once(
    emulator: NovaEmulator, cloud: NovaCloud, budget: Budget
) -> None:
    emulator.inject(503, count=1, retry_after=1, methods=["POST"])

    result = cloud.launch(launch("gw2", 2))

    assert not result.adopted
    assert posts(emulator) == [503, 202]
    assert lookups(emulator)[:3] == ["P", "L", "P"]
    assert len(cloud.servers(tags=["t:gw2"])) == 2
    assert budget.spent == 2


def test_a_launch_rate_limited_to_the_last_attempt_is_refused_with_nothing_created(
    emulator: NovaEmulator, cloud: NovaCloud, budget: Budget
) -> None:
    emulator.inject(429, count=4, retry_after=0, methods=["POST"])

    with pytest.raises(Refused, match="429"):
        cloud.launch(launch("busy", 2))

    assert posts(emulator) == [429, 429, 429, 429] and budget.spent == 4
    assert cloud.servers(tags=["t:busy"]) == []


def test_a_launch_whose_last_answer_was_ambiguous_is_never_called_refused(
    emulator: NovaEmulator, cloud: NovaCloud
) -> None:
    emulator.inject(500, count=1, methods=["POST"])  # may have reached Nova
    emulator.inject(429, count=3, retry_after=0, methods=["POST"])

    with pytest.raises(TemporaryError) as raised:
        cloud.launch(launch("maybe", 2))

    assert not isinstance(raised.value, Refused)
    assert posts(emulator) == [500, 429, 429, 429]


def test_a_429_is_a_definite_refusal_retried_as_it_is(
    emulator: NovaEmulator, cloud: NovaCloud
) -> None:
    emulator.inject(429, count=2, retry_after=1, methods=["POST"])

    cloud.launch(launch("rl", 1))

    assert lookups(emulator)[:3] == ["P", "P", "P"]  # no lookup needed between them


def test_pagination_follows_servers_links_and_rejects_an_unknown_marker(
    cloud: NovaCloud, http: httpx.Client
) -> None:
    cloud.launch(launch("p", 5))
    seen: list[str] = []
    url: str | None = "/servers/detail?limit=2"
    pages = 0
    while url:
        page = http.get(url).json()
        pages += 1
        seen += [s["id"] for s in page["servers"]]
        links = page.get("servers_links") or []
        url = links[0]["href"] if links else None

    assert len(seen) == len(set(seen)) == 5 and pages == 3
    missing = http.get("/servers", params={"marker": "nope"})
    assert missing.status_code == 400
    assert missing.json() == {"badRequest": {"code": 400, "message": "marker [nope] not found"}}


def test_tag_filters_match_nova_semantics(cloud: NovaCloud) -> None:
    cloud.launch(launch("a", tags=("x", "y")))
    cloud.launch(launch("b", tags=("y",)))
    cloud.launch(launch("c", tags=("z",)))
    compute = cloud.connection.compute

    def names(**query: str) -> set[str]:
        return {s.name for s in compute.servers(**query)}

    assert names(tags="x,y") == {"a"}
    assert names(any_tags="x,z") == {"a", "c"}
    assert names(not_tags="x,y") == {"b", "c"}
    assert names(not_any_tags="x,z") == {"b"}
    assert names(name="^[ab]$") == {"a", "b"}


def test_microversion_rules_for_tags_and_networks(http: httpx.Client) -> None:
    body = {"server": {"name": "v", "imageRef": IMAGE_ID, "flavorRef": "1", "networks": "none",
                       "tags": ["x"]}}

    old = http.post("/servers", json=body, headers={"OpenStack-API-Version": "compute 2.51"})
    assert old.status_code == 400
    assert "Additional properties are not allowed ('tags' was unexpected)" in old.text
    assert old.headers["OpenStack-API-Version"] == "compute 2.51"

    del body["server"]["networks"]
    no_net = http.post("/servers", json=body)
    assert no_net.status_code == 400 and "'networks' is a required property" in no_net.text


def test_create_answers_202_with_the_first_server_and_its_location(
    emulator: NovaEmulator, http: httpx.Client
) -> None:
    body = {"server": {"name": "f", "imageRef": IMAGE_ID, "flavorRef": "1", "networks": "none",
                       "min_count": 2}}

    answer = http.post("/servers", json=body)

    assert answer.status_code == 202
    first = answer.json()["server"]
    assert answer.headers["Location"].endswith(f"/v2.1/servers/{first['id']}")
    assert http.get(f"/servers/{first['id']}").json()["server"]["name"] == "f-1"


def test_no_valid_host_on_a_marked_az_and_a_forced_quota_recheck_failure(
    emulator: NovaEmulator, cloud: NovaCloud
) -> None:
    emulator.set_no_valid_host(az="nova")
    nvh = cloud.launch(launch("n", 2)).servers[0]
    emulator.set_no_valid_host(az="nova", enabled=False)
    emulator.fail_quota_recheck()
    recheck = cloud.launch(launch("r", 1)).servers[0]

    failed = cloud.server(nvh.id)
    assert failed is not None and failed.fault_error() is InsufficientCapacity
    over = cloud.server(recheck.id)
    assert over is not None and (over.status, over.fault_code) == ("ERROR", 413)
    assert over.fault_error() is QuotaExceeded


def test_reclaim_deletes_or_errors_an_active_server(
    emulator: NovaEmulator, cloud: NovaCloud
) -> None:
    gone, broken = cloud.launch(launch("s", 2)).servers
    emulator.reclaim(gone.id, mode="delete")
    emulator.reclaim(broken.id, mode="error")

    assert cloud.server(gone.id) is None
    after = cloud.server(broken.id)
    assert after is not None and after.status == "ERROR" and after.fault_code == 500


def test_subprocess_mode_serves_a_seed_takes_control_calls_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps({"quota": {"instances": 3, "cores": 8, "ram": 4096},
                                "availability_zones": ["az1", "az2"]}))
    ready = tmp_path / "port"
    process = subprocess.Popen(
        [sys.executable, "-m", "scoctl.sim.nova_emulator", "--port", "0",
         "--ready-file", str(ready), "--seed-file", str(seed)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert process.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        base = f"http://127.0.0.1:{int(ready.read_text())}"
        headers = {"X-Auth-Token": "demo:demo"}
        limits = httpx.get(f"{base}/v2.1/limits", headers=headers).json()["limits"]["absolute"]
        assert (limits["maxTotalInstances"], limits["maxTotalRAMSize"]) == (3, 4096)
        control = httpx.post(f"{base}/_sim/quota", json={"project": "demo", "instances": 7})
        assert control.status_code == 200
        limits = httpx.get(f"{base}/v2.1/limits", headers=headers).json()["limits"]["absolute"]
        assert limits["maxTotalInstances"] == 7
        zones = httpx.get(f"{base}/v2.1/os-availability-zone", headers=headers).json()
        assert [z["zoneName"] for z in zones["availabilityZoneInfo"]] == ["az1", "az2"]
    finally:
        os.kill(process.pid, signal.SIGTERM)
        assert process.wait(10) == 0


def test_the_adapter_lists_every_page_of_servers_with_tag_filters(cloud: NovaCloud) -> None:
    import scoctl.adapters.nova as nova

    cloud.launch(launch("p", 5, tags=("sco:managed", "sco:pool=p")))
    cloud.launch(launch("q", 2, tags=("sco:managed", "sco:pool=q")))
    page, nova.LIST_PAGE = nova.LIST_PAGE, 2  # our own constant: force several pages
    try:
        every = cloud.servers(tags=("sco:managed",))
        only_p = cloud.servers(tags=("sco:managed", "sco:pool=p"))
        either = cloud.servers(any_tags=("sco:pool=p", "sco:pool=q"))
    finally:
        nova.LIST_PAGE = page
    assert len(every) == len({s.id for s in every}) == 7
    assert {s.name for s in only_p} == {f"p-{i}" for i in range(1, 6)}
    assert len(either) == 7
    assert all("sco:managed" in s.tags and s.flavor for s in every)


def test_retry_after_waits_are_never_shorter_and_differ_between_callers() -> None:
    hints = [RetryPolicy(rng=random.Random(seed)).backoff(1, 2.0) for seed in range(20)]

    assert all(2.0 <= wait <= 2.5 for wait in hints)
    assert len(set(hints)) == len(hints)  # twenty callers told "2 s" come back staggered
    assert RetryPolicy(retry_after_jitter=0).backoff(1, 2.0) == 2.0
    assert RetryPolicy(rng=random.Random(1)).backoff(1, 900.0) <= 120.5  # capped, then jitter


def test_an_image_name_resolves_to_its_id_again_once_the_answer_is_old(
        emulator: NovaEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # design: Drift: a controller that lives for months must launch (and hash) the image uploaded
    # again under its name, not the id it resolved on its first day
    monkeypatch.setenv(
        "OS_CLIENT_CONFIG_FILE", str(write_clouds_yaml(tmp_path, "emu", emulator.url, "demo")))
    raw = NovaCloud.connect("emu")
    cloud = NovaCloud(raw.connection, image_ttl=0.3)
    name = "fakeimage123456"
    assert cloud.image_id(name) == IMAGE_ID and cloud.image_id(IMAGE_ID) == IMAGE_ID
    fresh = "7d3c0d4e-0000-4000-8000-00000000feed"
    emulator.upload_image(name, fresh)
    assert cloud.image_id(name) == IMAGE_ID  # within the TTL: the answer it had
    time.sleep(0.35)
    assert cloud.image_id(name) == fresh
    [server] = cloud.launch(launch("again", image=name)).servers  # the create boots it too
    assert emulator.servers_summary()[0]["image"] == fresh, server
    with pytest.raises(ConfigError, match="not found"):
        cloud.image_id("no-such-image")
    raw.connection.close()
