"""Timestamps as text (pure): RFC 3339 in UTC with microseconds, sortable as strings."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """``2026-01-01T00:00:00.000000Z``: sortable as text (the year always in four digits:
    strftime's ``%Y`` writes year 1 as ``1``, which nothing parses back)."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def parse_rfc3339(text: str) -> datetime:
    """The inverse of `rfc3339` (also accepts offsets and no fraction)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def span(seconds: float) -> str:
    """A duration as a person writes it, in the config's units: ``90s``, ``10m``, ``1h30m``,
    ``2d``."""
    left = round(seconds)
    if left <= 0:
        return f"{seconds:g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts)
