"""A `Cloud` wrapper that counts every call's outcome per region, for the metrics file."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from scoctl.errors import PermanentError, QuotaExceeded, TemporaryError

if TYPE_CHECKING:
    from scoctl.adapters.cloud import Cloud
    from scoctl.core.model import FlavorInfo, Headroom, LaunchRequest, LaunchResult, ServerInfo

T = TypeVar("T")


class CallCounter:
    """Cloud calls per (region, outcome); thread-safe."""

    def __init__(self) -> None:
        self.counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def add(self, region: str, outcome: str, n: int = 1) -> None:
        with self._lock:
            key = (region, outcome)
            self.counts[key] = self.counts.get(key, 0) + n

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self.counts)


def outcome_of(exc: BaseException | None) -> str:
    """The `outcome` label of a call that raised `exc` (None: it succeeded)."""
    if exc is None:
        return "ok"
    if isinstance(exc, QuotaExceeded):
        return "quota"
    if isinstance(exc, TemporaryError):
        return "temporary"
    if isinstance(exc, PermanentError):
        return "permanent"
    return "error"


class CountingCloud:
    """A `Cloud` that counts every call's outcome, then answers as the wrapped one does."""

    def __init__(self, inner: Cloud, region: str, counter: CallCounter) -> None:
        self.inner = inner
        self.region = region
        self.counter = counter

    def _counted(self, call: Callable[[], T]) -> T:
        try:
            out = call()
        except Exception as exc:
            self.counter.add(self.region, outcome_of(exc))
            raise
        self.counter.add(self.region, outcome_of(None))
        return out

    def flavors(self) -> list[FlavorInfo]:
        """See `Cloud.flavors`."""
        return self._counted(self.inner.flavors)

    def headroom(self) -> Headroom:
        """See `Cloud.headroom`."""
        return self._counted(self.inner.headroom)

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """See `Cloud.launch`."""
        return self._counted(lambda: self.inner.launch(request))

    def servers(self, tags: Iterable[str] = (), any_tags: Iterable[str] = (),
                reservation_id: str | None = None) -> list[ServerInfo]:
        """See `Cloud.servers`."""
        return self._counted(lambda: self.inner.servers(tags=tags, any_tags=any_tags,
                                                        reservation_id=reservation_id))

    def server(self, server_id: str) -> ServerInfo | None:
        """See `Cloud.server`."""
        return self._counted(lambda: self.inner.server(server_id))

    def delete(self, server_id: str) -> None:
        """See `Cloud.delete`."""
        self._counted(lambda: self.inner.delete(server_id))

    def image_id(self, ref: str) -> str:
        """See `Cloud.image_id`."""
        return self._counted(lambda: self.inner.image_id(ref))
