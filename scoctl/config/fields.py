"""How a config field is declared: once, on its dataclass, with its default (issue 21 item 6).

A field's type, its default and how the file gives it sit on one line::

    timeout: float = setting(10.0, "duration")
    name: str = field(metadata=read_as("string"))  # no default: the file must give it

The keys a section accepts (`schema.FIELDS`) are its dataclass's fields, and the parser reads
every field that carries a `Spec`, falling back to the dataclass's default. A field without a
`Spec` (a nested section, or a rule that needs the field's neighbours) is still a key the file
may give; its section's own reader reads it. `OUTSIDE` marks a field the file never gives.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, Literal, TypeVar

T = TypeVar("T")

Kind = Literal["string", "path", "boolean", "number", "integer", "duration", "names", "labels"]
"""How the parser reads a value: ``names`` is a list of strings and ``labels`` a mapping of
strings to strings, where an empty list or mapping means the default."""

_SPEC = "scoctl.config.spec"
_OUTSIDE = "scoctl.config.outside"
OUTSIDE: Mapping[str, Any] = {_OUTSIDE: True}


@dataclass(frozen=True)
class Spec:
    """How the parser reads one field from its mapping in the file."""

    kind: Kind
    low: float | None = None  # number, integer: the least value accepted
    high: float | None = None  # number: the greatest
    most: float | None = None  # duration: the longest, when shorter than the usual century
    under: str | None = None  # top level: the mapping the file writes it in (planner, metrics)
    key: str | None = None  # its key in the file, when that is not the attribute's name

    def key_of(self, attribute: str) -> str:
        return self.key or attribute


def read_as(kind: Kind, *, low: float | None = None, high: float | None = None,
         most: float | None = None, under: str | None = None,
         key: str | None = None) -> Mapping[str, Any]:
    """Field metadata saying how the file gives the field (see `Spec`)."""
    return {_SPEC: Spec(kind, low=low, high=high, most=most, under=under, key=key)}


def setting(default: T, kind: Kind, *, low: float | None = None, high: float | None = None,
            most: float | None = None, under: str | None = None, key: str | None = None) -> T:
    """A dataclass field with `default`, read from the file as `kind` (see `Spec`)."""
    made: T = field(default=default,
                    metadata=read_as(kind, low=low, high=high, most=most, under=under, key=key))
    return made


def spec_of(attribute: Field[Any]) -> Spec | None:
    """The `Spec` of a dataclass field, None when its section reads it by hand."""
    found = attribute.metadata.get(_SPEC)
    return found if isinstance(found, Spec) else None


def default_of(attribute: Field[Any]) -> Any:
    """The dataclass's default of a field, `MISSING` when the file must give it."""
    if attribute.default is not MISSING:
        return attribute.default
    if attribute.default_factory is not MISSING:
        return attribute.default_factory()
    return MISSING


def in_file(cls: type) -> list[Field[Any]]:
    """The fields of dataclass `cls` that the file may give, in declaration order."""
    return [f for f in fields(cls) if not f.metadata.get(_OUTSIDE)]


def keys_of(cls: type) -> frozenset[str]:
    """The keys the mapping of dataclass `cls` accepts: a field written `under` another
    mapping adds that mapping's name instead of its own."""
    found = set()
    for attribute in in_file(cls):
        written = spec_of(attribute)
        found.add(written.under if written and written.under else attribute.name)
    return frozenset(found)


def keys_under(cls: type, under: str) -> frozenset[str]:
    """The keys of the mapping `under` that holds some of `cls`'s fields (``planner``)."""
    return frozenset(written.key_of(attribute.name) for attribute in in_file(cls)
                     if (written := spec_of(attribute)) and written.under == under)


def sections_under(cls: type) -> tuple[str, ...]:
    """The mappings (``planner``, ``metrics``) some of `cls`'s fields are written in."""
    return tuple(dict.fromkeys(written.under for attribute in in_file(cls)
                               if (written := spec_of(attribute)) and written.under))
