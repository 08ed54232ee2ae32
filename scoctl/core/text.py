"""Free text from outside (a notice's reason, a hook's detail values, a server's metadata), made
safe to store and to print (pure): control characters — C0, DEL, C1 and the format characters
such as the bidirectional overrides — are written as escapes (``\\x1b``, ``\\n``, ``\\u202e``),
so that no event line can move a terminal's cursor, forge a second line or turn text around.
Escaping is idempotent: an escaped text has nothing left to escape.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# controls, format characters, lone surrogates, and the line and paragraph separators
_ESCAPED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def printable(text: str) -> str:
    """`text` with each control or format character escaped."""
    if text.isprintable():
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _ESCAPED else ch for ch in text)


def _escape(ch: str) -> str:
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def printable_detail(value: Any) -> Any:
    """A detail value (JSON: mappings, lists, scalars) with every string, keys included,
    made `printable`."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, Mapping):
        return {printable(str(k)): printable_detail(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_detail(v) for v in value]
    return value


def human_value(value: Any) -> str:
    """A detail value as a person reads it, never as Python prints it: nothing (None) is
    ``-``, a truth ``yes``/``no``, a list its items comma-separated (``none`` when empty), a
    mapping ``key:value`` pairs comma-separated, a number without a trailing ``.0``."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return ",".join(f"{k}:{human_value(v)}" for k, v in value.items()) or "none"
    if isinstance(value, list | tuple | set | frozenset):
        return ",".join(human_value(v) for v in value) or "none"
    return str(value)


def human_detail(detail: Mapping[str, Any]) -> str:
    """An event's detail as one line for people, ``key=value`` by key (logfmt: a value with a
    space or a quote is quoted), each value `human_value`."""
    parts = []
    for key, value in sorted(detail.items()):
        text = printable(human_value(value))
        if not text or any(ch in text for ch in ' "='):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)
