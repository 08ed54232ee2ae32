"""Values of the cloud seam: flavors, quota headroom, servers and launch calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scoctl.core.model.vocabulary import ServerStatus
from scoctl.errors import InsufficientCapacity, QuotaExceeded, ScoctlError

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
    """One server. `fault_*` is set for ERROR servers read by id (list views may omit it).
    `address` is its fixed IPv4 address (the adapter's rule picks one), None until it has one."""

    id: str
    name: str
    status: ServerStatus  # normalised by the adapter
    tags: frozenset[str] = frozenset()
    metadata: Mapping[str, str] = field(default_factory=dict)
    flavor: str = ""
    az: str = ""
    fault_code: int | None = None
    fault_message: str | None = None
    created: str = ""
    reservation_id: str | None = None
    address: str | None = None

    def fault_error(self) -> type[ScoctlError] | None:
        """The domain error an ERROR server stands for: quota (413) or capacity; else None."""
        if self.status != ServerStatus.ERROR:
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
