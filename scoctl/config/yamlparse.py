"""The YAML parsing behind `scoctl.config.yamlsrc` (its rules are in that module's docstring).

Its own module so that only a run that parses YAML imports PyYAML: a config whose parse is
cached (`scoctl.config.parsecache`) is read without it.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import yaml

from scoctl.config.yamlsrc import MAX_DEPTH, MAX_NODES, Lines, Path_, dotted
from scoctl.errors import ConfigError

try:  # the C loader parses large claims files several times faster
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

_STR_TAG = "tag:yaml.org,2002:str"


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


def parse_located(text: str, file: str) -> tuple[Any, Lines]:
    """`text` parsed as YAML, with the line of every mapping key and sequence item by path;
    any problem is a ConfigError naming the file (and the line and field where there is one)."""
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
    return data, builder.lines


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
