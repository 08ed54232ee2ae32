"""Operator controls kept in the state: a pause of launches or disruptions (`scoctl pause`);
and what showback reads back (`scoctl cost`): the claim's versions over time.

Kept in the state, not in a process, so every runner and host obeys it: a timer's `acquire`,
the controller and a second host on a PostgreSQL state see the same pause."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from scoctl.core.model.vocabulary import PauseScope


@dataclass(frozen=True)
class Pause:
    """One pause: what it stops, since when, until when (RFC 3339; None: until resumed), why
    and who asked (the operator's user name, or the host)."""

    scope: PauseScope
    since: str
    until: str | None
    reason: str
    author: str


@dataclass(frozen=True)
class ClaimStep:
    """A claim version: from `at` on, the workload requests `requests` (showback)."""

    workload: str
    at: datetime
    requests: Mapping[str, int]
