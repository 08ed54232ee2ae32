"""The host's record of its clock's forward steps (`core.clockstep`), shared by every scoctl
process of the host through one small file in ``budget_dir`` (beside the token budgets), so
that a step between two ``run --once`` passes is seen as well as one under the controller: the
monotonic clock (``CLOCK_MONOTONIC``) is one for the whole host within a boot.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from pathlib import Path

from scoctl.clock import Clock
from scoctl.core.clockstep import ClockLog, Step, observe

log = logging.getLogger(__name__)

FILE = "clock-steps.json"
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def boot_id() -> str:
    """This boot's id (Linux), "" where there is none."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def seen_steps(directory: Path, clock: Clock, *, boot: str | None = None) -> tuple[Step, ...]:
    """Look at the clocks once more (under the file's lock) and return every forward step of
    the time of day the host has seen. A file that cannot be used costs the guard, not the
    pass: no step is known then (logged)."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(directory / FILE, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        log.warning("clock steps: %s: %s", directory / FILE, exc.strerror or exc)
        return ()
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        before = _read(fd)
        now = observe(before, boot=boot_id() if boot is None else boot,
                      wall=clock.now().timestamp(), mono=clock.monotonic())
        _write(fd, now)
        if now.steps and (before is None or now.steps[-1] not in before.steps):
            step = now.steps[-1]
            log.warning("the time of day jumped %.0f s ahead of the monotonic clock: ages of "
                        "what is older are reckoned without it (no timeout fires early)",
                        step.seconds)
        return now.steps
    except OSError as exc:
        log.warning("clock steps: %s: %s", directory / FILE, exc.strerror or exc)
        return ()
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read(fd: int) -> ClockLog | None:
    raw = os.pread(fd, 1 << 16, 0)
    try:
        data = json.loads(raw) if raw.strip() else None
        if not isinstance(data, dict):
            return None
        return ClockLog(str(data["boot"]), float(data["wall"]), float(data["mono"]),
                        tuple(Step(float(s), float(n)) for s, n in data.get("steps", [])))
    except (ValueError, KeyError, TypeError):
        return None


def _write(fd: int, value: ClockLog) -> None:
    data = json.dumps({"boot": value.boot, "wall": value.wall, "mono": value.mono,
                       "steps": [[s.seen, s.seconds] for s in value.steps]}).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)
