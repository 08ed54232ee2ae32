"""YAML loading that remembers where each value came from, so errors can name the line.

Input is hostile until proven otherwise: whatever the bytes, these functions return data or raise
a `ConfigError` naming the file (and the line where there is one), fast. Refused:

* text that is not UTF-8;
* a mapping key that is a list or a mapping, and a key given twice in one mapping (PyYAML would
  silently keep the last one);
* aliases that refer to themselves, and documents that expand (through aliases) to more than
  `MAX_NODES` values or nest deeper than `MAX_DEPTH` — the "billion laughs" of YAML;
* scalars PyYAML cannot build (``2001-13-45`` as a date, an integer of 5,000 digits).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoctl.errors import ConfigError

MAX_NODES = 250_000  # values in one located document, aliases expanded (a big config is ~20k)
MAX_DEPTH = 64  # nesting of mappings and lists (a config needs 5)

Path_ = tuple[str | int, ...]
Lines = dict[Path_, int]


@dataclass
class Located:
    """Parsed YAML data plus the line of every mapping key and sequence item, by path."""

    data: Any
    file: str
    lines: dict[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest parent that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: Path_, message: str) -> ConfigError:
        """A ConfigError naming the file, the line and the dotted field of `path`."""
        return ConfigError(message, file=self.file, line=self.line(path), field=dotted(path))


def dotted(path: Path_) -> str:
    """``("pools", 3, "depth")`` -> ``pools[3].depth``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def load_located(text: str, file: str, *, cache: bool = False) -> Located:
    """Parse `text` as YAML, keeping line numbers; any problem is a ConfigError naming the file
    (and the line and field where there is one). With `cache`, a parse of exactly this text
    kept by an earlier run is taken instead (`scoctl.config.parsecache`), and a new one kept."""
    if cache:
        from scoctl.config import parsecache

        hit = parsecache.get(file, text)
        if hit is not None:
            return Located(hit[0], file, hit[1])
    from scoctl.config.yamlparse import parse_located

    data, lines = parse_located(text, file)
    if cache:
        parsecache.put(file, text, data, lines)
    return Located(data, file, lines)


def read_text(path: Path, what: str) -> str:
    """The text of `path` as UTF-8; a missing or unreadable file, or bytes that are not UTF-8,
    is a ConfigError naming the file. `what` is for the message (``config``, ``claims``)."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror or exc}", file=str(path)) from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                          f"{exc.start})", file=str(path)) from exc


def load_data_file(path: Path, what: str) -> Any:
    """A JSON (``.json``) or YAML file's data, fast; errors name the file. `what` is for the
    message (``claims``, ``ranking``)."""
    text = read_text(path, what)
    if path.suffix == ".json":
        try:
            return json.loads(text, parse_constant=_no_constant)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"not JSON: {exc}", file=str(path)) from exc
    from scoctl.config.yamlparse import fast_load

    return fast_load(text, str(path))


def _no_constant(name: str) -> Any:
    """json's NaN, Infinity and -Infinity are not JSON (RFC 8259) and no quantity is one."""
    raise ValueError(f"{name} is not a JSON number")
