"""What a region offers against what the config names (``config check --online``), pure.

The config names, per region, an image, networks and security groups (`regions[].launch`), and
per pool a flavor and an availability zone. A launch of a name the region does not have fails
for that name alone (acquire records it and the workloads it holds back), so the check names
each one up front: the field, the name, and what the region has instead. A name matches an id
or a name the region lists; a name two of its images (or networks, groups) carry is ambiguous,
as Nova's own name lookup finds it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

SHOWN = 8  # of what the region has instead, this many are named


class Kind(StrEnum):
    """What a config name stands for in a region."""

    IMAGE = "image"
    FLAVOR = "flavor"
    NETWORK = "network"
    SECURITY_GROUP = "security group"
    ZONE = "availability zone"


@dataclass(frozen=True)
class Named:
    """One thing a region lists: its id and its name."""

    id: str
    name: str


@dataclass(frozen=True)
class Catalog:
    """What one region offers, by kind (`Kind`)."""

    images: tuple[Named, ...] = ()
    flavors: tuple[Named, ...] = ()
    networks: tuple[Named, ...] = ()
    # None: the region would not list them (Nova's security group proxy failed): not checked
    security_groups: tuple[Named, ...] | None = ()
    zones: tuple[str, ...] = ()

    def of(self, kind: Kind) -> tuple[Named, ...] | None:
        return {Kind.IMAGE: self.images, Kind.FLAVOR: self.flavors,
                Kind.NETWORK: self.networks, Kind.SECURITY_GROUP: self.security_groups,
                Kind.ZONE: tuple(Named(z, z) for z in self.zones)}[kind]


@dataclass(frozen=True)
class Wanted:
    """A name the config gives (`field`, as ``config check`` prints fields) of a `kind`."""

    kind: Kind
    name: str
    field: str


@dataclass(frozen=True)
class Unmet:
    """A name its region does not have (`ambiguous`: has more than once)."""

    region: str
    wanted: Wanted
    ambiguous: bool
    offered: tuple[str, ...]  # what the region has of that kind (the first `SHOWN` names)

    def __str__(self) -> str:
        what = "is ambiguous" if self.ambiguous else "not found"
        have = ", ".join(self.offered) or "none"
        return (f"{self.wanted.field}: {self.wanted.kind} {self.wanted.name!r} {what} in "
                f"region {self.region} (it has: {have})")


def unmet(region: str, wanted: Iterable[Wanted], catalog: Catalog) -> tuple[Unmet, ...]:
    """The `wanted` names `catalog` lacks or holds more than once, in the order given (each
    (kind, name) once). A name matches an id, or exactly one name, of its kind; a kind the
    region would not list is not checked."""
    out: list[Unmet] = []
    seen: set[tuple[Kind, str]] = set()
    for want in wanted:
        key = (want.kind, want.name)
        if key in seen:
            continue
        seen.add(key)
        items = catalog.of(want.kind)
        if items is None:
            continue
        if any(item.id == want.name for item in items):
            continue
        named = sum(1 for item in items if item.name == want.name)
        if named == 1:
            continue
        out.append(Unmet(region, want, named > 1, _names(items)))
    return tuple(out)


def _names(items: Sequence[Named]) -> tuple[str, ...]:
    names = sorted({item.name for item in items})
    return tuple(names[:SHOWN]) + (("…",) if len(names) > SHOWN else ())
