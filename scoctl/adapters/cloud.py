"""The `Cloud` interface: what scoctl needs from an IaaS, in scoctl's words, and its values.

The Nova adapter (`scoctl.adapters.nova`) implements it over openstacksdk; stage tests may use
an in-package fake. Every method documents the errors it raises (see `scoctl.errors`):

    ConfigError           the request breaks a rule we can check before calling (tag, user_data)
    QuotaExceeded         Nova said over quota (403); the pool stays eligible
    InsufficientCapacity  (never raised by a call: NoValidHost shows as ERROR servers, see
                          `ServerInfo.fault_error`)
    TemporaryError        429/503 (with `delay` = Retry-After), 5xx, timeouts, after retries
    PermanentError        any other refusal: 400, 401, 403 without quota, 404 on a launch

The pure rule checks (`check_tags`, `encode_user_data`) live here so planners and `--dry-run`
can apply them without a cloud.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from scoctl.errors import ConfigError, InsufficientCapacity, QuotaExceeded, ScoctlError

MAX_TAGS = 50
MAX_TAG_LENGTH = 60
MAX_USER_DATA = 65535  # bytes of base64 text, Nova's schema limit
MAX_METADATA_VALUE = 255
QUOTA_FAULT_CODE = 413

Networks = tuple[str, ...] | Literal["auto", "none"]


@dataclass(frozen=True)
class FlavorInfo:
    """A Nova flavor as the cloud reports it."""

    id: str
    name: str
    vcpus: int
    ram_mb: int
    disk_gb: int
    extra_specs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Headroom:
    """What the project's quota still allows; None means unlimited."""

    instances: int | None
    cores: int | None
    ram_mb: int | None

    def instances_of(self, vcpus: int, ram_mb: int) -> int | None:
        """How many instances of this shape fit (None: unlimited), as Nova's quota check does."""
        limits = [self.instances]
        if vcpus > 0 and self.cores is not None:
            limits.append(self.cores // vcpus)
        if ram_mb > 0 and self.ram_mb is not None:
            limits.append(self.ram_mb // ram_mb)
        known = [n for n in limits if n is not None]
        return max(0, min(known)) if known else None


@dataclass(frozen=True)
class ServerInfo:
    """One server. `fault_*` is set for ERROR servers read by id (list views may omit it)."""

    id: str
    name: str
    status: str
    tags: frozenset[str] = frozenset()
    metadata: Mapping[str, str] = field(default_factory=dict)
    flavor: str = ""
    az: str = ""
    fault_code: int | None = None
    fault_message: str | None = None
    created: str = ""
    reservation_id: str | None = None

    def fault_error(self) -> type[ScoctlError] | None:
        """The domain error an ERROR server stands for: quota (413) or capacity; else None."""
        if self.status != "ERROR":
            return None
        message = (self.fault_message or "").lower()
        if self.fault_code == QUOTA_FAULT_CODE or "quota exceeded" in message:
            return QuotaExceeded
        return InsufficientCapacity


@dataclass(frozen=True)
class LaunchRequest:
    """One multi-create call. `user_data` is plain text; the adapter base64-encodes it."""

    name: str
    flavor: str  # name or id
    image: str  # name or id
    networks: Networks = "none"  # network names/ids, or "auto" / "none"
    az: str | None = None
    min_count: int = 1
    max_count: int = 1
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)
    user_data: str | None = None
    security_groups: tuple[str, ...] = ()
    key_name: str | None = None
    server_group: str | None = None

    def __repr__(self) -> str:
        # user_data may carry join secrets: never let it reach a log through repr().
        shown = "<redacted>" if self.user_data is not None else None
        return (f"LaunchRequest(name={self.name!r}, flavor={self.flavor!r}, "
                f"image={self.image!r}, az={self.az!r}, min_count={self.min_count}, "
                f"max_count={self.max_count}, tags={self.tags!r}, user_data={shown})")


@dataclass(frozen=True)
class LaunchResult:
    """What one multi-create call started: its reservation and its servers (BUILD at first)."""

    reservation_id: str
    servers: tuple[ServerInfo, ...]
    adopted: bool = False  # True when a retried call found the first attempt's servers


class Cloud(Protocol):
    """The IaaS as scoctl sees it: one project in one region."""

    def flavors(self) -> list[FlavorInfo]:
        """Every flavor visible to the project. Raises TemporaryError, PermanentError."""
        ...

    def headroom(self) -> Headroom:
        """Quota left for instances, cores and RAM. Advisory: Nova rechecks asynchronously.

        Raises TemporaryError, PermanentError.
        """
        ...

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Start `min_count`..`max_count` servers in ONE call; Nova may build fewer (quota).

        Raises ConfigError (tags or user_data break Nova's rules: nothing was sent),
        QuotaExceeded (403 over quota), TemporaryError, PermanentError (unknown flavor,
        image, network or AZ, other 4xx). Servers that fail later show as ERROR (see
        `ServerInfo.fault_error`).
        """
        ...

    def servers(
        self,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        reservation_id: str | None = None,
    ) -> list[ServerInfo]:
        """Servers carrying all `tags` (and at least one of `any_tags`), newest first.

        List views may lack faults: call `server(id)` for ERROR ones.
        Raises TemporaryError, PermanentError.
        """
        ...

    def server(self, server_id: str) -> ServerInfo | None:
        """One server read by id, with its fault; None when it is gone.

        Raises TemporaryError, PermanentError.
        """
        ...

    def delete(self, server_id: str) -> None:
        """Delete a server; a server already gone is not an error.

        Raises TemporaryError, PermanentError.
        """
        ...


def check_tags(tags: Sequence[str]) -> None:
    """Nova's tag rules: at most 50 tags, each 1-60 characters without `/` or `,`.

    Raises ConfigError naming the first offending tag.
    """
    if len(tags) > MAX_TAGS:
        raise ConfigError(f"{len(tags)} tags, Nova allows at most {MAX_TAGS}", field="tags")
    for tag in tags:
        if not 1 <= len(tag) <= MAX_TAG_LENGTH:
            raise ConfigError(f"tag {tag!r} must be 1-{MAX_TAG_LENGTH} characters long",
                              field="tags")
        if "/" in tag or "," in tag:
            raise ConfigError(f"tag {tag!r} must not contain '/' or ','", field="tags")


def encode_user_data(text: str) -> str:
    """Base64 of the user data, checked against Nova's 65,535-byte limit.

    Raises ConfigError (without echoing the content: it may hold secrets).
    """
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(encoded) > MAX_USER_DATA:
        raise ConfigError(f"user_data is {len(encoded)} bytes after base64, Nova allows at most "
                          f"{MAX_USER_DATA}", field="user_data")
    return encoded
