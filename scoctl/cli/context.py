"""What every command shares, without typer: the global options and how to reach config and state.

`scoctl gate` starts without typer (`cli.gate_fast`: a submit wrapper pays the start-up on every
``sbatch``), so nothing here may import typer or click.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from scoctl.errors import UsageError

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.services.leadership import Leadership
    from scoctl.state import Store


class Globals:
    """The global options of design: CLI, and lazily loaded config and state.

    A plain class: `scoctl COMMAND --help` would import `dataclasses` for it alone.
    """

    def __init__(self, config_option: Path | None = None,
                 state_option: Path | str | None = None,
                 json: bool = False, verbosity: int = 0) -> None:
        self.config_option = config_option
        self.state_option = state_option
        self.json = json
        self.verbosity = verbosity
        self._config: Config | None = None

    def config(self, *, reader: bool = False) -> Config:
        """The config (loaded once). Falls back to the bundled demo with a warning on stderr.
        A `reader` (status, events, top: they only read the state) is given a config that
        fails a check only launching needs (an unjoinable user-data template), with that
        error as a warning on stderr: the state is still shown."""
        if self._config is None:
            from scoctl.config.schema import load_config, resolve_config_path
            from scoctl.errors import ConfigError

            path, warning = resolve_config_path(self.config_option)
            if warning and self.verbosity >= 0:
                print(f"scoctl: warning: {warning}", file=sys.stderr)
            deferred: list[ConfigError] | None = [] if reader else None
            self._config = load_config(path, deferred)
            for problem in deferred or ():
                print(f"scoctl: warning: {problem} (the state is shown; launches need it "
                      "fixed)", file=sys.stderr)
        return self._config

    def state_path(self) -> Path | str:
        """--state, else the config's `state`: a SQLite file or a PostgreSQL URL."""
        return self.state_option if self.state_option else self.config().state

    def state_exists(self) -> bool:
        """The SQLite file exists; a database always does (opening it says if it is usable)."""
        from scoctl.config.schema import is_url

        state = self.state_path()
        return is_url(state) or Path(state).exists()

    def open_store(self, *, create: bool = False, reader: bool = False) -> Store:
        """Open the state (migrating an older schema; refusing a newer one). A `reader`
        (status, events) never writes: an older or empty state is refused untouched."""
        from scoctl.state import open_store

        return open_store(self.state_path(), create=create, migrate=not reader,
                          password_file=self.config().state_password_file)

    def lock_path(self) -> Path:
        """What the run lock locks: the SQLite file, or for a database a file in budget_dir
        named after it (one writing scoctl per state and host; hosts coordinate by lease)."""
        from scoctl.config.schema import is_url

        state = self.state_path()
        if not is_url(state):
            return Path(state)
        import hashlib

        digest = hashlib.sha256(str(state).encode()).hexdigest()[:16]
        return self.config().budget_dir / f"state-{digest}"

    @contextmanager
    def writer(self, wait: float | None = None, *, create: bool = False) -> Iterator[Store]:
        """Hold the run lock (waiting up to `wait`, else the config's lock_wait) and the store."""
        from scoctl.host.lock import run_lock

        path = self.lock_path()
        limit = self.config().timeouts.lock_wait if wait is None else wait
        with run_lock(path, wait=limit):
            store = self.open_store(create=create)
            try:
                yield store
            finally:
                store.close()


    @contextmanager
    def leading(self) -> Iterator[Leadership]:
        """This runner's leadership of the regions (design: Runners), ended when the block ends."""
        from scoctl.services.leadership import leadership_for

        lead = leadership_for(self.config(), self.state_path())
        try:
            yield lead
        finally:
            lead.close()


def start(*, config: Path | None, state: str | Path | None, json: bool, verbose: int,
          quiet: bool) -> Globals:
    """Apply the global options: refuse a missing --config, set up logging on stderr."""
    if config is not None and not config.exists():
        # checked here, not only where the config is read: `status --state X` never reads it,
        # and a mistyped --config must not pass silently
        raise UsageError(f"--config {config}: no such file")
    verbosity = -1 if quiet else verbose
    location = None
    if state is not None:
        from scoctl.config.schema import state_location

        try:
            location = state_location(str(state))
        except ValueError as exc:
            raise UsageError(f"--state: {exc}") from None
    from scoctl.logs import setup_logging

    setup_logging(verbosity)
    return Globals(config_option=config, state_option=location, json=json, verbosity=verbosity)
