"""Choosing the state backend from the config's ``state`` value.

A path (``./scoctl.db``, ``/var/lib/scoctl/state.db``) or a ``sqlite://`` URL
(``sqlite:///var/lib/scoctl/state.db``) is a SQLite file; ``postgresql://USER@HOST:PORT/DB``
(or ``postgres://``) a PostgreSQL database shared by several runners (design: Runners). Any other
``scheme://`` must name a backend in `BACKENDS`; the stages only ever see the `Store` it opens.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from scoctl.clock import Clock
from scoctl.errors import StateError
from scoctl.state.store import Store

# (location, clock, create, migrate, password file: the database password, never in a URL)
Opener = Callable[[str, Clock | None, bool, bool, Path | None], Store]


def _open_sqlite(location: str, clock: Clock | None, create: bool, migrate: bool,
                 password_file: Path | None) -> Store:
    from scoctl.state.sqlite import SqliteStore  # sqlite-utils only when a store is opened

    return SqliteStore.open(Path(location), clock=clock, create=create, migrate=migrate)


def _open_postgresql(location: str, clock: Clock | None, create: bool, migrate: bool,
                     password_file: Path | None) -> Store:
    from scoctl.state.postgresql import PostgresStore  # psycopg only when a store is opened

    return PostgresStore.open_url(location, clock=clock, create=create, migrate=migrate,
                                  password_file=password_file)


# scheme → opener; the opener gets the path (sqlite) or the whole URL (any other scheme)
BACKENDS: Mapping[str, Opener] = {"sqlite": _open_sqlite, "postgresql": _open_postgresql,
                                  "postgres": _open_postgresql}


def backend_of(state: str | os.PathLike[str]) -> tuple[str, str]:
    """(backend, location) for a ``state`` value: a path-like is always a SQLite file; text
    with ``scheme://`` names its backend; other text is a SQLite path."""
    if not isinstance(state, str):
        return "sqlite", os.fspath(state)
    scheme, sep, rest = state.partition("://")
    if not sep:
        return "sqlite", state
    scheme = scheme.lower()
    return scheme, rest if scheme == "sqlite" else state


def open_store(state: str | os.PathLike[str], *, clock: Clock | None = None,
               create: bool = False, migrate: bool = True,
               password_file: Path | None = None) -> Store:
    """Open the state `state` names (see `backend_of`).

    `create` makes a missing state; otherwise a missing one is a StateError telling the
    operator to run ``scoctl init``. With `migrate` an older schema is brought up to date
    (each migration in its own transaction); without it an older schema is a StateError.
    A state written by a newer schema is refused with a StateError and left untouched, as is
    one that is not a usable state at all, or a URL whose scheme names no backend.
    `password_file` holds a database's password (else libpq reads ``PGPASSFILE``).
    """
    backend, location = backend_of(state)
    opener = BACKENDS.get(backend)
    if opener is None:
        known = ", ".join(f"{name}://" for name in sorted(BACKENDS))
        raise StateError(f"state {state}: no state backend for {backend}:// "
                         f"(a file path, or one of {known})")
    return opener(location, clock, create, migrate, password_file)
