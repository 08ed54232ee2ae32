"""What several runners share beside the state, where the backend is shared (design: Runners).

With SQLite there is one host: its file lock is the lease and the token budget is a host-wide
file (`scoctl.host.budget`), so `coordination_for` gives None. With PostgreSQL it gives the
database's leases, and `shared_budget` the region's token budget in the database.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from scoctl.config.schema import is_url
from scoctl.core.lease import LeaseDecision
from scoctl.core.model import LeaseRecord

if TYPE_CHECKING:
    from scoctl.state.postgresql import PostgresStore
    from scoctl.state.store import Store


@dataclass
class Fencing:
    """Who this runner is and the term it leads in each region (kept by its lease keeper):
    what a shared store's launch intents and deletes are checked against. `deadlines[region]`
    is when that term ends at the latest on this host's monotonic clock (the last renewal's
    send time + ttl: the database's expiry is never earlier). `held[region]`: until when (the
    same clock) a launch call of the runner this one took `region` from may still be in flight:
    no launch intent is failed there before then."""

    holder: str
    terms: dict[str, int] = field(default_factory=dict)
    deadlines: dict[str, float] = field(default_factory=dict)
    held: dict[str, float] = field(default_factory=dict)


class Coordination(Protocol):
    """The leader leases of a shared state. Every method raises TemporaryError when the
    database cannot be reached (the next call reconnects)."""

    def take(self, region: str, holder: str, mine: int | None, ttl: float) -> LeaseDecision:
        """Take or renew `region`'s lease for `holder`, who believes it leads term `mine`."""
        ...

    def give_up(self, region: str, holder: str, mine: int) -> bool:
        """End `holder`'s term `mine` of `region` now; False when it is not that term."""
        ...

    def leases(self) -> list[LeaseRecord]:
        """Every region's lease."""
        ...

    def close(self) -> None:
        ...


class Budget(Protocol):
    """A region's token budget (`scoctl.host.budget.TokenBudget` has the same interface)."""

    rate: int
    spent: int

    def acquire(self) -> float:
        """Block until a call may start; record it; return when it started."""
        ...

    def __call__(self) -> None:
        ...

    def available(self) -> int:
        """Tokens free right now."""
        ...


def coordination_for(state: str | Path, password_file: Path | None) -> Coordination | None:
    """The leases of `state` when several runners can share it (PostgreSQL), else None."""
    if not is_url(state):
        return None
    from scoctl.state.postgresql.coordination import PgCoordination

    return PgCoordination(str(state), password_file)


def shared_budget(state: str | Path, password_file: Path | None, region: str,
                  rate: int) -> Budget | None:
    """`region`'s token budget in the database of a shared state, else None (SQLite)."""
    if not is_url(state):
        return None
    from scoctl.state.postgresql.coordination import SharedBudget

    return SharedBudget(str(state), password_file, region, rate)


def _shared(store: Store) -> PostgresStore | None:
    """`store` when it is a PostgreSQL store. Without importing psycopg (a quarter of a second)
    for a SQLite state: a PostgreSQL store exists only once its module was imported."""
    module = sys.modules.get("scoctl.state.postgresql")
    if module is None:
        return None
    shared: type[PostgresStore] = module.PostgresStore
    return store if isinstance(store, shared) else None


def fence(store: Store, fencing: Fencing) -> None:
    """Check `store`'s launch intents and deletes against `fencing` (a shared store only; a
    SQLite state has one host, whose run lock is its fence)."""
    shared = _shared(store)
    if shared is not None:
        shared.fencing = fencing


def leases_of(store: Store) -> list[LeaseRecord]:
    """Every region's lease in `store` (none in a SQLite state: one host leads everything)."""
    shared = _shared(store)
    return shared.leases() if shared is not None else []


def lease_deadline(store: Store, region: str) -> float | None:
    """When this runner's term in `region` ends at the latest (`time.monotonic`): its mutating
    calls there must end by then. None when nothing bounds them (SQLite, an unfenced store);
    0.0 when it holds no term there."""
    shared = _shared(store)
    if shared is None or shared.fencing is None:
        return None
    return shared.fencing.deadlines.get(region, 0.0)


def intents_held(store: Store, region: str, now: float) -> bool:
    """At `now` (`time.monotonic`), a launch call of the runner this one took `region` from
    may still be in flight, so no launch intent may be failed there yet."""
    shared = _shared(store)
    if shared is None or shared.fencing is None:
        return False
    return now < shared.fencing.held.get(region, 0.0)


def check_fence(store: Store, region: str) -> None:
    """Inside the caller's transaction: this runner still leads `region`, or NotLeader (the
    transaction writes nothing). A no-op for SQLite, whose fence is its run lock."""
    shared = _shared(store)
    if shared is not None:
        shared.check_fence(region)


def record_delete(store: Store, region: str, server_id: str) -> None:
    """Record, fenced, that this runner is about to delete `server_id` in `region`: NotLeader
    once its term there ended (a shared store only; SQLite's fence is its run lock)."""
    shared = _shared(store)
    if shared is not None:
        shared.record_delete(region, server_id)
