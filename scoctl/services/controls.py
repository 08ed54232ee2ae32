"""Operator controls over the state: pause and resume launches or disruptions.

A pause is a row of the state (`Store.pauses`), so every runner and host obeys it; recording
and ending one are events (`PAUSED`, `RESUMED`), whoever ends it: `scoctl resume`, or its own
`until` passing (`lapse`, run by acquire and reconcile before they read the pauses).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from scoctl.core import pause as pauses
from scoctl.core.model import NewEvent
from scoctl.core.model.controls import Pause
from scoctl.core.model.vocabulary import PauseScope
from scoctl.core.timefmt import rfc3339
from scoctl.state.store import Store


def pause(store: Store, scopes: Collection[PauseScope], *, now: datetime,
          until: datetime | None, reason: str, author: str) -> list[Pause]:
    """Pause `scopes` from `now` until `until` (None: until resumed), one `PAUSED` event each;
    a pause of a scope already paused replaces it."""
    made = [Pause(scope, rfc3339(now), rfc3339(until) if until else None, reason, author)
            for scope in sorted(scopes)]
    with store.transaction():
        for p in made:
            store.save_pause(p)
            store.append_event(NewEvent(None, "PAUSED", "warning", {
                "scope": p.scope.value, "until": p.until, "reason": p.reason, "by": p.author}))
    return made


def resume(store: Store, scopes: Collection[PauseScope], *, author: str) -> list[Pause]:
    """End the pauses of `scopes` now, one `RESUMED` event for each that was recorded."""
    with store.transaction():
        dropped = store.drop_pauses(scopes)
        for p in dropped:
            store.append_event(NewEvent(None, "RESUMED", "info", {
                "scope": p.scope.value, "by": author, "paused_since": p.since}))
    return dropped


def lapse(store: Store, now: datetime) -> dict[PauseScope, Pause]:
    """Drop the pauses whose `until` has passed (`RESUMED`, `lapsed: true`), and return the
    pauses that hold at `now`."""
    recorded = store.pauses()
    ended = pauses.lapsed(recorded, now)
    if ended:
        with store.transaction():
            for p in store.drop_pauses(p.scope for p in ended):
                store.append_event(NewEvent(None, "RESUMED", "info", {
                    "scope": p.scope.value, "lapsed": True, "paused_since": p.since,
                    "until": p.until}))
    return pauses.active(recorded, now)
