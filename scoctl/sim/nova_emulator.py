"""A Nova compute API emulator on 127.0.0.1, faithful to what scoctl uses.

It is checked against the real Nova harness (`scoctl.sim.nova_harness`) by one adapter test
suite: any difference between the two is a bug here. Modelled (Nova 26 "Zed", microversion 2.93):

* version discovery (`GET /`, `GET /v2.1/`), microversion negotiation and echo
  (`OpenStack-API-Version: compute X.Y` / `X-OpenStack-Nova-API-Version`);
* noauth2 tokens `<user>:<project>`: every project has its own servers and quota, user `admin`
  is an admin (sees `OS-EXT-SRV-ATTR:*`, may set quotas);
* flavors, availability zones, Nova's image, network and security group proxies
  (microversion <= 2.35);
* `POST /servers` validation with Nova's error bodies (JSON-schema messages, min/max count,
  tags >= 2.52, networks >= 2.37, metadata, base64 user_data <= 65535), multi-create naming
  `<name>-<i>` with one reservation_id, `return_reservation_id`, 202 with the first server;
* Nova's quota algorithm (`check_num_instances_quota`): shrink max_count to the headroom when it
  is >= min_count, else 403 with Nova's message; usage (`/limits`, `/os-quota-sets`) counts only
  *materialised* instances, i.e. those the conductor has written to a cell after scheduling;
* the conductor's timeline per request: scheduling (NoValidHost buries every instance of the
  request in "cell0": ERROR, fault 500, shown on GET by id but not in list views), then the
  quota recheck (over quota: every instance ERROR with fault 413), then BUILD -> ACTIVE;
* `addresses`: once scheduled, a server has one fixed IPv4 per network it attached (the listed
  ones; the first for ``auto``; none for ``none``), on loopback-looking values 127.0.0.2,
  127.0.0.3, ... that no test routes traffic to;
* DELETE: the server shows `DELETED` (and still counts) for a moment, then is gone;
* list filters tags / tags-any / not-tags / not-tags-any / reservation_id / status / name
  (regex), pagination (limit, marker, servers_links), `GET /servers/{id}/tags`;
* server metadata after create (`/servers/{id}/metadata[/{key}]`: read, merge, replace, set
  and delete one item), as a reclaimer sets ``sco:reclaim-at``.

Faults real Nova never produces are injectable: the next N responses as 429/503 with
Retry-After, or 500s, before or after the request was applied (a gateway answering 503 after
Nova did the work), optionally held back for a while (a client timing out meanwhile).
A single host per availability zone with a configurable capacity decides
NoValidHost the way Placement does for the real harness's fake driver.

Time is evaluated lazily: every request first applies the conductor events that are due, so two
requests that race behave exactly like two racing requests on a real Nova.

In process: `NovaEmulator(seed).start()`, `.url`, `.stop()`, plus the control methods.
As a subprocess: `python -m scoctl.sim.nova_emulator --port 0 --ready-file F [--seed-file S]`;
the control methods are then reachable as `POST /_sim/<name>` with a JSON body (see `_CONTROL`).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import copy
import heapq
import ipaddress
import itertools
import json
import os
import random
import re
import signal
import string
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

MIN_VERSION = (2, 1)
MAX_VERSION = (2, 93)
Version = tuple[int, int]
Json = dict[str, Any]

IMAGE_ID = "155d900f-4e14-4e4c-a73d-069cbf4541e6"
NETWORK_ID = "3cb9bc59-5699-4588-a4b1-b87f96708bc6"

# The same world the real harness starts with (Nova's DefaultFlavorsFixture, GlanceFixture,
# NeutronFixture, default quotas), so one test suite can run against both.
DEFAULT_SEED: Json = {
    "flavors": [
        {"id": "1", "name": "m1.tiny", "vcpus": 1, "ram": 512, "disk": 1},
        {"id": "2", "name": "m1.small", "vcpus": 1, "ram": 2048, "disk": 20},
        {"id": "3", "name": "m1.medium", "vcpus": 2, "ram": 4096, "disk": 40},
        {"id": "4", "name": "m1.large", "vcpus": 4, "ram": 8192, "disk": 80},
        {"id": "5", "name": "m1.xlarge", "vcpus": 8, "ram": 16384, "disk": 160},
        {"id": "6", "name": "m1.tiny.specs", "vcpus": 1, "ram": 512, "disk": 1,
         "extra_specs": {"hw:numa_nodes": "1"}},
    ],
    "availability_zones": ["nova"],
    "images": [{"id": IMAGE_ID, "name": "fakeimage123456"}],
    "networks": [{"id": NETWORK_ID, "name": "private"}],
    "security_groups": ["default"],
    "keypairs": [],
    "quota": {"instances": 10, "cores": 20, "ram": 51200},
    # One host per availability zone; None means unlimited.
    "capacity": {"vcpus": 64, "ram": 16000, "disk": 4000},
    "az_capacity": {},
    # Seconds after the POST: scheduling (materialise or NoValidHost), then the quota recheck,
    # then ACTIVE; and how long a deleted server stays visible as DELETED.
    "timing": {"schedule": 0.3, "recheck": 0.05, "active": 0.6, "delete": 0.3},
}

OTHER_QUOTAS = {"key_pairs": 100, "metadata_items": 128, "server_groups": 10,
                "server_group_members": 10}

STATUSES = {
    "ACTIVE", "BUILD", "DELETED", "ERROR", "HARD_REBOOT", "MIGRATING", "PASSWORD", "PAUSED",
    "REBOOT", "REBUILD", "RESCUE", "RESIZE", "REVERT_RESIZE", "SHELVED", "SHELVED_OFFLOADED",
    "SHUTOFF", "SOFT_DELETED", "SUSPENDED", "UNKNOWN", "VERIFY_RESIZE",
}

FAULT_NAMES = {400: "badRequest", 401: "unauthorized", 403: "forbidden", 404: "itemNotFound",
               405: "badMethod", 406: "notAcceptable", 409: "conflictingRequest",
               413: "overLimit", 415: "badMediaType", 429: "overLimit",
               501: "notImplemented", 503: "serviceUnavailable"}

TAG_RE = re.compile(r"^[^,/]*$")
METADATA_KEY_RE = re.compile(r"^[a-zA-Z0-9-_:. ]{1,255}$")
DIGITS_RE = re.compile(r"^[0-9]*$")
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                     r"[0-9a-fA-F]{12}$")
NO_VALID_HOST = "No valid host was found. "
CREATE_KEYS = {
    "name", "imageRef", "flavorRef", "networks", "min_count", "max_count", "metadata",
    "user_data", "availability_zone", "key_name", "security_groups", "return_reservation_id",
    "adminPass", "OS-DCF:diskConfig", "accessIPv4", "accessIPv6", "config_drive",
    "block_device_mapping_v2", "description", "tags", "hostname", "personality",
    "trusted_image_certificates", "host", "hypervisor_hostname",
}


class ApiFault(Exception):
    """An error response in Nova's shape: `{"<faultName>": {"code": N, "message": "..."}}`."""

    def __init__(self, code: int, message: str, headers: Mapping[str, str] | None = None,
                 stall: float = 0.0) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.headers = dict(headers or {})
        self.stall = stall  # seconds to hold the answer back (an injected fault only)

    def body(self) -> Json:
        """The JSON body Nova's FaultWrapper would send."""
        inner: Json = {"code": self.code, "message": self.message}
        if "Retry-After" in self.headers:
            inner["retryAfter"] = self.headers["Retry-After"]
        return {FAULT_NAMES.get(self.code, "computeFault"): inner}


def _invalid(field_name: str, value: object, problem: str) -> ApiFault:
    """Nova's JSON-schema error message."""
    return ApiFault(400, f"Invalid input for field/attribute {field_name}. "
                         f"Value: {value}. {problem}")


def _now_iso() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Flavor:
    id: str
    name: str
    vcpus: int
    ram: int
    disk: int
    extra_specs: dict[str, str] = field(default_factory=dict)


@dataclass
class _Server:
    id: str
    name: str
    project: str
    user: str
    flavor: _Flavor
    image: str
    reservation_id: str
    launch_index: int
    seq: int
    requested_az: str | None
    tags: list[str]
    metadata: dict[str, str]
    user_data: str | None
    key_name: str | None
    security_groups: list[str]
    created: str
    updated: str
    status: str = "BUILD"
    vm_state: str = "building"
    task_state: str | None = "scheduling"
    az: str = ""
    host: str | None = None
    materialised: bool = False
    in_cell0: bool = False
    fault: Json | None = None
    launched_at: str | None = None
    networks: list[str] = field(default_factory=list)  # names, attached once it spawns
    addresses: dict[str, list[Json]] = field(default_factory=dict)


@dataclass
class _Request:
    reservation_id: str
    project: str
    flavor: _Flavor
    az: str | None
    servers: list[_Server]
    force_recheck_failure: bool = False


@dataclass
class _Injection:
    code: int
    remaining: int
    retry_after: float | None
    methods: frozenset[str] | None
    after: bool = False
    stall: float = 0.0


def _parse_version(text: str) -> Version:
    if text.strip().lower() == "latest":
        return MAX_VERSION
    match = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", text)
    if not match:
        raise ApiFault(400, f"API Version String {text} is of invalid format. Must be of "
                            "format MajorNum.MinorNum.")
    version = (int(match.group(1)), int(match.group(2)))
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ApiFault(406, f"Version {text.strip()} is not supported by the API. Minimum is "
                            "2.1 and maximum is 2.93.")
    return version


def _requested_version(headers: Mapping[str, str]) -> Version:
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("openstack-api-version")
    if value:
        for part in value.split(","):
            words = part.split()
            if len(words) == 2 and words[0].lower() == "compute":
                return _parse_version(words[1])
    legacy = lowered.get("x-openstack-nova-api-version")
    if legacy:
        return _parse_version(legacy)
    return MIN_VERSION


def _positive_int(name: str, value: object) -> int:
    # parameter_types.positive_integer: an int >= 1, or a string of digits.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _invalid(name, value, f"{value!r} is not of type 'integer', 'string'")
    if isinstance(value, str):
        if not DIGITS_RE.match(value) or value == "":
            raise _invalid(name, value, f"{value!r} does not match '^[0-9]*$'")
        number = int(value)
    else:
        number = value
    if number < 1:
        raise _invalid(name, value, f"{value} is less than the minimum of 1")
    return number


def _valid_base64(text: str) -> bool:
    try:
        base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class NovaEmulator:
    """A loopback Nova: start it, point openstacksdk at `url`, steer it with the control API.

    Thread-safe: all state sits behind one lock; HTTP handlers and control calls share it.
    """

    def __init__(
        self,
        seed: Mapping[str, Any] | None = None,
        *,
        port: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        merged = copy.deepcopy(DEFAULT_SEED)
        for key, value in (seed or {}).items():
            merged[key] = copy.deepcopy(value)
        if seed and "timing" in seed:
            merged["timing"] = {**DEFAULT_SEED["timing"], **seed["timing"]}
        self._seed = merged
        self._port = port
        self._clock = clock
        self._lock = threading.RLock()
        self._rng = random.Random()
        self._flavors = {
            str(f["id"]): _Flavor(
                id=str(f["id"]), name=str(f["name"]), vcpus=int(f["vcpus"]), ram=int(f["ram"]),
                disk=int(f.get("disk", 0)), extra_specs=dict(f.get("extra_specs") or {}))
            for f in merged["flavors"]
        }
        self._azs: list[str] = [str(az) for az in merged["availability_zones"]]
        self._images: list[Json] = [dict(i) for i in merged["images"]]
        self._networks: list[Json] = [dict(n) for n in merged["networks"]]
        self._security_groups = {str(s) for s in merged["security_groups"]}
        self._keypairs = {str(k) for k in merged["keypairs"]}
        self._default_quota: dict[str, int] = {k: int(v) for k, v in merged["quota"].items()}
        self._quotas: dict[str, dict[str, int]] = {}
        self._capacity: dict[str, dict[str, int] | None] = {}
        for az in self._azs:
            cap = merged["az_capacity"].get(az, merged["capacity"])
            self._capacity[az] = None if cap is None else {k: int(v) for k, v in cap.items()}
        self._timing: dict[str, float] = {k: float(v) for k, v in merged["timing"].items()}
        self._servers: dict[str, _Server] = {}
        self._events: list[tuple[float, int, str, str, _Request | None]] = []
        self._counter = itertools.count(1)
        self._addresses = itertools.count(2)  # 127.0.0.2 on: never routed anywhere but here
        self._injections: list[_Injection] = []
        self._nvh_flavors: set[str] = set()
        self._nvh_azs: set[str] = set()
        self._recheck_failures = 0
        self._calls: list[tuple[str, str, int]] = []
        self._call_times: list[float] = []  # wall-clock arrival of each call in `_calls`
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> NovaEmulator:
        """Listen on 127.0.0.1 (port 0: the OS picks one) and serve in a background thread."""
        handler = _make_handler(self)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self._port), handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="nova-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> NovaEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port actually bound."""
        if self._httpd is None:
            raise RuntimeError("the emulator is not running")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The compute endpoint, e.g. `http://127.0.0.1:PORT/v2.1`."""
        return f"http://127.0.0.1:{self.port}/v2.1"

    # ----------------------------------------------------------------- control API

    def set_quota(self, project: str, **limits: int) -> None:
        """Set `instances`, `cores`, `ram` (MiB) or other quotas of a project; -1 = unlimited."""
        with self._lock:
            self._quotas.setdefault(project, {}).update({k: int(v) for k, v in limits.items()})

    def inject(self, code: int, count: int = 1, retry_after: float | None = None,
               methods: Iterable[str] | None = None, after: bool = False,
               stall: float = 0.0) -> None:
        """Answer the next `count` API requests (of `methods`, default all) with `code`.

        429 and 503 carry `Retry-After` when `retry_after` is given. The request is not applied,
        unless `after` is true: then it is applied and its answer lost (a gateway answering
        503 or 500 after Nova did the work). `stall` holds the answer back that many seconds
        first (with `after`: a client that times out while Nova does the work).
        """
        with self._lock:
            self._injections.append(_Injection(
                code=int(code), remaining=int(count), retry_after=retry_after,
                methods=None if methods is None else frozenset(m.upper() for m in methods),
                after=after, stall=float(stall)))

    def set_no_valid_host(self, *, flavor: str | None = None, az: str | None = None,
                          enabled: bool = True) -> None:
        """Make scheduling fail (NoValidHost) for a flavor (id or name) or an AZ."""
        with self._lock:
            if flavor is not None:
                flavor_id = self._flavor(flavor).id
                (self._nvh_flavors.add if enabled else self._nvh_flavors.discard)(flavor_id)
            if az is not None:
                (self._nvh_azs.add if enabled else self._nvh_azs.discard)(az)

    def set_capacity(self, az: str, vcpus: int | None = None, ram: int | None = None,
                     disk: int | None = None, unlimited: bool = False) -> None:
        """Resize the single host of an AZ (what Placement can hand out there)."""
        with self._lock:
            if unlimited:
                self._capacity[az] = None
                return
            current = self._capacity.get(az) or {"vcpus": 0, "ram": 0, "disk": 0}
            updates = {"vcpus": vcpus, "ram": ram, "disk": disk}
            current.update({k: int(v) for k, v in updates.items() if v is not None})
            self._capacity[az] = current

    def upload_image(self, name: str, image_id: str) -> None:
        """An image uploaded again under `name` (Glance keeps names unique only by habit): the
        new image `image_id` takes the name, the old one is renamed `<name>-previous` (its
        servers still run it), as operators roll a monthly golden image."""
        with self._lock:
            for image in self._images:
                if image["name"] == name:
                    image["name"] = f"{name}-previous"
            self._images.append({"id": str(image_id), "name": name})

    def fail_quota_recheck(self, count: int = 1) -> None:
        """Make the conductor's quota recheck fail (fault 413) for the next `count` requests."""
        with self._lock:
            self._recheck_failures += int(count)

    def set_timing(self, **seconds: float) -> None:
        """Change `schedule`, `recheck`, `active` (BUILD -> ACTIVE) or `delete` delays."""
        with self._lock:
            unknown = set(seconds) - set(self._timing)
            if unknown:
                raise ValueError(f"unknown timing keys: {sorted(unknown)}")
            self._timing.update({k: float(v) for k, v in seconds.items()})

    def reclaim(self, server_id: str, mode: str = "delete") -> None:
        """Take an instance back like a spot reclaim: `delete` it or put it in `error`."""
        with self._lock:
            self._advance()
            server = self._servers.get(server_id)
            if server is None:
                raise KeyError(server_id)
            if mode == "delete":
                del self._servers[server_id]
            elif mode == "error":
                server.status, server.vm_state, server.task_state = "ERROR", "error", None
                server.fault = {"code": 500, "created": _now_iso(),
                                "message": "Instance reclaimed by the provider"}
                server.updated = _now_iso()
            else:
                raise ValueError(f"unknown reclaim mode {mode!r}")

    def settle(self) -> None:
        """Apply every pending conductor event now, whatever its due time (for fast tests)."""
        with self._lock:
            self._advance(until=float("inf"))

    def servers_summary(self, project: str | None = None) -> list[Json]:
        """Plain view of the servers (any project, or one), newest first."""
        with self._lock:
            self._advance()
            return [
                {"id": s.id, "name": s.name, "project": s.project, "status": s.status,
                 "tags": list(s.tags), "metadata": dict(s.metadata), "az": s.az,
                 "flavor": s.flavor.name, "reservation_id": s.reservation_id,
                 "user_data": s.user_data, "fault": s.fault, "image": s.image}
                for s in self._sorted(project)
            ]

    def calls(self) -> list[tuple[str, str, int]]:
        """Every API call so far as (method, path, status)."""
        with self._lock:
            return list(self._calls)

    def timed_calls(self) -> list[tuple[float, str, str, int]]:
        """Every API call so far as (arrival time.time(), method, path, status)."""
        with self._lock:
            return [(t, *c) for t, c in zip(self._call_times, self._calls, strict=True)]

    # ----------------------------------------------------------------- time

    def _schedule(self, delay_key: str, kind: str, request: _Request | None,
                  server_id: str = "", base: float | None = None) -> None:
        due = (self._clock() if base is None else base) + self._timing[delay_key]
        heapq.heappush(self._events, (due, next(self._counter), kind, server_id, request))

    def _advance(self, until: float | None = None) -> None:
        now = self._clock() if until is None else until
        while self._events and self._events[0][0] <= now:
            due, _, kind, server_id, request = heapq.heappop(self._events)
            if kind == "schedule" and request is not None:
                self._on_schedule(request, due)
            elif kind == "recheck" and request is not None:
                self._on_recheck(request, due)
            elif kind == "active" and request is not None:
                self._on_active(request)
            elif kind == "purge":
                self._servers.pop(server_id, None)

    def _alive(self, request: _Request) -> list[_Server]:
        return [s for s in request.servers if s.id in self._servers and s.status != "DELETED"]

    def _on_schedule(self, request: _Request, due: float) -> None:
        servers = self._alive(request)
        if not servers:
            return
        az = self._place(request, len(servers))
        stamp = _now_iso()
        if az is None:
            # conductor._bury_in_cell0: every instance of the request, fault 500.
            for server in servers:
                server.status, server.vm_state, server.task_state = "ERROR", "error", None
                server.materialised, server.in_cell0 = True, True
                server.fault = {"code": 500, "created": stamp, "message": NO_VALID_HOST,
                                "details": "NoValidHost: " + NO_VALID_HOST}
                server.updated = stamp
            return
        for server in servers:
            server.az, server.host = az, f"compute-{az}"
            server.materialised = True
            server.task_state = "spawning"
            server.updated = stamp
            server.addresses = {name: [self._fixed_ip()] for name in server.networks}
        self._schedule("recheck", "recheck", request, base=due)

    def _fixed_ip(self) -> Json:
        """One port's entry in a server's ``addresses``, as Nova shows it: a loopback-looking
        fixed IPv4 (127.0.0.2, 127.0.0.3, ...: nothing but this host answers there)."""
        address = ipaddress.IPv4Address("127.0.0.0") + next(self._addresses)
        mac = "fa:16:3e:" + ":".join(f"{self._rng.randrange(256):02x}" for _ in range(3))
        return {"version": 4, "addr": str(address), "OS-EXT-IPS:type": "fixed",
                "OS-EXT-IPS-MAC:mac_addr": mac}

    def _attached(self, networks: object) -> list[str]:
        """The networks a create request attaches, by name: the listed ones (ports and fixed
        IPs the emulator does not model are left out), the first one for ``auto`` or when the
        request names none (Nova before 2.37), none for ``none``."""
        by_id = {str(n["id"]): str(n["name"]) for n in self._networks}
        if isinstance(networks, list):
            return [by_id[str(net["uuid"])] for net in networks
                    if isinstance(net, dict) and str(net.get("uuid")) in by_id]
        if networks == "none" or not self._networks:
            return []
        return [str(self._networks[0]["name"])]

    def _place(self, request: _Request, count: int) -> str | None:
        if request.flavor.id in self._nvh_flavors:
            return None
        candidates = [request.az] if request.az else list(self._azs)
        best: tuple[float, str] | None = None
        for az in candidates:
            if az in self._nvh_azs:
                continue
            capacity = self._capacity.get(az)
            if capacity is None:
                free = float("inf")
            else:
                used = {"vcpus": 0, "ram": 0, "disk": 0}
                for server in self._servers.values():
                    if server.host and server.az == az and server.status != "DELETED":
                        used["vcpus"] += server.flavor.vcpus
                        used["ram"] += server.flavor.ram
                        used["disk"] += server.flavor.disk
                need = {"vcpus": request.flavor.vcpus, "ram": request.flavor.ram,
                        "disk": request.flavor.disk}
                free = min(
                    (capacity.get(k, 0) - used[k]) // need[k] if need[k] else float("inf")
                    for k in need
                )
            if free >= count and (best is None or free > best[0]):
                best = (free, az)
        return None if best is None else best[1]

    def _on_recheck(self, request: _Request, due: float) -> None:
        servers = self._alive(request)
        if not servers:
            return
        # check_num_instances_quota(context, flavor, 0, 0, orig_num_req=N): usage > limit?
        quota = self._quota(request.project)
        usage = self._usage(request.project)
        overs = sorted(k for k in ("cores", "instances", "ram")
                       if quota[k] >= 0 and usage[k] > quota[k])
        if request.force_recheck_failure and not overs:
            overs = ["instances"]
        if overs:
            n = len(request.servers)
            requested = {"instances": n, "cores": n * request.flavor.vcpus,
                         "ram": n * request.flavor.ram}
            message = (
                f"Quota exceeded for {', '.join(overs)}: Requested "
                f"{', '.join(str(requested[k]) for k in overs)}, but already used "
                f"{', '.join(str(quota[k]) for k in overs)} of "
                f"{', '.join(str(quota[k]) for k in overs)} {', '.join(overs)}")
            stamp = _now_iso()
            for server in servers:
                server.status, server.vm_state, server.task_state = "ERROR", "error", None
                server.fault = {"code": 413, "created": stamp, "message": message,
                                "details": "TooManyInstances: " + message}
                server.updated = stamp
            return
        remaining = max(0.0, self._timing["active"] - self._timing["schedule"]
                        - self._timing["recheck"])
        heapq.heappush(self._events, (due + remaining, next(self._counter), "active", "",
                                      request))

    def _on_active(self, request: _Request) -> None:
        stamp = _now_iso()
        for server in self._alive(request):
            if server.status == "BUILD":
                server.status, server.vm_state, server.task_state = "ACTIVE", "active", None
                server.launched_at = stamp
                server.updated = stamp

    # ----------------------------------------------------------------- quota

    def _quota(self, project: str) -> dict[str, int]:
        return {**OTHER_QUOTAS, **self._default_quota, **self._quotas.get(project, {})}

    def _usage(self, project: str) -> dict[str, int]:
        usage = {"instances": 0, "cores": 0, "ram": 0}
        for server in self._servers.values():
            if server.project == project and server.materialised:
                usage["instances"] += 1
                usage["cores"] += server.flavor.vcpus
                usage["ram"] += server.flavor.ram
        return usage

    def _check_quota(self, project: str, flavor: _Flavor, min_count: int,
                     max_count: int) -> int:
        """nova.compute.utils.check_num_instances_quota: the count to build, or 403."""
        quota = self._quota(project)
        usage = self._usage(project)
        deltas = {"instances": max_count, "cores": max_count * flavor.vcpus,
                  "ram": max_count * flavor.ram}
        overs = sorted(k for k in deltas if quota[k] >= 0 and usage[k] + deltas[k] > quota[k])
        if not overs:
            return max_count
        headroom: dict[str, float] = {k: quota[k] - usage[k] for k in deltas}
        for key in ("cores", "ram"):
            if quota[key] == -1:
                per = deltas[key] / deltas["instances"] if deltas[key] else 1
                headroom[key] = headroom["instances"] * per
        allowed = headroom["instances"]
        if flavor.vcpus:
            allowed = min(allowed, headroom["cores"] // flavor.vcpus)
        if flavor.ram:
            allowed = min(allowed, headroom["ram"] // flavor.ram)
        allowed_count = int(allowed)
        if allowed_count > 0 and min_count <= allowed_count <= max_count:
            return self._check_quota(project, flavor, min_count, allowed_count)
        instances = str(min_count) if min_count == max_count else f"{min_count}-{max_count}"
        requested = {"instances": instances, "cores": str(deltas["cores"]),
                     "ram": str(deltas["ram"])}
        used = [str(int(quota[k] - headroom[k])) for k in overs]
        raise ApiFault(403, (
            f"Quota exceeded for {', '.join(overs)}: Requested "
            f"{', '.join(requested[k] for k in overs)}, but already used {', '.join(used)} of "
            f"{', '.join(str(quota[k]) for k in overs)} {', '.join(overs)}"))

    # ----------------------------------------------------------------- lookups

    def _flavor(self, ref: str) -> _Flavor:
        if ref in self._flavors:
            return self._flavors[ref]
        for flavor in self._flavors.values():
            if flavor.name == ref:
                return flavor
        raise ApiFault(400, f"Flavor {ref} could not be found.")

    def _sorted(self, project: str | None) -> list[_Server]:
        servers = [s for s in self._servers.values() if project is None or s.project == project]
        return sorted(servers, key=lambda s: s.seq, reverse=True)

    def _get_server(self, project: str, server_id: str) -> _Server:
        server = self._servers.get(server_id)
        if server is None or server.project != project:
            raise ApiFault(404, f"Instance {server_id} could not be found.")
        return server

    # ----------------------------------------------------------------- HTTP dispatch

    def handle(self, method: str, raw_path: str, headers: Mapping[str, str],
               body: bytes) -> tuple[int, dict[str, str], Json | None]:
        """Answer one HTTP request: (status, headers, JSON body or None)."""
        arrived = time.time()
        parts = urlsplit(raw_path)
        path = parts.path.rstrip("/") or "/"
        query = parse_qs(parts.query, keep_blank_values=True)
        if path.startswith("/_sim"):
            return self._control(method, path, body)
        try:
            status, out_headers, payload = self._dispatch(method, path, query, headers, body,
                                                          parts.query)
        except ApiFault as fault:
            if fault.stall:
                time.sleep(fault.stall)  # outside the lock: other requests go on meanwhile
            status, out_headers, payload = fault.code, dict(fault.headers), fault.body()
            if path.startswith("/v2.1/"):
                # Nova echoes the microversion on errors too (when the header parsed).
                try:
                    out_headers.update(self._version_headers(_requested_version(headers)))
                except ApiFault:
                    pass
        with self._lock:
            self._calls.append((method, path, status))
            self._call_times.append(arrived)
        return status, out_headers, payload

    def _dispatch(self, method: str, path: str, query: dict[str, list[str]],
                  headers: Mapping[str, str], body: bytes,
                  raw_query: str) -> tuple[int, dict[str, str], Json | None]:
        host = f"http://127.0.0.1:{self.port}" if self._httpd else "http://127.0.0.1"
        if path == "/":
            return 200, {}, {"versions": [
                {"id": "v2.0", "status": "SUPPORTED", "version": "", "min_version": "",
                 "updated": "2011-01-21T11:33:21Z",
                 "links": [{"rel": "self", "href": f"{host}/v2/"}]},
                self._version_doc(host)]}
        if path == "/v2.1":
            version_headers = self._version_headers(MIN_VERSION)
            return 200, version_headers, {"version": {
                **self._version_doc(host),
                "media-types": [{"base": "application/json",
                                 "type": "application/vnd.openstack.compute+json;version=2.1"}]}}
        if not path.startswith("/v2.1/"):
            raise ApiFault(404, "The resource could not be found.")
        version = _requested_version(headers)
        out_headers = self._version_headers(version)
        with self._lock:
            self._apply_injection(method, after=False)
        token = {k.lower(): v for k, v in headers.items()}.get("x-auth-token", "")
        if not token:
            raise ApiFault(401, "Unauthorized")
        user, _, project = token.partition(":")
        project = project or user
        ctx = _Ctx(user=user, project=project, admin=user == "admin", version=version,
                   host=host)
        route = path[len("/v2.1"):]
        with self._lock:
            self._advance()
            status, extra, payload = self._route(ctx, method, route, query, body, raw_query)
            self._apply_injection(method, after=True)
        out_headers.update(extra)
        return status, out_headers, payload

    def _apply_injection(self, method: str, *, after: bool) -> None:
        for injection in self._injections:
            if injection.remaining > 0 and injection.after == after and (
                    injection.methods is None or method in injection.methods):
                injection.remaining -= 1
                headers: dict[str, str] = {}
                if injection.retry_after is not None:
                    ra = injection.retry_after
                    headers["Retry-After"] = str(int(ra)) if float(ra).is_integer() else str(ra)
                messages = {429: "This request was rate-limited.",
                            503: "The server is currently unavailable. Please try again later."}
                message = messages.get(injection.code, "Unexpected API Error. Please report this "
                                       "at http://bugs.launchpad.net/nova/ and attach the Nova "
                                       "API log if possible.")
                self._injections = [i for i in self._injections if i.remaining > 0]
                raise ApiFault(injection.code, message, headers, stall=injection.stall)

    @staticmethod
    def _version_doc(host: str) -> Json:
        return {"id": "v2.1", "status": "CURRENT", "version": "2.93", "min_version": "2.1",
                "updated": "2013-07-23T11:33:21Z",
                "links": [{"rel": "self", "href": f"{host}/v2.1/"},
                          {"rel": "describedby", "type": "text/html",
                           "href": "http://docs.openstack.org/"}]}

    @staticmethod
    def _version_headers(version: Version) -> dict[str, str]:
        text = f"{version[0]}.{version[1]}"
        return {"OpenStack-API-Version": f"compute {text}", "X-OpenStack-Nova-API-Version": text,
                "Vary": "OpenStack-API-Version, X-OpenStack-Nova-API-Version"}

    def _route(self, ctx: _Ctx, method: str, route: str, query: dict[str, list[str]],
               body: bytes, raw_query: str) -> tuple[int, dict[str, str], Json | None]:
        segments = route.strip("/").split("/")
        head = segments[0]
        if head == "servers":
            if len(segments) == 1 and method == "POST":
                return self._create(ctx, _json_body(body))
            if len(segments) == 1 and method == "GET":
                return 200, {}, self._list(ctx, query, raw_query, detail=False)
            if segments[1:] == ["detail"] and method == "GET":
                return 200, {}, self._list(ctx, query, raw_query, detail=True)
            if len(segments) == 2 and method == "GET":
                server = self._get_server(ctx.project, segments[1])
                return 200, {}, {"server": self._view(ctx, server, detail=True, show=True)}
            if len(segments) == 2 and method == "DELETE":
                self._delete(ctx, segments[1])
                return 204, {}, None
            if len(segments) in (3, 4) and segments[2] == "metadata":
                server = self._get_server(ctx.project, segments[1])
                key = segments[3] if len(segments) == 4 else None
                return _server_metadata(server, method, key, body,
                                        self._quota(server.project)["metadata_items"])
            if len(segments) == 3 and segments[2] == "tags" and method == "GET":
                if ctx.version < (2, 26):
                    raise ApiFault(404, "The resource could not be found.")
                server = self._get_server(ctx.project, segments[1])
                if not server.materialised:
                    raise ApiFault(404, f"Instance {server.id} could not be found.")
                return 200, {}, {"tags": list(server.tags)}
        if head == "flavors" and method == "GET":
            if len(segments) == 1 or segments[1:] == ["detail"]:
                detail = len(segments) == 2
                return 200, {}, {"flavors": [self._flavor_view(ctx, f, detail)
                                             for f in self._flavors.values()]}
            if len(segments) == 2:
                if segments[1] not in self._flavors:
                    raise ApiFault(404, f"Flavor {segments[1]} could not be found.")
                return 200, {}, {"flavor": self._flavor_view(ctx, self._flavors[segments[1]],
                                                             True)}
        if head == "os-availability-zone" and method == "GET" and len(segments) == 1:
            return 200, {}, {"availabilityZoneInfo": [
                {"zoneName": az, "zoneState": {"available": True}, "hosts": None}
                for az in self._azs]}
        if head == "limits" and method == "GET":
            return 200, {}, {"limits": self._limits(ctx)}
        if head == "os-quota-sets" and len(segments) >= 2:
            return self._quota_sets(ctx, method, segments[1], segments[2:], body)
        if head == "images" and method == "GET" and ctx.version <= (2, 35):
            return 200, {}, {"images": [
                {"id": i["id"], "name": i["name"], "status": "ACTIVE", "minRam": 0,
                 "minDisk": 0, "metadata": {}, "progress": 100,
                 "links": [{"rel": "self", "href": f"{ctx.host}/v2.1/images/{i['id']}"}]}
                for i in self._images]}
        if head == "os-security-groups" and method == "GET" and len(segments) == 1 \
                and ctx.version <= (2, 35):
            return 200, {}, {"security_groups": [
                {"id": str(uuid.uuid5(uuid.NAMESPACE_URL, f"sg:{name}")), "name": name,
                 "description": "", "tenant_id": ctx.project, "rules": []}
                for name in sorted(self._security_groups)]}
        if head == "os-networks" and method == "GET" and ctx.version <= (2, 35):
            return 200, {}, {"networks": [{"id": n["id"], "label": n["name"]}
                                          for n in self._networks]}
        raise ApiFault(404, "The resource could not be found.")

    # ----------------------------------------------------------------- resources

    def _flavor_view(self, ctx: _Ctx, flavor: _Flavor, detail: bool) -> Json:
        links = [{"rel": "self", "href": f"{ctx.host}/v2.1/flavors/{flavor.id}"},
                 {"rel": "bookmark", "href": f"{ctx.host}/flavors/{flavor.id}"}]
        view: Json = {"id": flavor.id, "name": flavor.name, "links": links}
        if ctx.version >= (2, 55):
            view["description"] = None
        if detail:
            view.update({"ram": flavor.ram, "disk": flavor.disk, "swap": 0,
                         "OS-FLV-EXT-DATA:ephemeral": 0, "OS-FLV-DISABLED:disabled": False,
                         "vcpus": flavor.vcpus, "os-flavor-access:is_public": True,
                         "rxtx_factor": 1.0})
            if ctx.version >= (2, 61):
                view["extra_specs"] = dict(flavor.extra_specs)
        return view

    def _limits(self, ctx: _Ctx) -> Json:
        quota = self._quota(ctx.project)
        usage = self._usage(ctx.project)
        return {"rate": [], "absolute": {
            "maxTotalInstances": quota["instances"], "maxTotalCores": quota["cores"],
            "maxTotalRAMSize": quota["ram"], "maxServerMeta": quota["metadata_items"],
            "maxTotalKeypairs": quota["key_pairs"], "maxServerGroups": quota["server_groups"],
            "maxServerGroupMembers": quota["server_group_members"],
            "totalRAMUsed": usage["ram"], "totalCoresUsed": usage["cores"],
            "totalInstancesUsed": usage["instances"], "totalServerGroupsUsed": 0}}

    def _quota_sets(self, ctx: _Ctx, method: str, project: str, rest: list[str],
                    body: bytes) -> tuple[int, dict[str, str], Json | None]:
        keys = ("cores", "instances", "key_pairs", "metadata_items", "ram",
                "server_group_members", "server_groups")
        if method == "PUT" and not rest:
            if not ctx.admin:
                raise ApiFault(403, "Policy doesn't allow os_compute_api:os-quota-sets:update "
                                    "to be performed.")
            payload = _json_body(body).get("quota_set")
            if not isinstance(payload, dict):
                raise _invalid("quota_set", payload, "'quota_set' is a required property")
            for key, value in payload.items():
                if key not in keys or isinstance(value, bool) or not isinstance(value, int):
                    raise _invalid(key, value, "is not valid")
            self.set_quota(project, **payload)
        elif method != "GET" or rest not in ([], ["detail"]):
            raise ApiFault(404, "The resource could not be found.")
        if project != ctx.project and not ctx.admin:
            raise ApiFault(403, "Policy doesn't allow os_compute_api:os-quota-sets:show to be "
                                "performed.")
        quota = self._quota(project)
        if rest == ["detail"]:
            usage = self._usage(project)
            return 200, {}, {"quota_set": {"id": project, **{
                k: {"limit": quota[k], "in_use": usage.get(k, 0), "reserved": 0}
                for k in keys}}}
        quota_set: Json = {k: quota[k] for k in keys}
        if method == "GET":
            quota_set["id"] = project
        return 200, {}, {"quota_set": quota_set}

    def _view(self, ctx: _Ctx, server: _Server, *, detail: bool, show: bool) -> Json:
        links = [{"rel": "self", "href": f"{ctx.host}/v2.1/servers/{server.id}"},
                 {"rel": "bookmark", "href": f"{ctx.host}/servers/{server.id}"}]
        if not detail:
            return {"id": server.id, "name": server.name, "links": links}
        if ctx.version >= (2, 47):
            flavor: Json = {"vcpus": server.flavor.vcpus, "ram": server.flavor.ram,
                            "disk": server.flavor.disk, "ephemeral": 0, "swap": 0,
                            "original_name": server.flavor.name,
                            "extra_specs": dict(server.flavor.extra_specs)}
        else:
            flavor = {"id": server.flavor.id, "links": [
                {"rel": "bookmark", "href": f"{ctx.host}/flavors/{server.flavor.id}"}]}
        view: Json = {
            "id": server.id, "name": server.name, "status": server.status,
            "tenant_id": server.project, "user_id": server.user,
            "metadata": dict(server.metadata),
            "hostId": "" if not server.host else uuid.uuid5(uuid.NAMESPACE_DNS,
                                                            server.host).hex,
            "image": {"id": server.image, "links": [
                {"rel": "bookmark", "href": f"{ctx.host}/images/{server.image}"}]},
            "flavor": flavor, "created": server.created, "updated": server.updated,
            "addresses": copy.deepcopy(server.addresses), "accessIPv4": "", "accessIPv6": "",
            "links": links,
            "OS-DCF:diskConfig": "MANUAL",
            "OS-EXT-AZ:availability_zone": server.az, "config_drive": "",
            "key_name": server.key_name, "OS-SRV-USG:launched_at": server.launched_at,
            "OS-SRV-USG:terminated_at": None,
            "OS-EXT-STS:task_state": server.task_state, "OS-EXT-STS:vm_state": server.vm_state,
            "OS-EXT-STS:power_state": 1 if server.status == "ACTIVE" else 0,
            "os-extended-volumes:volumes_attached": [],
            "security_groups": [{"name": g} for g in server.security_groups],
        }
        if server.status in ("BUILD", "ACTIVE"):
            view["progress"] = 0
        if ctx.admin:
            view.update({
                "OS-EXT-SRV-ATTR:host": server.host,
                "OS-EXT-SRV-ATTR:hypervisor_hostname": "fake-mini" if server.host else None,
                "OS-EXT-SRV-ATTR:instance_name": (
                    f"instance-{server.seq:08x}" if server.materialised else ""),
            })
            if ctx.version >= (2, 3):
                view.update({
                    "OS-EXT-SRV-ATTR:reservation_id": server.reservation_id,
                    "OS-EXT-SRV-ATTR:launch_index": server.launch_index,
                    "OS-EXT-SRV-ATTR:hostname": server.name,
                    "OS-EXT-SRV-ATTR:kernel_id": "", "OS-EXT-SRV-ATTR:ramdisk_id": "",
                    "OS-EXT-SRV-ATTR:root_device_name": "/dev/sda" if server.host else None,
                    "OS-EXT-SRV-ATTR:user_data": server.user_data,
                })
        if ctx.version >= (2, 9):
            view["locked"] = False
        if ctx.version >= (2, 73):
            view["locked_reason"] = None
        if ctx.version >= (2, 19):
            view["description"] = None
        if ctx.version >= (2, 26):
            view["tags"] = list(server.tags)
        if ctx.version >= (2, 63):
            view["trusted_image_certificates"] = None
        if show and ctx.version >= (2, 71):
            view["server_groups"] = []
        # Faults show only for ERROR/DELETED, and list views miss those buried in cell0.
        if server.fault and server.status in ("ERROR", "DELETED") and (show
                                                                       or not server.in_cell0):
            fault = {k: server.fault[k] for k in ("code", "created", "message")}
            if server.fault["code"] != 500 or ctx.admin:
                fault["details"] = server.fault.get("details", "")
            view["fault"] = fault
        return view

    def _list(self, ctx: _Ctx, query: dict[str, list[str]], raw_query: str,
              detail: bool) -> Json:
        def one(name: str) -> str | None:
            values = query.get(name)
            return values[-1] if values else None

        def tag_set(name: str) -> set[str] | None:
            value = one(name)
            if value is None or ctx.version < (2, 26):
                return None
            return {t for t in value.split(",") if t}

        status = one("status")
        if status is not None and status.upper() not in STATUSES:
            raise ApiFault(400, "Invalid status value")
        tags_all, tags_any = tag_set("tags"), tag_set("tags-any")
        not_all, not_any = tag_set("not-tags"), tag_set("not-tags-any")
        name_re = one("name")
        reservation = one("reservation_id")
        pattern = re.compile(name_re) if name_re else None
        ordered = self._sorted(ctx.project)
        limit_text, marker = one("limit"), one("marker")
        if marker is not None:
            ids = [s.id for s in ordered]
            if marker not in ids:
                raise ApiFault(400, f"marker [{marker}] not found")
            ordered = ordered[ids.index(marker) + 1:]
        selected: list[_Server] = []
        for server in ordered:
            tags = set(server.tags)
            if status is not None and server.status != status.upper():
                continue
            if reservation is not None and server.reservation_id != reservation:
                continue
            if pattern is not None and not pattern.search(server.name):
                continue
            if tags_all is not None and not tags_all <= tags:
                continue
            if tags_any is not None and not tags_any & tags:
                continue
            if not_all is not None and not_all and not_all <= tags:
                continue
            if not_any is not None and not_any & tags:
                continue
            selected.append(server)
        limit = 1000
        if limit_text is not None:
            if not DIGITS_RE.match(limit_text) or limit_text == "":
                raise _invalid("limit", limit_text,
                               f"{limit_text!r} does not match '^[0-9]*$'")
            limit = min(int(limit_text), 1000)
        page = selected[:limit]
        out: Json = {"servers": [self._view(ctx, s, detail=detail, show=False) for s in page]}
        if page and len(page) == limit and limit > 0:
            params = [(k, v) for k, vs in parse_qs(raw_query, keep_blank_values=True).items()
                      for v in vs if k != "marker"]
            params.append(("marker", page[-1].id))
            suffix = "/detail" if detail else ""
            out["servers_links"] = [{"rel": "next", "href":
                                     f"{ctx.host}/v2.1/servers{suffix}?{urlencode(params)}"}]
        return out

    def _delete(self, ctx: _Ctx, server_id: str) -> None:
        server = self._get_server(ctx.project, server_id)
        if server.status == "DELETED":
            return
        server.status, server.vm_state, server.task_state = "DELETED", "deleted", None
        server.updated = _now_iso()
        self._schedule("delete", "purge", None, server_id=server.id)

    # ----------------------------------------------------------------- create

    def _create(self, ctx: _Ctx, payload: Json) -> tuple[int, dict[str, str], Json | None]:
        spec = payload.get("server")
        if not isinstance(spec, dict):
            raise _invalid("server", spec if "server" in payload else payload,
                           "'server' is a required property")
        self._validate_schema(ctx, spec)
        min_count = _positive_int("min_count", spec.get("min_count", 1))
        max_count = _positive_int("max_count", spec.get("max_count", min_count))
        if min_count > max_count:
            raise ApiFault(400, "min_count must be <= max_count")
        flavor = self._flavor(str(spec["flavorRef"]).rsplit("/", 1)[-1])
        image = str(spec.get("imageRef", "")).rsplit("/", 1)[-1]
        if image not in {i["id"] for i in self._images}:
            raise ApiFault(400, "Can not find requested image")
        networks = spec.get("networks")
        if isinstance(networks, list):
            known = {n["id"] for n in self._networks}
            for net in networks:
                net_id = net.get("uuid")
                if net_id is not None and net_id not in known:
                    raise ApiFault(400, f"Network {net_id} could not be found.")
        az = spec.get("availability_zone") or None
        if az is not None and az not in self._azs:
            raise ApiFault(400, "The requested availability zone is not available")
        key_name = spec.get("key_name")
        if key_name is not None and key_name not in self._keypairs:
            raise ApiFault(400, "Invalid key_name provided.")
        groups = [str(g.get("name")) for g in spec.get("security_groups") or [{"name": "default"}]]
        for group in groups:
            if group not in self._security_groups:
                raise ApiFault(400, f"Unable to find security_group with name or id '{group}'")
        metadata = dict(spec.get("metadata") or {})
        quota = self._quota(ctx.project)
        if quota["metadata_items"] >= 0 and len(metadata) > quota["metadata_items"]:
            raise ApiFault(403, "Quota exceeded for metadata_items: Requested "
                                f"{len(metadata)}, but already used 0 of "
                                f"{quota['metadata_items']} metadata_items")
        count = self._check_quota(ctx.project, flavor, min_count, max_count)
        reservation_id = "r-" + "".join(self._rng.choice(string.ascii_lowercase + string.digits)
                                        for _ in range(8))
        request = _Request(reservation_id=reservation_id, project=ctx.project, flavor=flavor,
                           az=az, servers=[])
        if self._recheck_failures > 0:
            self._recheck_failures -= 1
            request.force_recheck_failure = True
        stamp = _now_iso()
        base_name = str(spec["name"])
        for index in range(count):
            server = _Server(
                id=str(uuid.uuid4()),
                name=f"{base_name}-{index + 1}" if count > 1 else base_name,
                project=ctx.project, user=ctx.user, flavor=flavor, image=image,
                reservation_id=reservation_id, launch_index=index, seq=next(self._counter),
                requested_az=az, tags=list(dict.fromkeys(spec.get("tags") or [])),
                metadata=metadata, user_data=spec.get("user_data"), key_name=key_name,
                security_groups=groups, created=stamp, updated=stamp,
                networks=self._attached(networks))
            request.servers.append(server)
            self._servers[server.id] = server
        self._schedule("schedule", "schedule", request)
        if spec.get("return_reservation_id"):
            return 202, {}, {"reservation_id": reservation_id}
        first = request.servers[0]
        location = f"{ctx.host}/v2.1/servers/{first.id}"
        body: Json = {"server": {
            "id": first.id,
            "links": [{"rel": "self", "href": location},
                      {"rel": "bookmark", "href": f"{ctx.host}/servers/{first.id}"}],
            "OS-DCF:diskConfig": "MANUAL",
            "security_groups": [{"name": g} for g in groups],
            "adminPass": "".join(self._rng.choice(string.ascii_letters + string.digits)
                                 for _ in range(12)),
        }}
        return 202, {"Location": location}, body

    def _validate_schema(self, ctx: _Ctx, spec: Json) -> None:
        allowed = set(CREATE_KEYS)
        if ctx.version < (2, 52):
            allowed.discard("tags")
        unexpected = [k for k in spec if k not in allowed]
        if unexpected:
            quoted = ", ".join(repr(k) for k in unexpected)
            verb = "was" if len(unexpected) == 1 else "were"
            raise _invalid("server", spec, "Additional properties are not allowed "
                                           f"({quoted} {verb} unexpected)")
        required = ["name", "flavorRef"] + (["networks"] if ctx.version >= (2, 37) else [])
        for key in required:
            if key not in spec:
                raise _invalid("server", spec, f"{key!r} is a required property")
        name = spec["name"]
        if not isinstance(name, str):
            raise _invalid("name", name, f"{name!r} is not of type 'string'")
        if not 1 <= len(name) <= 255 or name != name.strip():
            raise _invalid("name", name, f"{name!r} does not match a valid server name")
        networks = spec.get("networks")
        if networks is not None and not (networks in ("auto", "none")
                                         or isinstance(networks, list)):
            raise _invalid("networks", networks, f"{networks!r} is not valid under any of the "
                                                 "given schemas")
        image = spec.get("imageRef", "")
        if image and not UUID_RE.match(str(image).rsplit("/", 1)[-1]):
            raise _invalid("imageRef", image, f"{image!r} is not valid under any of the given "
                                              "schemas")
        for key in ("min_count", "max_count"):
            if key in spec:
                _positive_int(key, spec[key])
        tags = spec.get("tags")
        if tags is not None:
            if not isinstance(tags, list):
                raise _invalid("tags", tags, f"{tags!r} is not of type 'array'")
            if len(tags) > 50:
                raise _invalid("tags", tags, f"{tags!r} is too long")
            for index, tag in enumerate(tags):
                if not isinstance(tag, str):
                    raise _invalid(str(index), tag, f"{tag!r} is not of type 'string'")
                if not TAG_RE.match(tag):
                    raise _invalid(str(index), tag, f"{tag!r} does not match '^[^,/]*$'")
                if len(tag) < 1:
                    raise _invalid(str(index), tag, f"{tag!r} is too short")
                if len(tag) > 60:
                    raise _invalid(str(index), tag, f"{tag!r} is too long")
        metadata = spec.get("metadata")
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise _invalid("metadata", metadata, f"{metadata!r} is not of type 'object'")
            _check_metadata(metadata)
        user_data = spec.get("user_data")
        if user_data is not None:
            if not isinstance(user_data, str) or not _valid_base64(user_data):
                raise _invalid("user_data", user_data, f"{user_data!r} is not a 'base64'")
            if len(user_data) > 65535:
                raise _invalid("user_data", user_data, f"{user_data!r} is too long")
        if "return_reservation_id" in spec and not isinstance(spec["return_reservation_id"],
                                                              bool):
            value = spec["return_reservation_id"]
            raise _invalid("return_reservation_id", value,
                           f"{value!r} is not of type 'boolean', 'string'")

    # ----------------------------------------------------------------- control over HTTP

    def _control(self, method: str, path: str,
                 body: bytes) -> tuple[int, dict[str, str], Json | None]:
        name = path[len("/_sim/"):] if path.startswith("/_sim/") else ""
        if method == "GET" and name == "servers":
            return 200, {}, {"servers": self.servers_summary()}
        if method == "GET" and name == "calls":
            return 200, {}, {"calls": [list(c) for c in self.calls()]}
        action = _CONTROL.get(name)
        if method != "POST" or action is None:
            return 404, {}, {"error": f"unknown control {method} {path}"}
        try:
            args = json.loads(body or b"{}")
            action(self, **args)
        except (TypeError, ValueError, KeyError, ApiFault) as exc:
            return 400, {}, {"error": f"{type(exc).__name__}: {exc}"}
        return 200, {}, {"ok": True}


def _server_metadata(server: _Server, method: str, key: str | None, body: bytes,
                     limit: int) -> tuple[int, dict[str, str], Json | None]:
    """``/servers/{id}/metadata[/{key}]`` as Nova's ServerMetadataController serves it:
    reads always; writes only while the server is ACTIVE (or stopped) with no task (409
    otherwise); POST merges, PUT replaces all, PUT on a key sets one item (its body must
    name the same key), DELETE removes one; at most `limit` items (the quota; < 0: none)."""
    if method == "GET":
        if key is None:
            return 200, {}, {"metadata": dict(server.metadata)}
        if key not in server.metadata:
            raise ApiFault(404, "Metadata item was not found")
        return 200, {}, {"meta": {key: server.metadata[key]}}
    if method == "DELETE" and key is not None and key not in server.metadata:
        raise ApiFault(404, "Metadata item was not found")
    if method not in ("POST", "PUT", "DELETE") or (method == "POST" and key is not None) \
            or (method == "DELETE" and key is None):
        raise ApiFault(405, "The method specified is not allowed for this resource.")
    action = "delete metadata" if method == "DELETE" else "update metadata"
    if server.vm_state not in ("active", "paused", "suspended", "stopped") \
            or server.task_state is not None:
        raise ApiFault(409, f"Cannot '{action}' instance {server.id} while it is in "
                            f"vm_state {server.vm_state}")
    if method == "DELETE":
        del server.metadata[str(key)]
        server.updated = _now_iso()
        return 204, {}, None
    payload = _json_body(body)
    wanted = "meta" if key is not None else "metadata"
    items = payload.get(wanted)
    if not isinstance(items, dict) or set(payload) != {wanted}:
        raise _invalid(wanted, items, f"'{wanted}' is a required property")
    _check_metadata(items)
    if key is not None and (len(items) != 1 or key not in items):
        raise ApiFault(400, "Request body and URI mismatch")
    merged = dict(items) if method == "PUT" and key is None else {**server.metadata, **items}
    if limit >= 0 and len(merged) > limit:
        raise ApiFault(403, f"Quota exceeded for metadata_items: Requested {len(merged)}, "
                            f"but already used 0 of {limit} metadata_items")
    server.metadata = merged
    server.updated = _now_iso()
    if key is not None:
        return 200, {}, {"meta": dict(items)}
    return 200, {}, {"metadata": dict(merged)}

def _check_metadata(metadata: Json) -> None:
    for key, value in metadata.items():
        if not METADATA_KEY_RE.match(key):
            raise _invalid("metadata", metadata, f"{key!r} does not match any of the "
                           "regexes: '^[a-zA-Z0-9-_:. ]{1,255}$'")
        if not isinstance(value, str):
            raise _invalid(key, value, f"{value!r} is not of type 'string'")
        if len(value) > 255:
            raise _invalid(key, value, f"{value!r} is too long")


_CONTROL: dict[str, Callable[..., None]] = {
    "quota": lambda emu, project, **limits: emu.set_quota(project, **limits),
    "inject": NovaEmulator.inject,
    "no-valid-host": NovaEmulator.set_no_valid_host,
    "capacity": NovaEmulator.set_capacity,
    "recheck-failure": NovaEmulator.fail_quota_recheck,
    "timing": NovaEmulator.set_timing,
    "reclaim": NovaEmulator.reclaim,
    "settle": NovaEmulator.settle,
    "upload-image": NovaEmulator.upload_image,
}


@dataclass(frozen=True)
class _Ctx:
    user: str
    project: str
    admin: bool
    version: Version
    host: str


def _json_body(body: bytes) -> Json:
    try:
        payload = json.loads(body or b"null")
    except ValueError as exc:
        raise ApiFault(400, "Malformed request body") from exc
    if not isinstance(payload, dict):
        raise ApiFault(400, "Malformed request body")
    return payload


def _make_handler(emulator: NovaEmulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "scoctl-nova-emulator"
        # Headers and body go out as two writes: with Nagle's algorithm on, the body waits
        # for the client's delayed ACK of the headers (~40 ms a request on a kept-alive
        # connection), which would be the emulator's cost, not scoctl's.
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            headers = dict(self.headers.items())
            try:
                status, out_headers, payload = emulator.handle(self.command, self.path,
                                                               headers, body)
            except Exception as exc:  # noqa: BLE001  an emulator bug must still answer
                status, out_headers = 500, {}
                payload = ApiFault(500, f"emulator error: {type(exc).__name__}: {exc}").body()
            data = b"" if payload is None else json.dumps(payload).encode()
            self.send_response(status)
            ctype = "application/json"
            if status >= 400:
                ctype += "; charset=UTF-8"
            self.send_header("Content-Type", ctype)
            for key, value in out_headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if data and self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _serve

        def log_message(self, format: str, *args: object) -> None:
            # Quiet: request lines may carry user data in query strings.
            return

    return Handler


def main(argv: list[str] | None = None) -> int:
    """Run the emulator as a process until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m scoctl.sim.nova_emulator",
                                     description="Nova API emulator on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 lets the OS choose")
    parser.add_argument("--ready-file", help="written with the port once serving")
    parser.add_argument("--seed-file", help="JSON seed: flavors, AZs, quota, capacity, timing")
    args = parser.parse_args(argv)
    seed: Json | None = None
    if args.seed_file:
        with open(args.seed_file, encoding="utf-8") as handle:
            seed = json.load(handle)
    emulator = NovaEmulator(seed, port=args.port).start()
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    if args.ready_file:
        partial = args.ready_file + ".part"
        with open(partial, "w", encoding="utf-8") as handle:
            handle.write(str(emulator.port))
        os.replace(partial, args.ready_file)
    sys.stderr.write(f"nova emulator serving {emulator.url}\n")
    sys.stderr.flush()
    stopping.wait()
    emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
