"""Resource quantities in canonical integer units.

Canonical units used everywhere inside scoctl (a `Resources` mapping):

* ``cpu``: millicores (``"500m"`` -> 500, ``16`` -> 16000)
* ``memory``: bytes (``"64Gi"`` -> 68719476736)
* any other name (``nvidia.com/gpu``): a count

Integers keep sums of tens of thousands of pods exact. JSON output converts cpu to cores and keeps
memory in bytes (`to_json_resources`).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

Resources = Mapping[str, int]

CPU = "cpu"
MEMORY = "memory"

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")
# Canonical amounts are stored as SQLite integers (64-bit signed); anything larger is a typo.
MAX_AMOUNT = 2**63 - 1
# A number written with more than this many digits before the point (after its exponent) is
# refused before any arithmetic: ``1e999999`` would otherwise build a million-digit integer.
_MAX_DIGITS = 24


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity."""


def _decimal(value: object) -> Decimal:
    """A Kubernetes quantity (``16``, ``"500m"``, ``"64Gi"``, ``"1e3"``) as an exact Decimal."""
    if isinstance(value, bool):
        raise QuantityError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return _bounded(Decimal(value), value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"not a finite quantity: {value!r}")
        return _bounded(Decimal(repr(value)), value)
    if not isinstance(value, str):
        raise QuantityError(f"not a quantity: {value!r}")
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match:
        raise QuantityError(f"not a quantity: {value!r}")
    number, suffix = match.groups()
    try:
        base = _bounded(Decimal(number), value)
    except InvalidOperation as exc:
        raise QuantityError(f"not a quantity: {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def _bounded(number: Decimal, value: object) -> Decimal:
    """`number` when it is finite and of a sane size (checked on the exponent: no arithmetic)."""
    if not number.is_finite():
        raise QuantityError(f"not a finite quantity: {value!r}")
    if number and number.adjusted() >= _MAX_DIGITS:
        raise QuantityError(f"quantity too large: {value!r}")
    return number


def _ceil(value: Decimal) -> int:
    """Round up, as Kubernetes does when it converts a quantity to a smaller unit."""
    if value > MAX_AMOUNT:
        raise QuantityError(f"quantity too large: {value:.3e} canonical units "
                            f"(at most {MAX_AMOUNT})")
    integral = int(value)
    return integral + 1 if value > integral else integral


def parse_cpu(value: object) -> int:
    """CPU quantity to millicores (rounded up): ``"500m"`` -> 500, ``2`` -> 2000."""
    amount = _decimal(value)
    if amount < 0:
        raise QuantityError(f"negative cpu: {value!r}")
    return _ceil(amount * 1000)


def parse_memory(value: object) -> int:
    """Memory quantity to bytes (rounded up): ``"16Gi"`` -> 17179869184, ``"1G"`` -> 10**9."""
    amount = _decimal(value)
    if amount < 0:
        raise QuantityError(f"negative memory: {value!r}")
    return _ceil(amount)


def parse_count(value: object) -> int:
    """An accelerator or other extended resource count (a whole number)."""
    amount = _decimal(value)
    if amount < 0 or amount != amount.to_integral_value():
        raise QuantityError(f"not a whole non-negative count: {value!r}")
    return _ceil(amount)


def parse_quantity(name: str, value: object) -> int:
    """A quantity of resource `name` in canonical units. A string or whole number is worked
    out once per process (a claims file or a pod list repeats the same few thousand times)."""
    if type(value) is str or type(value) is int:  # exactly: not bool, not a subclass
        return _known_quantity(name, value)
    return _parse_quantity(name, value)


@functools.lru_cache(maxsize=4096)
def _known_quantity(name: str, value: str | int) -> int:
    return _parse_quantity(name, value)  # a refusal raises each time: none is cached


def _parse_quantity(name: str, value: object) -> int:
    if name == CPU:
        return parse_cpu(value)
    if name == MEMORY or name.startswith("hugepages-") or name == "ephemeral-storage":
        return parse_memory(value)
    return parse_count(value)


def parse_resources(values: Mapping[str, object]) -> dict[str, int]:
    """A mapping of resource name -> quantity, in canonical units; zero entries are dropped."""
    out: dict[str, int] = {}
    for name, value in values.items():
        amount = parse_quantity(str(name), value)
        if amount:
            out[str(name)] = amount
    return out


_SLURM_MEM = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([KMGTkmgt]?)[Bb]?$")
_SLURM_UNIT_MB = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


def parse_slurm_mem_mb(value: str) -> int:
    """sbatch's ``--mem`` units to MB: ``"4G"`` -> 4096, ``"512"`` -> 512, ``"1024K"`` -> 1.

    Suffixes K, M, G, T are binary (1G = 1024M); a plain number is MB. Rounded up.
    """
    match = _SLURM_MEM.match(value.strip())
    if not match:
        raise QuantityError(f"not a Slurm memory size: {value!r} (use e.g. 4096, 16G, 512M)")
    number, unit = match.groups()
    mb = _bounded(Decimal(number), value) * Decimal(str(_SLURM_UNIT_MB[unit.upper()]))
    return _ceil(mb)


def add(a: Resources, b: Resources) -> dict[str, int]:
    """Per-resource sum."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return {k: v for k, v in out.items() if v}


def scale(a: Resources, factor: int) -> dict[str, int]:
    """Per-resource product with a whole factor."""
    return {k: v * factor for k, v in a.items() if v * factor}


def maximum(a: Resources, b: Resources) -> dict[str, int]:
    """Per-resource maximum."""
    out = dict(a)
    for name, amount in b.items():
        out[name] = max(out.get(name, 0), amount)
    return {k: v for k, v in out.items() if v}


def fits(request: Resources, capacity: Resources) -> bool:
    """True when every requested resource is within capacity (a missing capacity is 0)."""
    return all(amount <= capacity.get(name, 0) for name, amount in request.items() if amount)


def cores(millicores: int) -> int | float:
    """Millicores to cores as a JSON number (whole cores stay ints)."""
    return millicores // 1000 if millicores % 1000 == 0 else millicores / 1000


def to_json_resources(values: Resources) -> dict[str, int | float]:
    """Canonical resources as JSON numbers: cpu in cores, memory in bytes, counts as ints."""
    return {k: (cores(v) if k == CPU else v) for k, v in sorted(values.items())}


def format_memory(value: int) -> str:
    """Bytes as a short human string (binary units): 721554505728 -> ``672Gi``."""
    for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                         ("Mi", 2**20), ("Ki", 2**10)):
        if value >= size and value % size == 0:
            return f"{value // size}{suffix}"
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if value >= size:
            return f"{value / size:.1f}{suffix}"
    return str(value)


def format_cpu(millicores: int) -> str:
    """Millicores as a short string: 168000 -> ``168``, 500 -> ``500m``."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def format_resources(values: Resources) -> str:
    """``168 vCPU · 672Gi`` plus accelerators, for tables and messages."""
    parts = []
    if values.get(CPU):
        parts.append(f"{format_cpu(values[CPU])} vCPU")
    if values.get(MEMORY):
        parts.append(format_memory(values[MEMORY]))
    for name in sorted(values):
        if name not in (CPU, MEMORY) and values[name]:
            parts.append(f"{values[name]} {name}")
    return " · ".join(parts) if parts else "nothing"
