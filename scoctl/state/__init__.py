"""The state: all SQL lives in this package (design: State).

`Store` (scoctl.state.store) is the Protocol the stages and commands type against;
`open_store` picks the backend from the config's ``state`` value. `scoctl.state.sqlite`
implements it over one SQLite file through sqlite-utils; `migrations` holds the numbered schema.
The rows it loads and saves are the value types of `scoctl.core.model`.
"""

from scoctl.state.backends import open_store
from scoctl.state.migrations import SCHEMA_VERSION
from scoctl.state.store import Store

__all__ = ["SCHEMA_VERSION", "Store", "open_store"]
