"""The leader lease of a region (design: Runners): one row per region in the state."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class LeaseRecord:
    """Who leads `region`: `holder` (``host:pid``) for term `generation` until `expires_at`.

    The generation grows by one with every change of leader, so a write fenced by
    ``(holder, generation)`` fails once a later term began, even when the old holder's row
    reappears unchanged in a stale read.
    """

    region: str
    holder: str
    generation: int
    expires_at: datetime

    def live(self, now: datetime) -> bool:
        """The lease is still in force at `now`."""
        return self.expires_at > now
