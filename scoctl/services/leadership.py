"""One leader per region (design: Runners): who may make mutating Nova calls for it.

`leadership_for` gives `LocalLeadership` for a SQLite state (one host: its run lock is the
lease, so it leads every region) or a `LeaseKeeper` for a PostgreSQL state. A keeper competes
for the regions it is asked about: it takes a free or expired lease, renews its own terms every
``lease.ttl / 3`` from a thread of its own (so a long acquire never lets them lapse), notices
when a term was lost, and gives its terms up when it stops. It fences the stores it is given:
their launch intents and deletes check its term in the same transaction (`PostgresStore`).

The decision itself is `scoctl.core.lease.decide`; the SQL is in `scoctl.state`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from scoctl.adapters.retry import RetryPolicy, calls_until
from scoctl.config.schema import Config, Region, Timeouts
from scoctl.core.model import (
    FlavorInfo,
    Headroom,
    LaunchRequest,
    LaunchResult,
    LeaseRecord,
    ServerInfo,
)
from scoctl.errors import ApiError, NotLeader
from scoctl.state.coordination import (
    Coordination,
    Fencing,
    coordination_for,
    fence,
    lease_deadline,
    record_delete,
    shared_budget,
)

if TYPE_CHECKING:
    from scoctl.adapters.cloud import Cloud
    from scoctl.host.budget import Budget
    from scoctl.state import Store

log = logging.getLogger(__name__)


def holder_name() -> str:
    """This runner's name in a lease: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership(Protocol):
    """Whether this runner leads a region, and the fence on its writes."""

    holder: str

    def compete(self, regions: Iterable[str]) -> None:
        """Take or renew the leases of `regions` now (and keep competing for them)."""
        ...

    def leads(self, region: str) -> bool:
        """This runner holds a live term in `region`."""
        ...

    def require(self, regions: Iterable[str]) -> None:
        """Compete for `regions`; NotLeader (exit 75) naming the leader of the first one led
        elsewhere."""
        ...

    def fence(self, store: Store) -> None:
        """Make `store`'s launch intents and deletes check this runner's terms."""
        ...

    def leaders(self) -> list[LeaseRecord]:
        """Every region's lease (empty without leases: SQLite)."""
        ...

    def close(self) -> None:
        """Stop competing and end this runner's terms now."""
        ...


class LocalLeadership:
    """SQLite: one host, whose run lock is the lease; it leads every region."""

    def __init__(self, holder: str | None = None) -> None:
        self.holder = holder or holder_name()

    def compete(self, regions: Iterable[str]) -> None:
        return None

    def leads(self, region: str) -> bool:
        return True

    def require(self, regions: Iterable[str]) -> None:
        return None

    def fence(self, store: Store) -> None:
        return None

    def leaders(self) -> list[LeaseRecord]:
        return []

    def close(self) -> None:
        return None


class LeaseKeeper:
    """PostgreSQL: this runner's leases, renewed from a thread every ``ttl / 3``."""

    def __init__(self, db: Coordination, ttl: float, holder: str | None = None, *,
                 grace: float = 0.0,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.db, self.ttl, self.grace, self.monotonic = db, ttl, grace, monotonic
        self.holder = holder or holder_name()
        self.fencing = Fencing(self.holder)
        self.current: dict[str, LeaseRecord] = {}  # what the last decision per region saw
        self._regions: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def terms(self) -> dict[str, int]:
        return self.fencing.terms

    def compete(self, regions: Iterable[str]) -> None:
        with self._lock:
            self._regions.update(regions)
            wanted = sorted(self._regions)
        for region in wanted:
            self._decide(region)
        if self._thread is None:
            self._thread = threading.Thread(target=self._renew, name="scoctl-lease",
                                            daemon=True)
            self._thread.start()

    def _decide(self, region: str) -> None:
        sent = self.monotonic()  # the database's new expiry is ttl after a moment past this
        try:
            decision = self.db.take(region, self.holder, self.terms.get(region), self.ttl)
        except ApiError as exc:
            # the database is unreachable: the term lapses by itself; the fence refuses writes
            log.warning("lease of %s: %s", region, exc)
            return
        self.current[region] = decision.lease
        if decision.leads:
            if decision.elected:
                log.info("leading %s (term %d)", region, decision.lease.generation)
                previous = decision.previous
                if previous is not None and previous.holder != self.holder:
                    # its lease has expired by now; a call it began may take `grace` more
                    self.fencing.held[region] = self.monotonic() + self.grace
            self.terms[region] = decision.lease.generation
            self.fencing.deadlines[region] = sent + self.ttl
        elif self.terms.pop(region, None) is not None:
            self.fencing.deadlines.pop(region, None)
            log.warning("lost the lead of %s to %s", region, decision.lease.holder)

    def _renew(self) -> None:
        while not self._stop.wait(self._pause()):
            with self._lock:
                wanted = sorted(self._regions)
            for region in wanted:
                self._decide(region)

    def _pause(self) -> float:
        """Renew every ttl/3; while another runner leads a region this one competes for, try
        twice as often, so a dead leader's region is taken within ttl + ttl/6 of its death."""
        with self._lock:
            following = any(region not in self.terms for region in self._regions)
        return self.ttl / 6 if following else self.ttl / 3

    def leads(self, region: str) -> bool:
        """A term in `region` whose renewal is not overdue: a keeper that cannot reach the
        database (a restart) stops leading when its last renewal runs out, on its own clock."""
        return region in self.terms and self.monotonic() < self.fencing.deadlines.get(region, 0)

    def require(self, regions: Iterable[str]) -> None:
        wanted = list(regions)
        self.compete(wanted)
        for region in wanted:
            if not self.leads(region):
                lease = self.current.get(region)
                raise NotLeader(region, lease.holder if lease else None,
                                lease.generation if lease else None)

    def fence(self, store: Store) -> None:
        fence(store, self.fencing)

    def leaders(self) -> list[LeaseRecord]:
        return self.db.leases()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        for region, term in sorted(self.terms.items()):
            try:
                self.db.give_up(region, self.holder, term)
            except ApiError as exc:
                log.warning("could not give up the lead of %s: %s", region, exc)
        self.terms.clear()
        self.db.close()


def longest_call(timeouts: Timeouts) -> float:
    """The longest a mutating call, with its retries, may take: every attempt up to
    `timeouts.api`, and the waits between them within `timeouts.retry_budget`."""
    return timeouts.api * RetryPolicy().max_attempts + timeouts.retry_budget


def leadership_for(config: Config, state: Path | str | None = None) -> Leadership:
    """The leadership of this runner over `state` (default: the config's). Taking a region
    from another runner, it fails none of its launch intents for `longest_call`: a call that
    runner began before its lease ran out may still create servers."""
    db = coordination_for(state or config.state, config.state_password_file)
    if db is None:
        return LocalLeadership()
    return LeaseKeeper(db, config.lease.ttl, grace=longest_call(config.timeouts))


def budget_for(config: Config, region: Region) -> Budget:
    """The token budget of `region`: in the database when the state is (shared by every
    host), else the host-wide file (`scoctl.host.budget`)."""
    shared = shared_budget(config.state, config.state_password_file, region.name,
                           region.mutating_calls_per_second)
    if shared is not None:
        return shared
    from scoctl.host.budget import budget_for as file_budget

    return file_budget(config, region)


class FencedCloud:
    """A region's `Cloud` whose deletes are recorded, fenced, before the call: a deposed
    leader's delete fails (NotLeader) and never reaches Nova; launches have their intent,
    fenced the same way, committed before the call. Both, and every retry of them, must also
    end before this runner's lease does, on its own monotonic clock (`retry.calls_until`): a
    runner paused between its fenced write and the call sends nothing once it resumes past
    its lease."""

    def __init__(self, inner: Cloud, region: str, store: Store) -> None:
        self.inner, self.region, self.store = inner, region, store

    def flavors(self) -> list[FlavorInfo]:
        return self.inner.flavors()

    def headroom(self) -> Headroom:
        return self.inner.headroom()

    def launch(self, request: LaunchRequest) -> LaunchResult:
        with calls_until(lease_deadline(self.store, self.region)):
            return self.inner.launch(request)

    def servers(self, tags: Iterable[str] = (), any_tags: Iterable[str] = (),
                reservation_id: str | None = None) -> list[ServerInfo]:
        return self.inner.servers(tags=tags, any_tags=any_tags, reservation_id=reservation_id)

    def server(self, server_id: str) -> ServerInfo | None:
        return self.inner.server(server_id)

    def image_id(self, ref: str) -> str:
        return self.inner.image_id(ref)

    def delete(self, server_id: str) -> None:
        record_delete(self.store, self.region, server_id)
        with calls_until(lease_deadline(self.store, self.region)):
            self.inner.delete(server_id)
