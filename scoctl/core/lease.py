"""The lease decision (design: Runners), pure: take, renew, or not, given the row and the time.

A runner that wants to lead a region reads the region's lease row inside a transaction that
locks it, together with the database's clock, and asks `decide`. It writes the returned row
when `decision.write`, and records ``LEADER_ELECTED`` when `decision.elected`. Outcomes:

* ``taken``: nobody held the region, or the holder let the lease expire; a new term begins
  (generation + 1) and this runner leads it;
* ``renewed``: this runner's own term goes on, `ttl` from `now` (also after a late renewal,
  provided nobody took the lease meanwhile: the row is still this term's);
* ``held``: another runner's live lease; this runner follows;
* ``lost``: this runner believed it led term `mine`, but another term is in force: it must
  stop making mutating calls at once.

`release` ends a term early (a clean shutdown), so a standby need not wait for the ttl.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from scoctl.core.model.leases import LeaseRecord

Outcome = Literal["taken", "renewed", "held", "lost"]


@dataclass(frozen=True)
class LeaseDecision:
    """What to do with a region's lease row: `lease` is the row to write, or the row in force."""

    outcome: Outcome
    lease: LeaseRecord
    previous: LeaseRecord | None = None

    @property
    def leads(self) -> bool:
        """This runner leads the region after the decision."""
        return self.outcome in ("taken", "renewed")

    @property
    def write(self) -> bool:
        """The row must be written (a new term, or a later expiry)."""
        return self.leads

    @property
    def elected(self) -> bool:
        """A new term began: record ``LEADER_ELECTED``."""
        return self.outcome == "taken"


def decide(current: LeaseRecord | None, *, region: str, holder: str, mine: int | None,
           now: datetime, ttl: float) -> LeaseDecision:
    """The lease decision for `holder`, who believes it leads term `mine` (None: no term).

    `current` is the region's row as read under lock (None: never leased), `now` the
    database's clock, `ttl` the lease length in seconds.
    """
    until = now + timedelta(seconds=ttl)
    if current is None:
        return LeaseDecision("taken", LeaseRecord(region, holder, 1, until))
    own = current.holder == holder and (mine is None or mine == current.generation)
    if own:
        return LeaseDecision("renewed", LeaseRecord(region, holder, current.generation, until),
                             previous=current)
    if current.live(now):
        return LeaseDecision("lost" if mine is not None else "held", current, previous=current)
    return LeaseDecision("taken", LeaseRecord(region, holder, current.generation + 1, until),
                         previous=current)


def release(current: LeaseRecord | None, *, holder: str, mine: int,
            now: datetime) -> LeaseRecord | None:
    """The row that ends `holder`'s term `mine` at `now`; None when it is not that term's."""
    if current is None or current.holder != holder or current.generation != mine:
        return None
    if not current.live(now):
        return None
    return LeaseRecord(current.region, holder, mine, now)


def fenced(current: LeaseRecord | None, *, holder: str, mine: int, now: datetime) -> bool:
    """A mutating call of `holder` in term `mine` may go ahead at `now` (the fence check)."""
    return (current is not None and current.holder == holder and current.generation == mine
            and current.live(now))
