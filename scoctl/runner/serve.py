"""The one way a long-running command starts: connect the adapters the sources need, create or
migrate the state once under the run lock, open it, install the signal handling, and hand all
of it to the command's loop (``run --follow``'s controller, ``watch --follow``'s stream).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from scoctl.config.schema import Config
from scoctl.runner.signals import Signals

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.model import Source
    from scoctl.state import Store

T = TypeVar("T")


@contextmanager
def connected(config: Config, sources: Collection[Source],
              ) -> Iterator[tuple[Cluster | None, BatchScheduler | None]]:
    """The adapters the sources need (lazily imported), closed when the block ends."""
    from scoctl.adapters.factory import cluster_for, scheduler_for

    cluster = cluster_for(config) if "k8s" in sources else None
    scheduler = scheduler_for(config) if "slurm" in sources else None
    try:
        yield cluster, scheduler
    finally:
        if cluster is not None:
            cluster.close()
        close = getattr(scheduler, "close", None)
        if callable(close):
            close()


def serve(config: Config, state: Path | str, *, sources: Collection[Source], lock_path: Path,
          lock_wait: float, body: Callable[[Store, Cluster | None, BatchScheduler | None,
                                            Signals], T], reload: bool = False) -> T:
    """Connect the sources, create or migrate the state once under the run lock (never held
    for the life of the process), open it, install the stop (and, with `reload`, SIGHUP)
    handlers, and return what `body(store, cluster, scheduler, signals)` returns."""
    from scoctl.host.lock import run_lock
    from scoctl.state import open_store

    password = config.state_password_file
    signals = Signals()
    with connected(config, sources) as (cluster, scheduler):
        with run_lock(lock_path, wait=lock_wait):
            open_store(state, create=True, password_file=password).close()
        with (open_store(state, password_file=password) as store,
              signals.installed(reload=reload)):
            return body(store, cluster, scheduler, signals)
