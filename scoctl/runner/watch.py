"""``scoctl watch --follow``: the watch stage streamed.

A pod watch per namespace (list + watch with resourceVersion; 410 Gone and API restarts
re-list: `services.informer.pump`) feeds the watch stage's `Follower` (a cache of the
unfinished pods, so a pass lists no pods at all); the batch window (`intake.batch_idle` /
`intake.batch_max`, timed by the injected Clock) decides when to commit, and a periodic pass
(Slurm, quota blocks, availability) runs when the window is closed.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.errors import LockHeld
from scoctl.runner.serve import serve
from scoctl.runner.signals import Signals
from scoctl.services.informer import pod_watch, pump
from scoctl.stages.watch import Follower, Source, WatchResult

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import PodEvent
    from scoctl.state import Store

log = logging.getLogger(__name__)


def follow(config: Config, store: Store, clock: Clock, *, sources: Collection[Source],
           stop: threading.Event, on_pass: Callable[[WatchResult], None],
           teardown: bool = True, cluster: Cluster | None = None,
           scheduler: BatchScheduler | None = None, poll: float | None = None,
           watch_timeout: float = 30.0, on_error: Callable[[str], None] | None = None,
           guard: Callable[[], AbstractContextManager[object]] | None = None) -> int:
    """Stream until `stop` is set; returns the number of passes.

    `guard` is entered around every pass (the CLI passes the run lock, so a long
    ``--follow`` never starves `scoctl run`); a pass whose guard raises LockHeld is retried a
    second later with its batch window kept (one warning per stretch of contention).

    Pod events come from a watch thread per namespace (all namespaces when none is
    configured); every pass is `Follower.commit`. An API failure (the watch or a pass) is
    reported through `on_error` and retried, so ``--follow`` survives API restarts.
    """
    follower = Follower(config, store, clock, sources=sources, teardown=teardown,
                        cluster=cluster, scheduler=scheduler, poll=poll)
    events: queue.Queue[PodEvent | Exception] = queue.Queue()
    threads: list[threading.Thread] = []
    if cluster is not None and "k8s" in sources:
        spaces: list[str | None] = list(config.kubernetes.namespaces) or [None]
        for ns in spaces:
            thread = threading.Thread(target=pump, name=f"scoctl-watch-{ns or 'all'}",
                                      args=(pod_watch(cluster, ns), events, stop,
                                            watch_timeout),
                                      daemon=True)
            thread.start()
            threads.append(thread)
    report = on_error or (lambda message: log.warning("%s", message))
    passes = 0
    held_until = 0.0  # while another writer holds the lock: no pass before this (monotonic)
    held_reported = False  # one warning per stretch of lock contention, not one per try
    while not stop.is_set():
        wait = min(max(follower.seconds_to_due(), held_until - clock.monotonic()), 0.2)
        try:
            item: PodEvent | Exception | None = events.get(timeout=wait) if wait > 0 \
                else events.get_nowait()
        except queue.Empty:
            item = None
        while item is not None:
            if isinstance(item, Exception):
                report(f"watch: {item}")
            else:
                follower.handle(item)
            try:
                item = events.get_nowait()
            except queue.Empty:
                item = None
        if follower.due() and not stop.is_set() and clock.monotonic() >= held_until:
            try:
                with guard() if guard is not None else nullcontext():
                    result = follower.commit()
            except LockHeld as exc:  # another stage runs: keep the window, try again soon
                if not held_reported:
                    report(str(exc))
                    held_reported = True
                held_until = clock.monotonic() + 1.0
                continue
            held_reported = False
            passes += 1
            for error in result.errors:
                report(error)
            on_pass(result)
    if follower.window is not None:  # commit what the open window holds before leaving
        try:
            with guard() if guard is not None else nullcontext():
                on_pass(follower.commit())
            passes += 1
        except LockHeld as exc:
            report(f"open batch window not committed: {exc}")
    for thread in threads:
        thread.join(timeout=0.1)
    return passes


def serve_watch(config: Config, state: Path | str, clock: Clock, *,
                sources: Collection[Source], lock_path: Path, lock_wait: float,
                on_pass: Callable[[WatchResult], None], on_error: Callable[[str], None],
                teardown: bool = True) -> int:
    """``scoctl watch --follow``: `serve` (sources connected, the state created once under
    the run lock), then stream (`follow`) until SIGINT / SIGTERM, holding the lock only while
    a pass records — never in between, so ``scoctl run`` on a timer keeps running beside it.
    Returns the number of passes."""
    from scoctl.host.lock import run_lock

    def stream(store: Store, cluster: Cluster | None, scheduler: BatchScheduler | None,
               signals: Signals) -> int:
        return follow(config, store, clock, sources=sources, stop=signals.event,
                      on_pass=on_pass, teardown=teardown, cluster=cluster,
                      scheduler=scheduler, on_error=on_error,
                      guard=lambda: run_lock(lock_path, wait=lock_wait))

    return serve(config, state, sources=sources, lock_path=lock_path, lock_wait=lock_wait,
                 body=stream)
