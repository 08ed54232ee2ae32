"""The loop of ``scoctl run``: one pass of the composer (`runner.compose.run_once`) after
another under the run lock, held per pass, until a signal stops it.

``--once`` (no period) is a single pass whose held lock raises `LockHeld` (exit 75). With a
period a pass that finds the lock held is skipped; SIGTERM or SIGINT stops the loop after the
pass in progress (a clean stop: exit 0); a second SIGINT interrupts at once, and a SIGINT that
cuts a pass short exits 130, as a shell reports a Ctrl-C.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.errors import EXIT_OK, LockHeld, TemporaryError
from scoctl.runner.compose import Deps, PassReport, Regions, run_once, sources_in_use
from scoctl.runner.serve import connected
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
             on_pass: Callable[[PassReport], None], on_skip: Callable[[str], None],
             lead: Leadership | None = None) -> LoopOutcome:
    """Run passes until stopped (one pass when `period` is 0). `writer()` holds the run lock
    and opens the state for one pass; `on_pass` gets every pass's result, `on_skip` the reason
    a pass was skipped. With `lead` (a shared state) every pass competes for the regions it
    serves and acquires and reconciles only those it leads, its writes fenced (design: Runners).
    Raises LockHeld (a single pass only) and ConfigError."""
    leadership = lead or LocalLeadership()
    served = [region] if region else [r.name for r in config.regions]
    sources = sources_in_use(config)
    stop = Signals()
    code = EXIT_OK
    try:
        # a single pass keeps the default handling (SIGINT raises KeyboardInterrupt)
        with (connected(config, sources) as (cluster, scheduler),
              stop.installed() if period else nullcontext()):
            while True:
                try:
                    leadership.compete(served)
                    with writer() as store, ExitStack() as done:
                        leadership.fence(store)
                        deadline = time.monotonic() + config.timeouts.run
                        regions = Regions(deadline=deadline)  # clouds bound to this pass
                        done.callback(regions.close)
                        result = run_once(Deps(
                            config, store, clock, regions=regions, cluster=cluster,
                            scheduler=scheduler, sources=sources, leads=leadership.leads,
                            teardown=teardown, region=region, deadline=deadline))
                except (LockHeld, TemporaryError) as exc:  # TemporaryError: the state is gone
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
    if stop.stop:
        return LoopOutcome(EXIT_OK, stopped_by=stop.stop[0])
    return LoopOutcome(code)

