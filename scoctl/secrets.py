"""Keep secrets out of logs, events, the state file, stdout and stderr.

Two defences, applied together:

* by key: the values of secret-looking keys (``password``, ``join_token`` …) in a mapping are
  replaced (`scrub`);
* by value: every secret this process has read — the slurmrestd JWT, the join secret, a
  clouds.yaml password — is registered with `remember` where it is read, and `redact` removes it
  (and any JWT-shaped text, whoever issued it) from any text: an error body that echoes a token
  back, an exception message, a log line. The sinks apply it: the CLI's error line and JSON
  output, the log handler, every stored event and spool file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SECRET_KEY = re.compile(r"(pass(word)?|secret|token|credential|private[_-]?key|auth)", re.I)
# header.payload.signature, each base64url; the header of every JWT starts `{"` = `eyJ`
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}")
REDACTED = "***"
MIN_SECRET = 6  # shorter values would redact ordinary words; nobody uses such a secret

_known: set[str] = set()
_forms: list[str] = []  # every known secret and its JSON-escaped form, longest first


def is_secret_key(key: str) -> bool:
    """True for keys whose values must never be logged (``join_token``, ``password`` ...)."""
    return bool(_SECRET_KEY.search(key))


def remember(secret: str | None) -> None:
    """Register a secret this process read, so that `redact` removes it from every text."""
    if not secret or len(secret) < MIN_SECRET or secret in _known:
        return
    import json  # here, not at the top: every command's start (and the gate's) imports this

    _known.add(secret)
    forms = {secret, json.dumps(secret)[1:-1]}
    _forms.extend(forms - set(_forms))
    _forms.sort(key=len, reverse=True)


def redact(text: str) -> str:
    """`text` without any remembered secret or JWT-shaped token (each becomes ``***``)."""
    for secret in _forms:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return _JWT.sub(REDACTED, text) if "eyJ" in text else text


def scrub(value: Any) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by ``***`` and every
    string redacted (`redact`)."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret_key(str(k)) and v not in (None, "") else scrub(v))
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub(v) for v in value]
    if isinstance(value, str):
        return redact(value)
    return value
