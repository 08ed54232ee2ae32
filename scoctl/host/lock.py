"""The run lock: one writing scoctl per state file; readers never take it.

An advisory `flock` on ``<state>.lock``; the kernel releases it when the process dies, so a
crash never leaves a stale lock behind.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scoctl.errors import LockHeld, StateError

POLL_S = 0.05


def lock_path(state: Path) -> Path:
    return state.with_name(state.name + ".lock")


@contextmanager
def run_lock(state: Path, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the run lock of `state`, waiting up to `wait` seconds; LockHeld (exit 75) if not.

    StateError (exit 2) when the lock file cannot be created (a bad ``--state`` path).
    """
    path = lock_path(state)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise StateError(f"{state}: cannot open the lock file {path}: "
                         f"{exc.strerror or exc}") from exc
    try:
        deadline = time.monotonic() + max(0.0, wait)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise
                if time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    raise LockHeld(
                        f"another scoctl run holds the lock on {state}"
                        + (f" (pid {holder})" if holder else "")
                        + f"; waited {wait:g}s (use --wait to wait longer)"
                    ) from None
                time.sleep(POLL_S)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
