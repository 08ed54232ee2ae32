"""What every command shares: the global options and how to reach config and state."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.state import Store


@dataclass
class Globals:
    """The global options of DESIGN §8, and lazily loaded config and state."""

    config_option: Path | None = None
    state_option: Path | None = None
    json: bool = False
    verbosity: int = 0
    _config: Config | None = field(default=None, repr=False)

    def config(self) -> Config:
        """The config (loaded once). Falls back to the bundled demo with a warning on stderr."""
        if self._config is None:
            from scoctl.config.schema import load_config, resolve_config_path

            path, warning = resolve_config_path(self.config_option)
            if warning and self.verbosity >= 0:
                print(f"scoctl: warning: {warning}", file=sys.stderr)
            self._config = load_config(path)
        return self._config

    def state_path(self) -> Path:
        """--state, else the config's `state`."""
        return self.state_option if self.state_option else self.config().state

    def open_store(self, *, create: bool = False) -> Store:
        """Open the state file (migrating an older schema; refusing a newer one)."""
        from scoctl.state import open_store

        return open_store(self.state_path(), create=create)

    @contextmanager
    def writer(self, wait: float | None = None, *, create: bool = False) -> Iterator[Store]:
        """Hold the run lock (waiting up to `wait`, else the config's lock_wait) and the store."""
        from scoctl.host.lock import run_lock

        path = self.state_path()
        limit = self.config().timeouts.lock_wait if wait is None else wait
        with run_lock(path, wait=limit):
            store = self.open_store(create=create)
            try:
                yield store
            finally:
                store.close()


def globals_of(ctx: typer.Context, *, json: bool = False) -> Globals:
    """The Globals object the root callback stored on the context.

    `json` is the command's own ``--json`` flag: ``scoctl status --json`` and
    ``scoctl --json status`` mean the same.
    """
    obj = ctx.find_root().obj
    if not isinstance(obj, Globals):
        obj = Globals()
        ctx.find_root().obj = obj
    if json:
        obj.json = True
    return obj


JsonOption = Annotated[bool, typer.Option("--json", help="Machine output (JSON) on stdout.")]


WAIT_HELP = "Seconds to wait for another scoctl run to release the lock (then exit 75)."
