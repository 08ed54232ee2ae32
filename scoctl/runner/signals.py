"""The one signal handling of the long-running commands (``run --interval``, ``run --follow``,
``watch --follow``).

SIGTERM / SIGINT ask to stop after the pass in hand (a second SIGINT interrupts at once, as a
shell's second Ctrl-C would); SIGHUP, where the command reloads, asks to reload the config.

The handlers only append to plain lists: no output (a signal can land in the middle of a write
to stderr) and no ``threading.Event.set()`` from the handler itself (it can interrupt its own
thread inside ``Event.wait()``, which holds the Event's non-reentrant lock). Threads that wait
on an Event — the watch threads of ``watch --follow`` — get `event`, set from a short-lived
thread of its own.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

EXIT_INTERRUPTED = 130  # 128 + SIGINT
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Signals:
    """What the signal handlers asked for: `stop` names the stop signals received, `reload`
    counts the SIGHUPs not yet acted on; `event` is set once a stop was asked for."""

    stop: list[str] = field(default_factory=list)
    reload: list[int] = field(default_factory=list)
    event: threading.Event = field(default_factory=threading.Event)

    def on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGINT and self.stop:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now
        self.stop.append(signal.Signals(signum).name)
        threading.Thread(target=self.event.set, name="scoctl-stop", daemon=True).start()

    def on_hup(self, signum: int, _frame: FrameType | None) -> None:
        self.reload.append(signum)

    @contextmanager
    def installed(self, *, reload: bool = False) -> Iterator[Signals]:
        """SIGTERM / SIGINT (and SIGHUP with `reload`) for the block; the previous handlers
        come back afterwards."""
        previous = {sig: signal.signal(sig, self.on_stop) for sig in STOP_SIGNALS}
        if reload:
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, self.on_hup)
        try:
            yield self
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def pause(self, seconds: float) -> bool:
        """Sleep up to `seconds`; True as soon as a stop was asked for."""
        deadline = time.monotonic() + seconds
        while not self.stop:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.1))
        return True
