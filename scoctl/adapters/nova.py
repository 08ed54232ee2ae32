"""The `Cloud` adapter for OpenStack Nova, over openstacksdk (imported lazily).

SDK and keystoneauth exceptions are mapped once, here:

    403 "Quota exceeded ..." and 413      -> QuotaExceeded
    429, 503                              -> TemporaryError(delay=Retry-After)
    other 5xx, connection failures        -> TemporaryError
    no answer within timeouts.api         -> Unanswered (a TemporaryError never retried)
    other 4xx, other SDK errors           -> PermanentError
    a launch every attempt of which was   -> Refused (a TemporaryError: nothing was created)
    turned away before any work

Reads and writes go through a `RetryPolicy`; writes (create, delete) call `spend_token` before
every mutating attempt so the caller's mutating-call budget pays for retries too, then, just
before the request is sent, ask `retry.call_time_left`: within a caller's `calls_until` bound
(a runner's lease) an attempt that could not end in time is never sent, and the others get a
timeout that ends by it. A launch is
ONE multi-create POST (`return_reservation_id`), then a read of that reservation's servers.
Only a definite refusal (429) is retried as it is. After a failure that may have reached Nova
(any 5xx, 503 included — a gateway may answer it while Nova does the work —, a timeout, a reset)
every further attempt first looks for servers carrying the request's tags (its `sco:launch`)
and adopts them instead of launching twice.

Image and network names are resolved through Nova's own image and network proxies
(microversion 2.35), so a Nova endpoint alone is enough; UUIDs are used as they are.
user_data and tokens never reach a log or an error message.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

from scoctl.adapters.cloud import MAX_METADATA_VALUE, check_tags, encode_user_data
from scoctl.adapters.retry import RetryPolicy, call_time_left
from scoctl.core.catalog import Catalog, Named
from scoctl.core.model import FlavorInfo, Headroom, LaunchRequest, LaunchResult, ServerInfo
from scoctl.core.model.vocabulary import ServerStatus
from scoctl.errors import (
    ConfigError,
    PermanentError,
    QuotaExceeded,
    Refused,
    ScoctlError,
    TemporaryError,
    Unanswered,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

CREATE_MICROVERSION = "2.52"  # tags in the create body
PROXY_MICROVERSION = "2.35"  # last version with Nova's image and network proxies
LIST_PAGE = 1000  # Nova's default [api]max_limit
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-?([0-9a-fA-F]{4}-?){3}[0-9a-fA-F]{12}$")
METADATA_KEY_RE = re.compile(r"^[a-zA-Z0-9-_:. ]{1,255}$")
RETRY_LATER = (429, 503)
IMAGE_TTL = 60.0  # seconds an image name's id is trusted (`image_id`)


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if absent."""
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        from datetime import UTC, datetime

        when = parsedate_to_datetime(value)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def map_error(exc: BaseException) -> ScoctlError | None:
    """The scoctl error for an openstacksdk/keystoneauth exception; None if it is neither."""
    from keystoneauth1 import exceptions as ka
    from openstack import exceptions as sdk

    if isinstance(exc, sdk.HttpException):
        status = exc.status_code
        message = str(exc.details or exc.message or "").strip() or type(exc).__name__
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        if status == 413 or (status == 403 and "quota exceeded" in message.lower()):
            return QuotaExceeded(f"Nova: {message}")
        if status in RETRY_LATER:
            return TemporaryError(f"Nova answered {status}: {message}", delay=retry_after(headers))
        if status is None or status >= 500:
            return TemporaryError(f"Nova answered {status}: {message}")
        return PermanentError(f"Nova answered {status}: {message}")
    if isinstance(exc, ka.ConnectTimeout):  # keystoneauth's name for a connect or read timeout
        return Unanswered(f"Nova did not answer in time: {exc}")
    if isinstance(exc, ka.ConnectionError | ka.RetriableConnectionFailure):
        return TemporaryError(f"Nova unreachable: {type(exc).__name__}")
    if isinstance(exc, ka.HttpError):
        status = int(exc.http_status or 0)
        if status in RETRY_LATER:
            return TemporaryError(f"Nova answered {status}", delay=retry_after(
                getattr(getattr(exc, "response", None), "headers", None)))
        if status >= 500:
            return TemporaryError(f"Nova answered {status}")
        return PermanentError(f"Nova answered {status}: {exc.message}")
    if isinstance(exc, ka.ClientException | sdk.SDKException):
        return PermanentError(f"Nova client error: {type(exc).__name__}: {exc}")
    return None


def _ambiguous(mapped: ScoctlError, exc: BaseException) -> bool:
    """Whether a failed create may have reached Nova and done the work.

    Only a 429 is a definite refusal (rate limiting happens before any work). A 503 or another
    5xx may come from a gateway that gave up while Nova went on, and a timeout or a reset says
    nothing at all: after those the servers may exist, so the next attempt looks for them first.
    Refusals that are not retried (4xx, quota) do not matter here.
    """
    status = getattr(exc, "status_code", None) or getattr(exc, "http_status", None)
    return isinstance(mapped, TemporaryError) and status != 429


# Nova's server statuses as scoctl reads them (the one place a raw Nova status is compared)
NOVA_STATUSES = {"BUILD": ServerStatus.BUILD, "ACTIVE": ServerStatus.ACTIVE,
                 "ERROR": ServerStatus.ERROR, "DELETED": ServerStatus.DELETED,
                 "SOFT_DELETED": ServerStatus.DELETED}


def server_status(raw: object) -> ServerStatus:
    """Nova's status word normalised once: BUILD, ACTIVE, ERROR, DELETED (or SOFT_DELETED),
    anything else (SHUTOFF, PAUSED, …) OTHER."""
    return NOVA_STATUSES.get(str(raw or "").upper(), ServerStatus.OTHER)


def fixed_ipv4(addresses: object) -> str | None:
    """A server's address from Nova's ``addresses`` map (network name → entries): the first
    fixed IPv4 entry of the first network that has one, in the map's order (Nova lists the
    networks in the order they were attached). Floating and IPv6 entries are skipped; an entry
    without ``OS-EXT-IPS:type`` counts as fixed. None before Nova allocated one."""
    if not isinstance(addresses, Mapping):
        return None
    for entries in addresses.values():
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, Mapping) or entry.get("OS-EXT-IPS:type",
                                                           "fixed") != "fixed":
                continue
            try:
                return str(ipaddress.IPv4Address(str(entry.get("addr", ""))))
            except ValueError:
                continue
    return None


def _server_info(server: Any) -> ServerInfo:
    fault = server.fault or {}
    flavor = server.flavor or {}
    flavor_name = flavor.get("original_name") or flavor.get("name") or flavor.get("id") or ""
    return ServerInfo(
        id=str(server.id),
        name=str(server.name or ""),
        status=server_status(server.status),
        tags=frozenset(server.tags or ()),
        metadata=dict(server.metadata or {}),
        flavor=str(flavor_name),
        az=str(server.availability_zone or ""),
        fault_code=int(fault["code"]) if fault.get("code") is not None else None,
        fault_message=fault.get("message"),
        created=str(server.created_at or ""),
        reservation_id=server.reservation_id,
        address=fixed_ipv4(server.addresses),
    )


def _server_info_json(server: Mapping[str, Any]) -> ServerInfo:
    """A server from Nova's JSON (microversion 2.52: tags and flavor names in list views)."""
    fault = server.get("fault") or {}
    flavor = server.get("flavor") or {}
    flavor_name = flavor.get("original_name") or flavor.get("name") or flavor.get("id") or ""
    return ServerInfo(
        id=str(server["id"]),
        name=str(server.get("name") or ""),
        status=server_status(server.get("status")),
        tags=frozenset(server.get("tags") or ()),
        metadata=dict(server.get("metadata") or {}),
        flavor=str(flavor_name),
        az=str(server.get("OS-EXT-AZ:availability_zone") or ""),
        fault_code=int(fault["code"]) if fault.get("code") is not None else None,
        fault_message=fault.get("message"),
        created=str(server.get("created") or ""),
        reservation_id=server.get("OS-EXT-SRV-ATTR:reservation_id"),
        address=fixed_ipv4(server.get("addresses")),
    )


def _launch_index(server: ServerInfo, base: str) -> int:
    suffix = server.name[len(base) + 1:] if server.name.startswith(base + "-") else ""
    return int(suffix) if suffix.isdigit() else 0


class NovaCloud:
    """`Cloud` over an openstacksdk `Connection` (one project, one region)."""

    def __init__(
        self,
        connection: Any,
        *,
        retry: RetryPolicy | None = None,
        spend_token: Callable[[], None] | None = None,
        api_timeout: float | None = None,
        image_ttl: float = IMAGE_TTL,
    ) -> None:
        self._conn = connection
        self._image_ttl = image_ttl
        self._retry = retry or RetryPolicy()
        self._spend = spend_token
        self._api_timeout = api_timeout  # the session's timeout (`timeouts.api`), if known
        self._flavors: list[FlavorInfo] | None = None
        self._names: dict[tuple[str, str], str] = {}
        self._images: dict[str, tuple[str, float]] = {}  # name -> (id, when looked up)

    @classmethod
    def connect(
        cls,
        cloud: str,
        *,
        retry: RetryPolicy | None = None,
        spend_token: Callable[[], None] | None = None,
        **options: Any,
    ) -> NovaCloud:
        """Connect to the `clouds.yaml` entry `cloud`. Raises ConfigError if it is unusable."""
        import openstack
        from openstack import exceptions as sdk

        try:
            connection = openstack.connect(cloud=cloud, **options)
        except sdk.ConfigException as exc:
            raise ConfigError(f"clouds.yaml entry {cloud!r}: {exc}", field="cloud") from exc
        return cls(connection, retry=retry, spend_token=spend_token)

    @property
    def connection(self) -> Any:
        """The underlying openstacksdk `Connection` (for callers that need raw access)."""
        return self._conn

    # ------------------------------------------------------------------ plumbing

    def _before_write(self) -> dict[str, float]:
        """Spend a token, then (just before sending) the timeout the attempt may take."""
        if self._spend is not None:
            self._spend()
        left = call_time_left(self._api_timeout)
        return {} if left is None else {"timeout": left}

    def _call(self, fn: Callable[[], T], *, mutating: bool = False) -> T:
        def attempt() -> T:
            try:
                return fn()
            except Exception as exc:
                mapped = map_error(exc)
                if mapped is None:
                    raise
                raise mapped from exc

        return self._retry.call(attempt, before_attempt=self._spend if mutating else None)

    def _raw(self, method: str, url: str, microversion: str, **kwargs: Any) -> Any:
        from openstack import exceptions as sdk

        response = self._conn.compute.request(url, method, microversion=microversion, **kwargs)
        sdk.raise_from_response(response)
        return response.json() if response.content else None

    # ------------------------------------------------------------------ reads

    def flavors(self) -> list[FlavorInfo]:
        """Every flavor visible to the project. Raises TemporaryError, PermanentError."""
        def read() -> list[FlavorInfo]:
            return [
                FlavorInfo(id=str(f.id), name=str(f.name), vcpus=int(f.vcpus or 0),
                           ram_mb=int(f.ram or 0), disk_gb=int(f.disk or 0),
                           extra_specs=dict(f.extra_specs or {}))
                for f in self._conn.compute.flavors(details=True)
            ]

        self._flavors = self._call(read)
        return list(self._flavors)

    def headroom(self) -> Headroom:
        """Quota left (instances, cores, RAM MiB), None where unlimited.

        Advisory only: Nova rechecks quota asynchronously. Raises TemporaryError, PermanentError.
        """
        limits = self._call(lambda: self._conn.compute.get_limits().absolute)

        def left(limit: Any, used: Any) -> int | None:
            if limit is None or int(limit) < 0:
                return None
            return max(0, int(limit) - int(used or 0))

        return Headroom(
            instances=left(limits.instances, limits.instances_used),
            cores=left(limits.total_cores, limits.total_cores_used),
            ram_mb=left(limits.total_ram, limits.total_ram_used),
        )

    def servers(
        self,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        reservation_id: str | None = None,
    ) -> list[ServerInfo]:
        """Servers with all `tags` and one of `any_tags`, newest first (all pages).

        List views may omit faults. Raises TemporaryError, PermanentError.
        """
        query: dict[str, str] = {}
        all_tags, some_tags = list(tags), list(any_tags)
        if all_tags:
            query["tags"] = ",".join(all_tags)
        if some_tags:
            query["tags-any"] = ",".join(some_tags)
        if reservation_id:
            query["reservation_id"] = reservation_id

        # Raw JSON, paged by marker: openstacksdk's Resource objects cost ~8 ms a server, which
        # made listing a 1,000-server fleet take seconds.
        def read() -> list[ServerInfo]:
            out: list[ServerInfo] = []
            marker: str | None = None
            while True:
                params = {**query, "limit": str(LIST_PAGE)}
                if marker:
                    params["marker"] = marker
                answer = self._raw("GET", "/servers/detail?" + urlencode(params),
                                   CREATE_MICROVERSION) or {}
                page = answer.get("servers") or []
                out.extend(_server_info_json(s) for s in page)
                more = any(link.get("rel") == "next" for link in answer.get("servers_links") or [])
                if not page or not more:
                    return out
                marker = str(page[-1]["id"])

        return self._call(read)

    def server(self, server_id: str) -> ServerInfo | None:
        """One server by id, with its fault; None when gone. Raises TemporaryError,
        PermanentError."""
        from openstack import exceptions as sdk

        def read() -> ServerInfo | None:
            try:
                return _server_info(self._conn.compute.get_server(server_id))
            except sdk.NotFoundException:
                return None

        return self._call(read)

    # ------------------------------------------------------------------ writes

    def delete(self, server_id: str) -> None:
        """Delete a server (gone already is fine). Raises TemporaryError (DeadlineExceeded:
        not sent), PermanentError."""
        from openstack import exceptions as sdk

        def attempt() -> None:
            bound = self._before_write()
            try:
                self._raw("DELETE", f"/servers/{server_id}", CREATE_MICROVERSION, **bound)
            except sdk.NotFoundException:
                return

        self._call(attempt)
        log.info("deleted server %s", server_id)

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """ONE multi-create call for `min_count`..`max_count` servers named `<name>-<i>`.

        Raises ConfigError (rules broken or a name that does not resolve: nothing was sent;
        or Nova's 400 to the create: a name it lacks, nothing was created),
        QuotaExceeded (403), Refused (every attempt turned away before any work: nothing was
        created), TemporaryError (the servers may exist: look for the request's tags),
        PermanentError.
        """
        body = self._create_body(request)
        ambiguous = False

        def attempt() -> LaunchResult | str:
            nonlocal ambiguous
            if ambiguous and request.tags:
                found = self.servers(tags=request.tags)  # a read: no token
                if found:
                    return LaunchResult(reservation_id=found[0].reservation_id or "",
                                        servers=self._ordered(found, request.name), adopted=True)
            bound = self._before_write()
            try:
                answer = self._raw("POST", "/servers", CREATE_MICROVERSION, json=body, **bound)
            except Exception as exc:
                mapped = map_error(exc)
                if mapped is None:
                    raise
                if getattr(exc, "status_code", None) == 400:
                    # Nova refused what the request names (an image, network, security
                    # group, zone or key it lacks): the config's to fix, nothing was created
                    said = str(mapped).split(": ", 1)[-1]
                    raise ConfigError(f"Nova refused the launch: {said}") from exc
                ambiguous = ambiguous or _ambiguous(mapped, exc)
                raise mapped from exc
            return str(answer["reservation_id"])

        log.info("launching %s: flavor %s, %d..%d servers, tags %s", request.name,
                 request.flavor, request.min_count, request.max_count, ",".join(request.tags))
        try:
            outcome = self._retry.call(attempt)
        except Unanswered as exc:
            # not retried (Nova may stall), but Nova may have done the work and answered too
            # late: one look for the request's tags adopts them, and nothing is sent twice
            found = self.servers(tags=request.tags) if request.tags else []
            if not found:
                raise
            outcome = LaunchResult(reservation_id=found[0].reservation_id or "",
                                   servers=self._ordered(found, request.name), adopted=True)
            log.warning("launch %s: the create went unanswered (%s); adopted its servers",
                        request.name, exc)
        except TemporaryError as exc:
            if ambiguous:
                raise  # an attempt may have reached Nova: the caller looks for the tags
            raise Refused(str(exc), delay=exc.delay) from exc
        if isinstance(outcome, LaunchResult):
            log.info("adopted %d servers of an earlier attempt", len(outcome.servers))
            return outcome
        servers = self.servers(reservation_id=outcome)
        return LaunchResult(reservation_id=outcome, servers=self._ordered(servers, request.name))

    @staticmethod
    def _ordered(servers: list[ServerInfo], base: str) -> tuple[ServerInfo, ...]:
        return tuple(sorted(servers, key=lambda s: (_launch_index(s, base), s.name)))

    def _create_body(self, request: LaunchRequest) -> dict[str, Any]:
        check_tags(request.tags)
        if request.min_count < 1 or request.max_count < request.min_count:
            raise ConfigError(f"min_count {request.min_count} / max_count {request.max_count}: "
                              "need 1 <= min_count <= max_count", field="count")
        for key, value in request.metadata.items():
            if not METADATA_KEY_RE.match(key):
                raise ConfigError(f"metadata key {key!r} breaks Nova's rules", field="metadata")
            if len(value) > MAX_METADATA_VALUE:
                raise ConfigError(f"metadata {key!r} is longer than {MAX_METADATA_VALUE}",
                                  field="metadata")
        server: dict[str, Any] = {
            "name": request.name,
            "flavorRef": self._flavor_id(request.flavor),
            "imageRef": self._resolve("image", request.image),
            "min_count": request.min_count,
            "max_count": request.max_count,
            "return_reservation_id": True,
        }
        if request.networks in ("auto", "none"):
            server["networks"] = request.networks
        else:
            server["networks"] = [{"uuid": self._resolve("network", n)}
                                  for n in request.networks]
        if request.tags:
            server["tags"] = list(request.tags)
        if request.metadata:
            server["metadata"] = dict(request.metadata)
        if request.user_data is not None:
            server["user_data"] = encode_user_data(request.user_data)
        if request.az:
            server["availability_zone"] = request.az
        if request.security_groups:
            server["security_groups"] = [{"name": g} for g in request.security_groups]
        if request.key_name:
            server["key_name"] = request.key_name
        body: dict[str, Any] = {"server": server}
        if request.server_group:
            body["os:scheduler_hints"] = {"group": request.server_group}
        return body

    def catalog(self) -> Catalog:
        """What the region offers by name (``config check --online``): its images, flavors,
        networks and security groups (Nova's proxies, microversion 2.35; the groups None when
        that proxy fails) and availability zones. Raises TemporaryError, PermanentError."""
        def listed(path: str, collection: str, label: str) -> tuple[Named, ...]:
            answer = self._call(lambda: self._raw("GET", path, PROXY_MICROVERSION)) or {}
            return tuple(Named(str(item["id"]), str(item.get(label) or ""))
                         for item in answer.get(collection) or ())

        zones = self._call(lambda: self._raw("GET", "/os-availability-zone",
                                             PROXY_MICROVERSION)) or {}
        try:
            groups: tuple[Named, ...] | None = listed("/os-security-groups", "security_groups",
                                                      "name")
        except (TemporaryError, PermanentError) as exc:  # a proxy the cloud does not serve
            log.warning("security groups not listed (not checked): %s", exc)
            groups = None
        return Catalog(
            images=listed("/images/detail", "images", "name"),
            flavors=tuple(Named(f.id, f.name) for f in self.flavors()),
            networks=listed("/os-networks", "networks", "label"),
            security_groups=groups,
            zones=tuple(str(z.get("zoneName")) for z in zones.get("availabilityZoneInfo") or ()
                        if (z.get("zoneState") or {}).get("available", True)))

    # ------------------------------------------------------------------ name resolution

    def _flavor_id(self, ref: str) -> str:
        flavors = self._flavors if self._flavors is not None else self.flavors()
        for flavor in flavors:
            if ref in (flavor.id, flavor.name):
                return flavor.id
        raise ConfigError(f"flavor {ref!r} not found in the cloud", field="flavor")

    def image_id(self, ref: str) -> str:
        """See `Cloud.image_id`: a name is looked up again once its answer is `image_ttl`
        (`IMAGE_TTL`) old, so a long-running controller launches (and hashes) an image
        uploaded again under its name."""
        if UUID_RE.match(ref):
            return ref
        found = self._images.get(ref)
        if found is None or time.monotonic() - found[1] >= self._image_ttl:
            found = (self._lookup("image", ref), time.monotonic())
            self._images[ref] = found
        return found[0]

    def _resolve(self, kind: str, ref: str) -> str:
        if kind == "image":
            return self.image_id(ref)
        if UUID_RE.match(ref):
            return ref
        key = (kind, ref)
        if key not in self._names:
            self._names[key] = self._lookup(kind, ref)
        return self._names[key]

    def _lookup(self, kind: str, ref: str) -> str:
        """The one id of the image or network named `ref` (Nova's proxies)."""
        path, collection, label = (("/images/detail", "images", "name") if kind == "image"
                                   else ("/os-networks", "networks", "label"))
        answer = self._call(lambda: self._raw("GET", path, PROXY_MICROVERSION))
        matches = [item["id"] for item in (answer or {}).get(collection, [])
                   if item.get(label) == ref]
        if len(matches) != 1:
            what = "not found" if not matches else "ambiguous"
            raise ConfigError(f"{kind} {ref!r} {what} in the cloud", field=kind)
        return str(matches[0])
