"""Keep secrets out of logs, events and the state file."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SECRET_KEY = re.compile(r"(pass(word)?|secret|token|credential|private[_-]?key|auth)", re.I)
REDACTED = "***"


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be logged (``join_token``, ``password`` ...)."""
    return bool(_SECRET_KEY.search(key))


def scrub(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by ``***``."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else scrub(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    return value
