"""The loop of ``scoctl run``: one pass (`run_once`) after another under the run lock, held per
pass, until a signal stops it.

``--once`` (no period) is a single pass whose held lock raises `LockHeld` (exit 75). With a
period a pass that finds the lock held is skipped; SIGTERM or SIGINT stops the loop after the
pass in progress (a clean stop: exit 0); a second SIGINT interrupts at once, and a SIGINT that
cuts a pass short exits 130, as a shell reports a Ctrl-C.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.errors import EXIT_OK, LockHeld
from scoctl.runner.compose import RunResult, connect_systems, run_once
from scoctl.runner.signals import EXIT_INTERRUPTED, Signals
from scoctl.services.leadership import Leadership, LocalLeadership

if TYPE_CHECKING:
    from scoctl.state import Store

@dataclass(frozen=True)
class LoopOutcome:
    """How the loop ended: its exit code, and whether a signal stopped or interrupted it."""

    code: int
    stopped_by: str | None = None
    interrupted: bool = False


def run_loop(config: Config, clock: Clock, writer: Callable[[], AbstractContextManager[Store]],
             *, period: float = 0.0, teardown: bool = True, region: str | None = None,
             on_pass: Callable[[RunResult], None], on_skip: Callable[[str], None],
             lead: Leadership | None = None) -> LoopOutcome:
    """Run passes until stopped (one pass when `period` is 0). `writer()` holds the run lock
    and opens the state for one pass; `on_pass` gets every pass's result, `on_skip` the reason
    a pass was skipped. With `lead` (a shared state) every pass competes for the regions it
    serves and acquires and reconciles only those it leads, its writes fenced (DESIGN §15).
    Raises LockHeld (a single pass only) and ConfigError."""
    leadership = lead or LocalLeadership()
    served = [region] if region else [r.name for r in config.regions]
    systems = connect_systems(config)
    stop = Signals()
    code = EXIT_OK
    try:
        # a single pass keeps the default handling (SIGINT raises KeyboardInterrupt)
        with stop.installed() if period else nullcontext():
            while True:
                try:
                    leadership.compete(served)
                    with writer() as store:
                        leadership.fence(store)
                        result = run_once(config, store, clock, systems, teardown=teardown,
                                          region=region, leads=leadership.leads)
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
    if stop.stop:
        return LoopOutcome(EXIT_OK, stopped_by=stop.stop[0])
    return LoopOutcome(code)

