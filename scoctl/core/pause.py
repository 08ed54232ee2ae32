"""Which pauses hold now (pure): a pause holds from its recording until its `until`, or until
`scoctl resume` drops it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from scoctl.core.model.controls import Pause
from scoctl.core.model.vocabulary import PauseScope
from scoctl.core.timefmt import parse_rfc3339


def holds(pause: Pause, now: datetime) -> bool:
    """`pause` still holds at `now` (an open-ended pause always does)."""
    return pause.until is None or parse_rfc3339(pause.until) > now


def active(pauses: Iterable[Pause], now: datetime) -> dict[PauseScope, Pause]:
    """The pauses that hold at `now`, by what they stop."""
    return {p.scope: p for p in pauses if holds(p, now)}


def lapsed(pauses: Iterable[Pause], now: datetime) -> list[Pause]:
    """The recorded pauses whose `until` has passed (to be dropped, with an event)."""
    return [p for p in pauses if not holds(p, now)]


def describe(pause: Pause) -> str:
    """One line for logs, results and `status`: what is paused, until when, and why."""
    until = f"until {pause.until}" if pause.until else "until `scoctl resume`"
    return f"{pause.scope} paused {until} ({pause.reason}; by {pause.author})"


def summary(held: Mapping[PauseScope, Pause]) -> dict[str, dict[str, str | None]]:
    """The pauses that hold, as JSON (`status --json`'s `paused`)."""
    return {scope.value: {"since": p.since, "until": p.until, "reason": p.reason,
                          "by": p.author}
            for scope, p in sorted(held.items())}
