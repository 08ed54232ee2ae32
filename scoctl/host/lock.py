"""The run lock: one writing scoctl per state file; readers never take it. The controller
lock: one `run --follow` per state on a host, held for the controller's life (a second one
stands by until it is free).

Each an advisory `flock` (on ``<state>.lock``, ``<state>.controller.lock``); the kernel
releases it when the process dies, so a crash never leaves a stale lock behind.
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


def controller_lock_path(state: Path) -> Path:
    return state.with_name(state.name + ".controller.lock")


@contextmanager
def run_lock(state: Path, *, wait: float = 0.0) -> Iterator[None]:
    """Hold the run lock of `state`, waiting up to `wait` seconds; LockHeld (exit 75) if not.

    StateError (exit 2) when the lock file cannot be created (a bad ``--state`` path).
    """
    with _flock(state, lock_path(state), wait=wait, what="scoctl run holds the lock",
                hint="; waited {wait:g}s (use --wait to wait longer)"):
        yield


@contextmanager
def controller_lock(state: Path) -> Iterator[None]:
    """Hold the controller lock of `state` for the block (a `run --follow`'s life), or raise
    LockHeld at once naming the controller that holds it. StateError as `run_lock`."""
    with _flock(state, controller_lock_path(state), wait=0.0,
                what="controller (run --follow) holds the controller lock", hint=""):
        yield


@contextmanager
def _flock(state: Path, path: Path, *, wait: float, what: str, hint: str) -> Iterator[None]:
    """An exclusive flock on `path`, our pid written in it; LockHeld naming its holder."""
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
                        f"another {what} on {state}"
                        + (f" (pid {holder})" if holder else "") + hint.format(wait=wait)
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
