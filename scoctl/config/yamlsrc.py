"""YAML loading that remembers where each value came from, so errors can name the line."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from scoctl.errors import ConfigError

try:  # the C loader parses large claims files several times faster
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]


@dataclass
class Located:
    """Parsed YAML data plus the line of every mapping key and sequence item, by path."""

    data: Any
    file: str
    lines: dict[tuple[str | int, ...], int] = field(default_factory=dict)

    def line(self, path: tuple[str | int, ...]) -> int | None:
        """The line of `path`, or of its nearest parent that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)

    def error(self, path: tuple[str | int, ...], message: str) -> ConfigError:
        """A ConfigError naming the file, the line and the dotted field of `path`."""
        return ConfigError(message, file=self.file, line=self.line(path), field=dotted(path))


def dotted(path: tuple[str | int, ...]) -> str:
    """``("pools", 3, "depth")`` -> ``pools[3].depth``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out


def _construct(node: yaml.Node, loader: Any, path: tuple[str | int, ...],
               lines: dict[tuple[str | int, ...], int]) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            child = (*path, str(key))
            lines[child] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, loader, child, lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            child = (*path, index)
            lines[child] = item.start_mark.line + 1
            items.append(_construct(item, loader, child, lines))
        return items
    return loader.construct_object(node, deep=True)


def load_located(text: str, file: str) -> Located:
    """Parse `text` as YAML, keeping line numbers; a syntax error names file and line."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        lines: dict[tuple[str | int, ...], int] = {}
        data = None if node is None else _construct(node, loader, (), lines)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(f"YAML syntax error: {exc.problem or exc}", file=file, line=line) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", file=file) from exc
    finally:
        loader.dispose()
    return Located(data, file, lines)


def fast_load(text: str, file: str) -> Any:
    """Parse large YAML quickly (C loader where present), without line tracking."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: TID251 - _Loader is the C safe loader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise ConfigError(f"YAML syntax error: {exc.problem or exc}", file=file,
                          line=mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", file=file) from exc


def load_data_file(path: Path, what: str) -> Any:
    """A JSON (``.json``) or YAML file's data, fast; errors name the file. `what` is for the
    message (``claims``, ``ranking``)."""
    import json

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", file=str(path)) from exc
    if path.suffix == ".json":
        try:
            return json.loads(text, parse_constant=_no_constant)
        except ValueError as exc:
            raise ConfigError(f"not JSON: {exc}", file=str(path)) from exc
    return fast_load(text, str(path))


def _no_constant(name: str) -> Any:
    """json's NaN, Infinity and -Infinity are not JSON (RFC 8259) and no quantity is one."""
    raise ValueError(f"{name} is not a JSON number")
