"""Opening the state the config names: a SQLite file, or a PostgreSQL database (DESIGN §15)."""

from __future__ import annotations

from pathlib import Path

from scoctl.clock import Clock
from scoctl.config.schema import is_url
from scoctl.state.sqlite import Store


def open_state(state: Path | str, *, clock: Clock | None = None, create: bool = False,
               migrate: bool = True, password_file: Path | None = None) -> Store:
    """Open `state`: a ``postgresql://`` URL (the password from PGPASSFILE or
    `password_file`), else a SQLite file. StateError (exit 2) for a state that cannot be used,
    TemporaryError (exit 1) for a database that cannot be reached."""
    if is_url(state):
        from scoctl.state.postgresql import PostgresStore

        return PostgresStore.open_url(str(state), clock=clock, create=create, migrate=migrate,
                                      password_file=password_file)
    return Store.open(Path(state), clock=clock, create=create, migrate=migrate)
