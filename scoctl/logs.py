"""Logging to stderr; secrets are scrubbed by the callers before anything is logged."""

from __future__ import annotations

import logging
import sys

LOG = logging.getLogger("scoctl")


def setup_logging(verbosity: int) -> None:
    """-q: errors only; default: warnings; -v: info; -vv: debug. Always on stderr."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    root = logging.getLogger("scoctl")
    root.setLevel(level)
    if not any(getattr(h, "_scoctl", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("scoctl: %(levelname)s: %(message)s"))
        handler._scoctl = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
