"""`open_store` picks the backend from the config's `state` value; stages see only `Store`."""

from __future__ import annotations

import pytest

from scoctl.errors import StateError
from scoctl.state import SCHEMA_VERSION, open_store
from scoctl.state.backends import backend_of
from scoctl.state.sqlite import SqliteStore


def test_a_path_or_a_sqlite_url_opens_a_sqlite_file(tmp_path):
    path = tmp_path / "s.db"
    with open_store(path, create=True) as store:
        assert isinstance(store, SqliteStore) and store.schema_version() == SCHEMA_VERSION
        store.mark_dirty(["orders"], "asked")
    with open_store(f"sqlite://{path}") as store:  # sqlite:///abs/path
        assert store.dirty() == {"orders": "asked"}
    with open_store(str(path)) as store:
        assert store.dirty() == {"orders": "asked"}


@pytest.mark.parametrize(("state", "backend", "location"), [
    ("./scoctl.db", "sqlite", "./scoctl.db"),
    ("sqlite:///var/lib/scoctl/state.db", "sqlite", "/var/lib/scoctl/state.db"),
    ("SQLite://relative.db", "sqlite", "relative.db"),
    ("postgresql://scoctl@db.example:5432/scoctl", "postgresql",
     "postgresql://scoctl@db.example:5432/scoctl"),
])
def test_the_backend_is_named_by_the_url_scheme(state, backend, location):
    assert backend_of(state) == (backend, location)


def test_a_name_with_a_colon_but_no_scheme_is_a_file(tmp_path):
    assert backend_of("./state:v2.db") == ("sqlite", "./state:v2.db")
    assert backend_of(tmp_path / "state:v2.db") == ("sqlite", str(tmp_path / "state:v2.db"))


def test_a_scheme_without_a_backend_is_a_state_error_and_creates_nothing(tmp_path):
    with pytest.raises(StateError, match=r"mysql://u@h/db: no state backend for mysql://"):
        open_store("mysql://u@h/db", create=True)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_file_names_scoctl_init_whatever_the_spelling(tmp_path):
    for state in (tmp_path / "missing.db", f"sqlite://{tmp_path}/missing.db"):
        with pytest.raises(StateError, match="scoctl init"):
            open_store(state)
    assert list(tmp_path.iterdir()) == []
