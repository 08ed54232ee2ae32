"""A stalled API stops only its own calls (design: Controller; issue 28 item 6).

A call that gets no answer within `timeouts.api` raises `Unanswered`, which is never retried.
The `Guard` of that API (one per Nova region, one per Kubernetes client) remembers it: until
the API answers again every further call fails at once — `Unanswered(sent=False)`, nothing sent
(a launch: `Refused`, nothing created) — instead of waiting `timeouts.api` once more, so a pass
costs a stalled region at most one timeout and goes on with the other regions, the intake, the
spool and the reclaim notices. The step reports the API unavailable (``API_UNAVAILABLE``) as
soon as it ends.

A long-lived guard (the controller's) has a `probe`: a cheap read sent from a thread of its
own, after 0.5 s, then doubling up to 2 s, until one is answered (a success, or a refusal the
API itself sends: a 4xx; not a 5xx or a refused connection); the next call then goes
through, and `cleared` tells the controller to act on the region again at once. The gap
stays short so that the outage ends when the API answers, not at the next probe: a probe
to a frozen API waits `timeouts.api` for its answer, so one is nearly always in flight and
answered the moment the API is (a back-off to 30 s made a 60 s stall an 86 s outage and
held the launches waiting for it that much longer). A guard
without a probe (one pass of ``run --once``) stays tripped for the rest of its pass; the next
pass, with a fresh adapter, tries again. Any answered call clears a guard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from scoctl.errors import PermanentError, Refused, Unanswered

if TYPE_CHECKING:
    from scoctl.adapters.cloud import Cloud
    from scoctl.core.model import FlavorInfo, Headroom, LaunchRequest, LaunchResult, ServerInfo

log = logging.getLogger(__name__)

T = TypeVar("T")
PROBE_BACKOFF_S = (0.5, 2.0)  # the first probe's delay, the longest between two
PROBE_SERVER = "00000000-0000-0000-0000-000000000000"  # a server that is never there


class Guard:
    """Whether calls to one API are let through; thread-safe. See the module docstring."""

    def __init__(self, what: str, *, probe: Callable[[], object] | None = None,
                 backoff: tuple[float, float] = PROBE_BACKOFF_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self._probe = probe
        self._backoff = backoff
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._error = ""
        self._cleared = 0  # how often a stall ended (the controller compares)
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    @property
    def stalled(self) -> str | None:
        """Why calls are held back (the unanswered call's error), None when they are not."""
        with self._lock:
            return self._error if self._since is not None else None

    @property
    def cleared(self) -> int:
        """How many stalls have ended so far."""
        with self._lock:
            return self._cleared

    def check(self) -> None:
        """Raise `Unanswered(sent=False)` while the API stalls; return when calls may go."""
        with self._lock:
            if self._since is None:
                return
            waited, error = self._clock() - self._since, self._error
        raise Unanswered(f"{self.what}: not called: a call went unanswered {waited:.0f} s ago "
                         f"and the API has not answered since ({error})", sent=False)

    def trip(self, error: Unanswered) -> None:
        """A call went unanswered: hold the others back (and start probing)."""
        if not error.sent:
            return
        with self._lock:
            if self._since is not None:
                return
            self._since, self._error = self._clock(), str(error)
            start = self._probe is not None and not self._closed and (
                self._thread is None or not self._thread.is_alive())
            if start:
                self._wake.clear()
                self._thread = threading.Thread(target=self._probing, daemon=True,
                                                name=f"scoctl-probe {self.what}")
        log.warning("%s stalls: %s; its calls wait until it answers", self.what, error)
        if start and self._thread is not None:
            self._thread.start()

    def answered(self) -> None:
        """A call was answered (or refused by the API itself): the API is back."""
        with self._lock:
            if self._since is None:
                return
            waited = self._clock() - self._since
            self._since, self._error = None, ""
            self._cleared += 1
        log.warning("%s answers again after %.0f s", self.what, waited)

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()` under the guard: refused at once while stalled; trips it when `fn` goes
        unanswered; clears it when `fn` gets any answer (an error the API sent included)."""
        self.check()
        try:
            out = fn()
        except Unanswered as exc:
            self.trip(exc)
            raise
        except Exception:
            self.answered()  # the API said something: it is not stalled
            raise
        self.answered()
        return out

    def close(self) -> None:
        """Stop probing (the adapter is closed)."""
        with self._lock:
            self._closed = True
        self._wake.set()

    def _probing(self) -> None:
        assert self._probe is not None
        delay, most = self._backoff
        while True:
            if self._wake.wait(delay):
                return  # closed
            with self._lock:
                if self._since is None:
                    return  # a call of the pass got through first
            try:
                self._probe()
            except PermanentError as exc:  # the API answered, if only with a refusal
                log.debug("%s probe answered with an error: %s", self.what, exc)
            except Exception as exc:  # unanswered, or not served yet (5xx, refused): again
                log.debug("%s probe: %s", self.what, exc)
                delay = min(most, delay * 2)
                continue
            self.answered()
            return


class GuardedCloud:
    """A `Cloud` whose calls pass one region's `Guard` (see the module docstring)."""

    def __init__(self, inner: Cloud, guard: Guard) -> None:
        self.inner = inner
        self.guard = guard

    def flavors(self) -> list[FlavorInfo]:
        """See `Cloud.flavors`."""
        return self.guard.call(self.inner.flavors)

    def headroom(self) -> Headroom:
        """See `Cloud.headroom`."""
        return self.guard.call(self.inner.headroom)

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """See `Cloud.launch`; while the region stalls, `Refused` (nothing was created)."""
        try:
            self.guard.check()
        except Unanswered as exc:
            raise Refused(str(exc)) from exc
        return self.guard.call(lambda: self.inner.launch(request))

    def servers(self, tags: Iterable[str] = (), any_tags: Iterable[str] = (),
                reservation_id: str | None = None) -> list[ServerInfo]:
        """See `Cloud.servers`."""
        return self.guard.call(lambda: self.inner.servers(
            tags=tags, any_tags=any_tags, reservation_id=reservation_id))

    def server(self, server_id: str) -> ServerInfo | None:
        """See `Cloud.server`."""
        return self.guard.call(lambda: self.inner.server(server_id))

    def delete(self, server_id: str) -> None:
        """See `Cloud.delete`."""
        self.guard.call(lambda: self.inner.delete(server_id))

    def image_id(self, ref: str) -> str:
        """See `Cloud.image_id`."""
        return self.guard.call(lambda: self.inner.image_id(ref))


def cloud_guard(region: str, cloud: Cloud, *, probe: bool) -> Guard:
    """The guard of one region's Nova; `probe`: look for its answer from a thread of its own
    (a GET of a server that is never there: cheap, read-only, answered with 404)."""
    return Guard(f"Nova of region {region}",
                 probe=(lambda: cloud.server(PROBE_SERVER)) if probe else None)
