"""The Nova adapter against BOTH backends: the emulator and the real Nova harness.

Every test runs twice through the `nova_cloud` fixture, with the same code; a test that passes
on one backend and fails on the other is an emulator bug.
"""

from __future__ import annotations

import base64
import ipaddress
import threading

import pytest

from scoctl.core.model import Headroom, LaunchRequest, LaunchResult, ServerInfo
from scoctl.errors import ConfigError, InsufficientCapacity, QuotaExceeded
from tests.fixtures.nova import NEUTRON_PROJECT, NovaBackend

pytestmark = pytest.mark.nova

USER_DATA = "#cloud-config\nwrite_files:\n  - path: /etc/sco\n    content: pool=a\n"


def request(backend: NovaBackend, name: str, **overrides: object) -> LaunchRequest:
    fields: dict[str, object] = {
        "name": name,
        "flavor": backend.small_flavor,
        "image": backend.image,
        "networks": "none",
    }
    fields.update(overrides)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def settled(servers: list[ServerInfo]) -> bool:
    return bool(servers) and all(s.status != "BUILD" for s in servers)


def wait_settled(backend: NovaBackend, tag: str, count: int) -> list[ServerInfo]:
    return backend.wait_for(
        lambda: backend.cloud.servers(tags=[tag]),
        lambda ss: len(ss) == count and settled(ss),
    )


def test_flavors_are_listed_with_their_shape(nova_cloud: NovaBackend) -> None:
    flavors = {f.name: f for f in nova_cloud.cloud.flavors()}

    assert {"m1.tiny", "m1.small", "m1.medium", "m1.large", "m1.xlarge"} <= set(flavors)
    assert (flavors["m1.tiny"].vcpus, flavors["m1.tiny"].ram_mb) == (1, 512)
    assert (flavors["m1.xlarge"].vcpus, flavors["m1.xlarge"].ram_mb) == (8, 16384)


def test_headroom_is_quota_minus_materialised_instances(nova_cloud: NovaBackend) -> None:
    assert nova_cloud.cloud.headroom() == Headroom(instances=10, cores=20, ram_mb=51200)

    nova_cloud.cloud.launch(request(nova_cloud, "h", min_count=2, max_count=2, tags=("t:h",)))
    wait_settled(nova_cloud, "t:h", 2)

    headroom = nova_cloud.cloud.headroom()
    assert headroom == Headroom(instances=8, cores=18, ram_mb=51200 - 2 * 512)
    assert headroom.instances_of(vcpus=2, ram_mb=4096) == 8


def test_one_call_creates_n_servers_with_index_names_tags_metadata_and_user_data(
    nova_cloud: NovaBackend,
) -> None:
    tags = ("sco:managed", "sco:workload=orders-daily", "sco:launch=l-1")
    result = nova_cloud.cloud.launch(
        request(
            nova_cloud,
            "orders-daily-a1",
            min_count=3,
            max_count=3,
            tags=tags,
            metadata={"sco:pool": "m1.tiny.nova"},
            user_data=USER_DATA,
        )
    )

    assert isinstance(result, LaunchResult) and not result.adopted
    assert [s.name for s in result.servers] == [f"orders-daily-a1-{i}" for i in (1, 2, 3)]
    assert result.reservation_id.startswith("r-")
    servers = wait_settled(nova_cloud, "sco:launch=l-1", 3)
    assert {s.status for s in servers} == {"ACTIVE"}
    assert {s.reservation_id for s in servers} == {result.reservation_id}
    for server in servers:
        assert server.tags == frozenset(tags)
        assert server.metadata == {"sco:pool": "m1.tiny.nova"}
        assert server.flavor == "m1.tiny"
        raw = nova_cloud.connection.compute.get_server(server.id)
        assert base64.b64decode(raw.user_data).decode() == USER_DATA


@pytest.mark.parametrize("nova_project", [NEUTRON_PROJECT])
def test_an_active_server_on_a_network_has_its_fixed_ipv4_and_one_on_none_has_no_address(
    nova_cloud: NovaBackend,
) -> None:
    cloud = nova_cloud.cloud
    cloud.launch(request(nova_cloud, "addr-net", networks=(nova_cloud.network,),
                         tags=("t:addr",)))
    cloud.launch(request(nova_cloud, "addr-none", tags=("t:addr",)))

    servers = {s.name: s for s in wait_settled(nova_cloud, "t:addr", 2)}
    assert {s.status for s in servers.values()} == {"ACTIVE"}
    address = servers["addr-net"].address
    assert address is not None and ipaddress.ip_address(address).version == 4
    raw = nova_cloud.connection.compute.get_server(servers["addr-net"].id)
    [entries] = raw.addresses.values()
    assert address in [e["addr"] for e in entries if e.get("OS-EXT-IPS:type") == "fixed"]
    assert servers["addr-none"].address is None
    full = cloud.server(servers["addr-net"].id)
    assert full is not None and full.address == address


def test_servers_are_found_by_all_tags_or_any_tag(nova_cloud: NovaBackend) -> None:
    cloud = nova_cloud.cloud
    cloud.launch(request(nova_cloud, "a", tags=("sco:managed", "sco:pool=a")))
    cloud.launch(request(nova_cloud, "b", tags=("sco:managed", "sco:pool=b")))

    assert [s.name for s in cloud.servers(tags=["sco:managed", "sco:pool=a"])] == ["a"]
    assert {s.name for s in cloud.servers(tags=["sco:managed"])} == {"a", "b"}
    assert {s.name for s in cloud.servers(any_tags=["sco:pool=a", "sco:pool=b"])} == {"a", "b"}
    assert cloud.servers(tags=["sco:pool=c"]) == []


def test_no_valid_host_puts_every_instance_in_error_with_a_fault_on_get_by_id(
    nova_cloud: NovaBackend,
) -> None:
    cloud = nova_cloud.cloud
    cloud.launch(
        request(
            nova_cloud, "big", flavor=nova_cloud.too_big_flavor, min_count=2, max_count=2,
            tags=("t:big",),
        )
    )

    listed = wait_settled(nova_cloud, "t:big", 2)
    assert {s.status for s in listed} == {"ERROR"}
    assert {s.fault_code for s in listed} == {None}  # cell0: list views carry no fault
    for server in listed:
        full = cloud.server(server.id)
        assert full is not None and full.status == "ERROR"
        assert full.fault_code == 500
        assert full.fault_message == "No valid host was found. "
        assert full.fault_error() is InsufficientCapacity


def test_quota_shrinks_max_count_to_the_headroom(nova_cloud: NovaBackend) -> None:
    nova_cloud.set_quota(instances=5)

    result = nova_cloud.cloud.launch(
        request(nova_cloud, "q", min_count=2, max_count=20, tags=("t:q",))
    )

    assert [s.name for s in result.servers] == [f"q-{i}" for i in range(1, 6)]
    assert {s.status for s in wait_settled(nova_cloud, "t:q", 5)} == {"ACTIVE"}
    assert nova_cloud.cloud.headroom().instances == 0


def test_a_launch_below_min_count_headroom_raises_quota_exceeded(
    nova_cloud: NovaBackend,
) -> None:
    nova_cloud.set_quota(instances=2)

    with pytest.raises(QuotaExceeded) as caught:
        nova_cloud.cloud.launch(request(nova_cloud, "o", min_count=3, max_count=3))

    assert "Quota exceeded for instances: Requested 3, but already used 0 of 2 instances" in str(
        caught.value
    )
    assert nova_cloud.cloud.servers() == []


def test_racing_launches_pass_the_api_check_then_fail_the_async_quota_recheck(
    nova_cloud: NovaBackend,
) -> None:
    # Both POSTs see 0 instances used; the conductor's recheck then sees 16 of 10.
    barrier = threading.Barrier(2)
    results: list[LaunchResult] = []

    def launch(name: str) -> None:
        barrier.wait()
        results.append(
            nova_cloud.cloud.launch(
                request(nova_cloud, name, min_count=8, max_count=8, tags=("t:race",))
            )
        )

    threads = [threading.Thread(target=launch, args=(n,)) for n in ("ra", "rb")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(len(r.servers) for r in results) == [8, 8]
    servers = wait_settled(nova_cloud, "t:race", 16)
    assert {s.status for s in servers} == {"ERROR"}
    for server in servers[:3]:
        full = nova_cloud.cloud.server(server.id)
        assert full is not None and full.fault_code == 413
        assert full.fault_message == (
            "Quota exceeded for instances: Requested 8, but already used 10 of 10 instances"
        )
        assert full.fault_error() is QuotaExceeded
    assert nova_cloud.cloud.headroom().instances == 0  # ERROR instances still count


@pytest.mark.parametrize(
    "tags",
    [("a/b",), ("a,b",), ("x" * 61,), ("",), tuple(f"t{i}" for i in range(51))],
    ids=["slash", "comma", "too-long", "empty", "too-many"],
)
def test_a_tag_breaking_nova_rules_is_rejected_before_any_call(
    nova_cloud: NovaBackend, tags: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError):
        nova_cloud.cloud.launch(request(nova_cloud, "bad", tags=tags))

    assert nova_cloud.cloud.servers() == []
    if nova_cloud.emulator is not None:
        assert ("POST", "/v2.1/servers", 400) not in nova_cloud.emulator.calls()


def test_user_data_over_nova_limit_is_rejected_before_any_call(nova_cloud: NovaBackend) -> None:
    with pytest.raises(ConfigError, match="65535"):
        nova_cloud.cloud.launch(request(nova_cloud, "ud", user_data="x" * 49200))

    assert nova_cloud.cloud.servers() == []


def test_a_deleted_server_may_show_deleted_then_is_gone(nova_cloud: NovaBackend) -> None:
    cloud = nova_cloud.cloud
    first = cloud.launch(request(nova_cloud, "d", tags=("t:d",))).servers[0]
    wait_settled(nova_cloud, "t:d", 1)

    cloud.delete(first.id)
    seen: set[str] = set()

    def read() -> ServerInfo | None:
        server = cloud.server(first.id)
        if server is not None:
            seen.add(server.status)
        return server

    nova_cloud.wait_for(read, lambda server: server is None)
    assert seen <= {"ACTIVE", "DELETED"}
    assert cloud.servers(tags=["t:d"]) == []
    cloud.delete(first.id)  # deleting a server that is gone is not an error
