"""Logging to stderr. Every line goes through `secrets.redact` on its way out: callers scrub
what they log, and the handler removes any remembered secret they missed (an exception message
that echoes a token, say)."""

from __future__ import annotations

import logging
import sys

from scoctl.secrets import redact

LOG = logging.getLogger("scoctl")


class _RedactingFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def setup_logging(verbosity: int) -> None:
    """-q: errors only; default: warnings; -v: info; -vv: debug. Always on stderr."""
    level = {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    root = logging.getLogger("scoctl")
    root.setLevel(level)
    if not any(getattr(h, "_scoctl", False) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(_RedactingFormatter("scoctl: %(levelname)s: %(message)s"))
        handler._scoctl = True  # type: ignore[attr-defined]
        root.addHandler(handler)
        root.propagate = False
