"""Slurm generic resources (GRES) as plain values: parsing and counting, no I/O.

Slurm prints a node's or a job's GRES in a few spellings, all handled by `parse_gres`:

* ``sinfo -o %G`` and the JSON ``gres`` field: ``gpu:a100:4``, ``gpu:4``, ``gpu:a100:4(S:0-1)``,
  ``gpu:a100:4,mps:100``, ``(null)`` or ``""`` for none;
* ``GresUsed`` / ``scontrol -d``: ``gpu:a100:2(IDX:0,2-3)`` (commas inside the parentheses);
* job fields (``tres_per_node`` in 22.05): ``gres:gpu:fake:1``, later ``gres/gpu:fake:1``;
* TRES strings: ``gres/gpu:a100=4``;
* the ``no_consume`` flag of slurm.conf: ``bandwidth:lustre:no_consume:4G`` (ignored).

Counts may carry Slurm's binary suffixes (``mps:1K`` is 1024). A name without a count means
one (``gpu``, ``gpu:a100``), as in ``--gres``.

`gres_map` (the config's ``slurm.gres_map``, e.g. ``{gpu: nvidia.com/gpu}``) names Slurm GRES as
the resources the rest of scoctl counts; a key may also be typed (``gpu:a100``), which wins over
the plain name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scoctl.core.syntax import split_top_level

DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
DEFAULT_GRES_MAP: Mapping[str, str] = {"gpu": DEFAULT_GPU_RESOURCE}

_EMPTY = {"", "(null)", "n/a", "none"}
_SUFFIX = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}
_COUNT = re.compile(r"^([0-9]+)([KMGTP]?)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")


class GresError(ValueError):
    """A GRES string that is not in any spelling Slurm prints."""


@dataclass(frozen=True)
class Gres:
    """One GRES entry: ``gpu:a100:4`` is ``Gres("gpu", "a100", 4)``; untyped has type None."""

    name: str
    type: str | None
    count: int

    def __str__(self) -> str:
        return f"{self.name}:{self.type}:{self.count}" if self.type else f"{self.name}:{self.count}"


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses (``IDX:0,2`` stays whole)."""
    try:
        return split_top_level(text, "()")
    except ValueError as exc:
        raise GresError(f"{exc} (GRES)") from None


def _count(text: str, whole: str) -> int:
    match = _COUNT.match(text)
    if not match:
        raise GresError(f"bad count {text!r} in GRES {whole!r}")
    number, suffix = match.groups()
    return int(number) * _SUFFIX[suffix.upper()]


def parse_gres_entry(text: str) -> Gres:
    """One entry (``gpu:a100:4(S:0-1)``, ``gres/gpu=2``) as a `Gres`; raises `GresError`."""
    whole = text
    entry = text.strip()
    paren = entry.find("(")
    if paren >= 0:
        if not entry.endswith(")"):
            raise GresError(f"text after the suffix in GRES {whole!r}")
        entry = entry[:paren]
    for prefix in ("gres:", "gres/"):
        if entry.lower().startswith(prefix):
            entry = entry[len(prefix) :]
    tres_count: int | None = None
    if "=" in entry:  # TRES spelling: gres/gpu:a100=4
        entry, _, number = entry.partition("=")
        tres_count = _count(number.strip(), whole)
    # slurm.conf's flag ``bandwidth:lustre:no_consume:4G`` (sinfo prints it as configured)
    fields = [f for f in entry.split(":") if f.lower() != "no_consume"]
    if len(fields) > (2 if tres_count is not None else 3) or not all(
        _NAME.match(f) for f in fields
    ):
        raise GresError(f"not a GRES entry: {whole!r}")
    name, gres_type, count = fields[0], None, 1
    if tres_count is not None:
        gres_type, count = (fields[1] if len(fields) == 2 else None), tres_count
    elif len(fields) == 3:
        gres_type, count = fields[1], _count(fields[2], whole)
    elif len(fields) == 2 and _COUNT.match(fields[1]):
        count = _count(fields[1], whole)
    elif len(fields) == 2:
        gres_type = fields[1]
    if _COUNT.match(name):
        raise GresError(f"GRES name is a number in {whole!r}")
    return Gres(name=name, type=gres_type, count=count)


def parse_gres(text: str | None) -> tuple[Gres, ...]:
    """Every entry of a GRES string; ``None``, ``""``, ``(null)`` and ``N/A`` give ``()``.

    Raises `GresError` for text in no spelling Slurm prints (the adapter turns it into
    an unparseable-output error).
    """
    if text is None or text.strip().lower() in _EMPTY:
        return ()
    entries = []
    for part in _split_top_level(text.strip()):
        if part.strip().lower() in _EMPTY:
            continue
        entries.append(parse_gres_entry(part))
    return tuple(entries)


def resource_name(entry: Gres, gres_map: Mapping[str, str] = DEFAULT_GRES_MAP) -> str:
    """The resource name scoctl counts an entry as: ``gres_map["name:type"]``, then
    ``gres_map["name"]``, else the GRES name itself."""
    if entry.type is not None:
        typed = gres_map.get(f"{entry.name}:{entry.type}")
        if typed:
            return typed
    return gres_map.get(entry.name, entry.name)


def to_resources(
    entries: Iterable[Gres], gres_map: Mapping[str, str] = DEFAULT_GRES_MAP
) -> dict[str, int]:
    """Entries summed per resource name (see `resource_name`); zero counts are dropped."""
    out: dict[str, int] = {}
    for entry in entries:
        name = resource_name(entry, gres_map)
        out[name] = out.get(name, 0) + entry.count
    return {k: v for k, v in out.items() if v}


def gpu_gres_names(
    gres_map: Mapping[str, str] = DEFAULT_GRES_MAP, gpu_resource: str = DEFAULT_GPU_RESOURCE
) -> frozenset[str]:
    """The GRES names counted as GPUs: every plain key mapped to `gpu_resource`, and ``gpu``
    itself unless the map sends it to another resource (so an empty map still counts GPUs)."""
    names = {key for key, value in gres_map.items() if ":" not in key and value == gpu_resource}
    if "gpu" not in gres_map:
        names.add("gpu")
    return frozenset(names)


def gres_count(
    entries: Iterable[Gres], names: Iterable[str] = ("gpu",), gres_type: str | None = None
) -> int:
    """Sum of the entries with one of `names`; with `gres_type`, only entries of that type
    (compared case-insensitively, as Slurm does). Untyped entries never match a type."""
    wanted = set(names)
    wanted_type = gres_type.lower() if gres_type else None
    total = 0
    for entry in entries:
        if entry.name not in wanted:
            continue
        if wanted_type is not None and (entry.type or "").lower() != wanted_type:
            continue
        total += entry.count
    return total


def gpu_count(
    entries: Iterable[Gres],
    gpu_type: str | None = None,
    gres_map: Mapping[str, str] = DEFAULT_GRES_MAP,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
) -> int:
    """GPUs among `entries` (see `gpu_gres_names`), optionally only those of `gpu_type`."""
    return gres_count(entries, gpu_gres_names(gres_map, gpu_resource), gpu_type)


def format_gres(entries: Iterable[Gres]) -> str:
    """Entries in ``%G`` spelling (``gpu:a100:4,mps:100``); ``(null)`` for none."""
    text = ",".join(str(e) for e in entries)
    return text or "(null)"
