"""The loop of ``scoctl run``: one pass (`run_once`) after another under the run lock, held per
pass, until a signal stops it.

``--once`` (no period) is a single pass whose held lock raises `LockHeld` (exit 75). With a
period a pass that finds the lock held is skipped; SIGTERM or SIGINT stops the loop after the
pass in progress (a clean stop: exit 0); a second SIGINT interrupts at once, and a SIGINT that
cuts a pass short exits 130, as a shell reports a Ctrl-C.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.errors import EXIT_OK, LockHeld
from scoctl.stages.run import RunResult, connect_systems, run_once

if TYPE_CHECKING:
    from scoctl.state import Store

EXIT_INTERRUPTED = 130  # 128 + SIGINT
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """SIGTERM / SIGINT as a request to stop after the pass in progress.

    The handler only appends to a plain list: no output (a signal can land in the middle of a
    write to stderr) and no threading.Event (its set() from a handler that interrupts its own
    wait() can deadlock on the Event's non-reentrant lock).
    """

    def __init__(self) -> None:
        self.stopped_by: list[str] = []
        self._previous: dict[int, Any] = {}

    def handle(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.stopped_by:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.stopped_by.append(signal.Signals(signum).name)

    def __enter__(self) -> StopRequest:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self.handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def pause(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as a stop was asked for."""
        deadline = time.monotonic() + seconds
        while not self.stopped_by:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.1))
        return True


@dataclass(frozen=True)
class LoopOutcome:
    """How the loop ended: its exit code, and whether a signal stopped or interrupted it."""

    code: int
    stopped_by: str | None = None
    interrupted: bool = False


def run_loop(config: Config, clock: Clock, writer: Callable[[], AbstractContextManager[Store]],
             *, period: float = 0.0, teardown: bool = True, region: str | None = None,
             on_pass: Callable[[RunResult], None], on_skip: Callable[[str], None],
             ) -> LoopOutcome:
    """Run passes until stopped (one pass when `period` is 0). `writer()` holds the run lock
    and opens the state for one pass; `on_pass` gets every pass's result, `on_skip` the reason
    a pass was skipped. Raises LockHeld (a single pass only) and ConfigError."""
    systems = connect_systems(config)
    stop = StopRequest()
    code = EXIT_OK
    try:
        # a single pass keeps the default handling (SIGINT raises KeyboardInterrupt)
        with stop if period else nullcontext():
            while True:
                try:
                    with writer() as store:
                        result = run_once(config, store, clock, systems, teardown=teardown,
                                          region=region)
                except LockHeld as exc:
                    if not period:
                        raise
                    on_skip(f"{exc}; skipping this pass")
                else:
                    code = result.exit_code
                    on_pass(result)
                if not period or stop.pause(period):
                    break
    except KeyboardInterrupt:
        return LoopOutcome(EXIT_INTERRUPTED, interrupted=True)
    finally:
        systems.close()
    if stop.stopped_by:
        return LoopOutcome(EXIT_OK, stopped_by=stop.stopped_by[0])
    return LoopOutcome(code)

