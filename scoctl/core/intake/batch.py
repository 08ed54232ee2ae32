"""The intake batch window (pure), as Karpenter's batcher: the first demand change opens it,
every further change extends it; it closes `idle` seconds after the last change or `max` seconds
after it opened, and then the claims are committed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BatchWindow:
    """An open intake window: when it opened, when demand last changed, how many changes."""

    opened: float
    last: float
    changes: int = 1


def extend_window(window: BatchWindow | None, now: float) -> BatchWindow:
    """Open a window at `now`, or extend an open one (a new pod resets the idle timer)."""
    if window is None:
        return BatchWindow(opened=now, last=now)
    return BatchWindow(opened=window.opened, last=now, changes=window.changes + 1)


def window_deadline(window: BatchWindow, idle: float, longest: float) -> float:
    """When the window closes: `idle` after the last change, `longest` after it opened."""
    return min(window.last + idle, window.opened + longest)


def window_due(window: BatchWindow | None, now: float, idle: float, longest: float) -> bool:
    """True when an open window has closed and its claims should be committed."""
    return window is not None and now >= window_deadline(window, idle, longest)
