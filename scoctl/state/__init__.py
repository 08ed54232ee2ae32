"""The state file: all SQL lives in this package (DESIGN §9).

`Store` is the typed interface the stages use; `scoctl.state.sqlite` implements it over SQLite
through sqlite-utils. The rows it loads and saves are the value types of `scoctl.core.model`.
"""

from scoctl.state.opening import open_state
from scoctl.state.sqlite import SCHEMA_VERSION, Store

__all__ = ["SCHEMA_VERSION", "Store", "open_state"]
