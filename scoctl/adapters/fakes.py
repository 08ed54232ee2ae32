"""In-package fakes of scoctl's own Protocols, for stage tests (design: Testing).

`FakeCloud` is a `Cloud` kept in memory. It follows the Nova behaviour the stages rely on
(design: Acquirer, the Nova recipe): one `launch` is one multi-create whose servers are named
`<name>-<i>` (a single server keeps `<name>`) and share a reservation id; the quota check shrinks
`max_count` to the headroom when at least `min_count` fits and raises `QuotaExceeded` otherwise;
ERROR servers count against the quota until deleted; list views carry no fault, `server(id)`
does. Servers start in BUILD and settle (ACTIVE, or ERROR for an injected NoValidHost or quota
recheck failure) on the next read, so a stage that polls sees them change without any sleep;
an ACTIVE server launched on a network (not ``none``) has an address (127.0.0.2, ...:
loopback-looking, never routed to).

It records every call (`calls`, `requests`), spends `spend_token` before every mutating attempt
like the Nova adapter, and injects faults: `fail_next(method, error)`, `no_valid_host(...)`,
`fail_quota_recheck(n)`. `reset()` brings it back to its initial state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from scoctl.adapters.cloud import check_tags, encode_user_data
from scoctl.core.model import (
    QUOTA_FAULT_CODE,
    FlavorInfo,
    Headroom,
    LaunchRequest,
    LaunchResult,
    ServerInfo,
)
from scoctl.core.model.vocabulary import ServerStatus
from scoctl.errors import ConfigError, QuotaExceeded, ScoctlError

NO_VALID_HOST = "No valid host was found. "

DEFAULT_FLAVORS = (
    FlavorInfo(id="1", name="m1.tiny", vcpus=1, ram_mb=512, disk_gb=1),
    FlavorInfo(id="2", name="m1.small", vcpus=1, ram_mb=2048, disk_gb=20),
    FlavorInfo(id="3", name="m1.medium", vcpus=2, ram_mb=4096, disk_gb=40),
    FlavorInfo(id="4", name="m1.large", vcpus=4, ram_mb=8192, disk_gb=80),
    FlavorInfo(id="5", name="m1.xlarge", vcpus=8, ram_mb=16384, disk_gb=160),
)


@dataclass
class _FakeServer:
    info: ServerInfo
    ram_mb: int
    vcpus: int
    doom: tuple[int, str] | None = None  # (fault code, message) applied when it settles
    user_data: str | None = None
    address: str | None = None  # given once it is ACTIVE


@dataclass
class FakeCloud:
    """A recording, fault-injecting `Cloud` in memory (one project, one region)."""

    flavor_list: Sequence[FlavorInfo] = DEFAULT_FLAVORS
    quota_instances: int | None = None
    quota_cores: int | None = None
    quota_ram_mb: int | None = None
    spend_token: Callable[[], None] | None = None
    images: dict[str, str] = field(default_factory=dict)  # name -> id (others: their own id)
    calls: list[tuple[str, object]] = field(default_factory=list)
    requests: list[LaunchRequest] = field(default_factory=list)
    _servers: dict[str, _FakeServer] = field(default_factory=dict)
    _failures: dict[str, list[ScoctlError]] = field(default_factory=dict)
    _nvh_flavors: set[str] = field(default_factory=set)
    _nvh_azs: set[str] = field(default_factory=set)
    _recheck_failures: int = 0
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        self._initial = (self.quota_instances, self.quota_cores, self.quota_ram_mb)

    # ------------------------------------------------------------------ fault injection

    def fail_next(self, method: str, error: ScoctlError, count: int = 1) -> None:
        """Make the next `count` calls of `method` (`launch`, `delete`, `headroom`, `servers`,
        `server`, `flavors`) raise `error` before doing anything."""
        self._failures.setdefault(method, []).extend([error] * count)

    def no_valid_host(self, *, flavor: str | None = None, az: str | None = None) -> None:
        """Launches of this flavor (name or id) or into this AZ go ERROR with NoValidHost."""
        if flavor is not None:
            self._nvh_flavors.add(self._flavor(flavor).id)
        if az is not None:
            self._nvh_azs.add(az)

    def fail_quota_recheck(self, count: int = 1) -> None:
        """The next `count` launches pass the API quota check, then go ERROR with fault 413."""
        self._recheck_failures += count

    def set_quota(self, *, instances: int | None = None, cores: int | None = None,
                  ram_mb: int | None = None) -> None:
        """Set the project quota (None: unlimited)."""
        self.quota_instances, self.quota_cores, self.quota_ram_mb = instances, cores, ram_mb

    def reset(self) -> None:
        """Forget every server, call, injected fault and quota change."""
        self.calls.clear()
        self.requests.clear()
        self._servers.clear()
        self._failures.clear()
        self._nvh_flavors.clear()
        self._nvh_azs.clear()
        self._recheck_failures = 0
        self.quota_instances, self.quota_cores, self.quota_ram_mb = self._initial

    # ------------------------------------------------------------------ inspection

    def launch_calls(self) -> list[LaunchRequest]:
        """The launch requests made so far (every attempt, failed ones included)."""
        return list(self.requests)

    def mutating_calls(self) -> int:
        """How many create and delete attempts were made."""
        return sum(1 for method, _ in self.calls if method in ("launch", "delete"))

    def user_data_of(self, server_id: str) -> str | None:
        """The base64 user_data a server was created with."""
        server = self._servers.get(server_id)
        return server.user_data if server else None

    # ------------------------------------------------------------------ Cloud

    def flavors(self) -> list[FlavorInfo]:
        """Every flavor. Raises what `fail_next('flavors', ...)` injected."""
        self._enter("flavors", None)
        return list(self.flavor_list)

    def headroom(self) -> Headroom:
        """Quota minus every server not yet deleted (ERROR ones included)."""
        self._enter("headroom", None)
        return self._room()

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """One multi-create: shrink to the quota headroom, or QuotaExceeded below min_count."""
        if self.spend_token is not None:
            self.spend_token()
        self.requests.append(request)
        self._enter("launch", request)
        check_tags(request.tags)
        user_data = encode_user_data(request.user_data) if request.user_data is not None \
            else None
        if request.min_count < 1 or request.max_count < request.min_count:
            raise ConfigError("need 1 <= min_count <= max_count", field="count")
        flavor = self._flavor(request.flavor)
        room = self._room().instances_of(flavor.vcpus, flavor.ram_mb)
        count = request.max_count if room is None else min(request.max_count, room)
        if count < request.min_count:
            raise QuotaExceeded(f"Quota exceeded for instances: Requested {request.min_count}, "
                                f"but only {room if room is not None else 0} left")
        doom: tuple[int, str] | None = None
        if flavor.id in self._nvh_flavors or (request.az or "") in self._nvh_azs:
            doom = (500, NO_VALID_HOST)
        elif self._recheck_failures > 0:
            self._recheck_failures -= 1
            doom = (QUOTA_FAULT_CODE, f"Quota exceeded for instances: Requested {count}")
        reservation = f"r-{next(self._ids):08d}"
        servers = []
        for index in range(count):
            serial = next(self._ids)
            address = None if request.networks == "none" else \
                f"127.0.{serial // 250 % 256}.{2 + serial % 250}"
            info = ServerInfo(
                id=f"srv-{serial:06d}",
                name=f"{request.name}-{index + 1}" if count > 1 else request.name,
                status=ServerStatus.BUILD, tags=frozenset(request.tags),
                metadata=dict(request.metadata),
                flavor=flavor.name, az=request.az or "nova", reservation_id=reservation)
            self._servers[info.id] = _FakeServer(info=info, ram_mb=flavor.ram_mb,
                                                 vcpus=flavor.vcpus, doom=doom,
                                                 user_data=user_data, address=address)
            servers.append(info)
        return LaunchResult(reservation_id=reservation, servers=tuple(servers))

    def servers(
        self,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        reservation_id: str | None = None,
    ) -> list[ServerInfo]:
        """Servers with all `tags` and one of `any_tags`, newest first; settles BUILD ones."""
        all_tags, some_tags = frozenset(tags), frozenset(any_tags)
        self._enter("servers", (sorted(all_tags), sorted(some_tags), reservation_id))
        self._settle()
        out = []
        for server in reversed(list(self._servers.values())):
            info = server.info
            if all_tags and not all_tags <= info.tags:
                continue
            if some_tags and not some_tags & info.tags:
                continue
            if reservation_id and info.reservation_id != reservation_id:
                continue
            out.append(replace(info, fault_code=None, fault_message=None))  # list: no fault
        return out

    def server(self, server_id: str) -> ServerInfo | None:
        """One server with its fault; None when gone."""
        self._enter("server", server_id)
        self._settle()
        server = self._servers.get(server_id)
        return server.info if server else None

    def delete(self, server_id: str) -> None:
        """Delete a server at once (gone already is fine)."""
        if self.spend_token is not None:
            self.spend_token()
        self._enter("delete", server_id)
        self._servers.pop(server_id, None)

    def image_id(self, ref: str) -> str:
        """The id `images` gives the name `ref`, else `ref` itself (not recorded in `calls`;
        `fail_next('image_id', ...)` still applies)."""
        queue = self._failures.get("image_id")
        if queue:
            raise queue.pop(0)
        return self.images.get(ref, ref)

    # ------------------------------------------------------------------ internals

    def _room(self) -> Headroom:
        used_i, used_c, used_r = self._usage()

        def left(limit: int | None, used: int) -> int | None:
            return None if limit is None else max(0, limit - used)

        return Headroom(instances=left(self.quota_instances, used_i),
                        cores=left(self.quota_cores, used_c),
                        ram_mb=left(self.quota_ram_mb, used_r))

    def _enter(self, method: str, argument: object) -> None:
        self.calls.append((method, argument))
        queue = self._failures.get(method)
        if queue:
            raise queue.pop(0)

    def _usage(self) -> tuple[int, int, int]:
        servers = list(self._servers.values())
        return (len(servers), sum(s.vcpus for s in servers), sum(s.ram_mb for s in servers))

    def _settle(self) -> None:
        for server in self._servers.values():
            if server.info.status != ServerStatus.BUILD:
                continue
            if server.doom is None:
                server.info = replace(server.info, status=ServerStatus.ACTIVE,
                                      address=server.address)
            else:
                code, message = server.doom
                server.info = replace(server.info, status=ServerStatus.ERROR, fault_code=code,
                                      fault_message=message)

    def _flavor(self, ref: str) -> FlavorInfo:
        for flavor in self.flavor_list:
            if ref in (flavor.id, flavor.name):
                return flavor
        raise ConfigError(f"flavor {ref!r} not found in the cloud", field="flavor")
