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
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scoctl.errors import ConfigError

try:  # the C loader parses large claims files several times faster
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_STR_TAG = "tag:yaml.org,2002:str"
MAX_NODES = 250_000  # values in one located document, aliases expanded (a big config is ~20k)
MAX_DEPTH = 64  # nesting of mappings and lists (a config needs 5)

Path_ = tuple[str | int, ...]


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


class _Builder:
    """Builds plain data from a composed node graph, recording lines and refusing bombs."""

    def __init__(self, loader: Any, file: str) -> None:
        self.loader = loader
        self.file = file
        self.lines: dict[Path_, int] = {}
        self.count = 0
        self.open: set[int] = set()  # ids of the collection nodes being built (alias loops)

    def fail(self, node: yaml.Node, path: Path_, message: str) -> ConfigError:
        return ConfigError(message, file=self.file, line=node.start_mark.line + 1,
                           field=dotted(path) or None)

    def build(self, node: yaml.Node, path: Path_) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, path, f"the document expands to more than {MAX_NODES} values "
                            "(aliases of aliases?)")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if not isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            return self.scalar(node)
        if len(path) >= MAX_DEPTH:
            raise self.fail(node, path, f"nested deeper than {MAX_DEPTH} levels")
        if id(node) in self.open:
            raise self.fail(node, path, "an alias refers to a value that contains it")
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.SequenceNode):
                return [self.item(child, (*path, i)) for i, child in enumerate(node.value)]
            return self.mapping(node, path)
        finally:
            self.open.discard(id(node))

    def scalar(self, node: yaml.Node) -> Any:
        """A scalar's value; a string is its text (what the constructor would return, without
        its dispatch: a 2,000-pool config holds some 30,000 of them)."""
        if node.tag == _STR_TAG and isinstance(node, yaml.ScalarNode):
            return node.value
        return self.loader.construct_object(node, deep=True)

    def item(self, node: yaml.Node, path: Path_) -> Any:
        self.lines[path] = node.start_mark.line + 1
        return self.build(node, path)

    def mapping(self, node: yaml.MappingNode, path: Path_) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, path, "a mapping key must be a plain value, not a "
                                + ("list" if isinstance(key_node, yaml.SequenceNode)
                                   else "mapping"))
            key = self.scalar(key_node)
            line = key_node.start_mark.line + 1
            if not isinstance(key, Hashable):
                raise self.fail(key_node, path, f"a mapping key must be a plain value: {key!r}")
            child = (*path, str(key))
            if key in first:
                raise self.fail(key_node, child, f"duplicate key (first at line {first[key]})")
            first[key] = line
            self.lines[child] = line
            out[key] = self.build(value_node, child)
        return out


def _syntax_error(exc: yaml.YAMLError, file: str) -> ConfigError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        return ConfigError(f"YAML syntax error: {exc.problem or exc}", file=file, line=line)
    if isinstance(exc, yaml.reader.ReaderError):
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return ConfigError(f"YAML error: {exc.reason} (#x{char:04x} at character {exc.position})",
                           file=file)
    return ConfigError(f"YAML error: {str(exc).splitlines()[0]}", file=file)


def load_located(text: str, file: str) -> Located:
    """Parse `text` as YAML, keeping line numbers; any problem is a ConfigError naming the file
    (and the line and field where there is one)."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        builder = _Builder(loader, file)
        data = None if node is None else builder.build(node, ())
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, file) from exc
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ConfigError(f"unreadable YAML value: {exc}", file=file) from exc
    finally:
        loader.dispose()
    return Located(data, file, builder.lines)


class _StrictLoader(_Loader):
    """The fast loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark)
            if key in mapping:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            mapping[key] = self.construct_object(value_node, deep=deep)
        return mapping


def fast_load(text: str, file: str) -> Any:
    """Parse large YAML quickly (C loader where present), without line tracking.

    Aliases are not expanded (they share one value), so a "billion laughs" document stays small.
    """
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: TID251 - the C safe loader
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, file) from exc
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ConfigError(f"unreadable YAML value: {exc}", file=file) from exc


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
    return fast_load(text, str(path))


def _no_constant(name: str) -> Any:
    """json's NaN, Infinity and -Infinity are not JSON (RFC 8259) and no quantity is one."""
    raise ValueError(f"{name} is not a JSON number")
