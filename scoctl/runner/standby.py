"""`run --follow` beside another controller of the same state on this host: it stands by.

One controller per state and host holds the controller lock for its life (`host.lock`); a
second one started beside it (a second unit, an operator's test run) does not exit: it says so
once, tries the lock again every `STANDBY_RETRY_S`, and takes over as soon as the first exits
(SIGTERM, a crash: the kernel frees the lock), as a standby controller on another host takes a
PostgreSQL state's regions over once their lease expires. SIGTERM / SIGINT while it stands by
stop it (exit 0); a SIGHUP then is remembered, so the config is read again at the take-over.
Under systemd (``Type=notify``, a watchdog) a standby is started, not starting: it says READY
with its status ("standing by …") and pings the watchdog while it waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from scoctl.errors import LockHeld
from scoctl.host.notify import Notifier
from scoctl.runner.signals import Signals

STANDBY_RETRY_S = 1.0


@dataclass(frozen=True)
class Standby:
    """How standing by ended: `stopped` names the stop signal that ended it (the controller
    never ran), `reload` says a SIGHUP came meanwhile, `waited` that another controller held
    the lock at first."""

    stopped: str | None = None
    reload: bool = False
    waited: bool = False


@contextmanager
def standing_by(state: Path, *, inform: Callable[[str], None],
                retry: float = STANDBY_RETRY_S,
                notifier: Notifier | None = None) -> Iterator[Standby]:
    """Hold the controller lock of `state` for the block, standing by while another controller
    holds it; yields how standing by ended (the lock is not held when it `stopped`)."""
    from scoctl.host.lock import controller_lock

    notifier = notifier or Notifier()
    signals = Signals()
    with ExitStack() as stack:
        with signals.installed(reload=True):
            waited = False
            while True:
                try:
                    stack.enter_context(controller_lock(state))
                    break
                except LockHeld as exc:
                    if not waited:
                        inform(f"{exc}: standing by, trying the lock again every {retry:g} s")
                        notifier.ready(f"standing by: {exc}")
                    waited = True
                    notifier.ping()
                    if signals.pause(retry):
                        break
        if signals.stop:
            inform(f"{signals.stop[0]}: stopped while standing by")
        elif waited:
            inform("the other controller stopped: taking over")
        yield Standby(stopped=signals.stop[0] if signals.stop else None,
                      reload=bool(signals.reload), waited=waited)
