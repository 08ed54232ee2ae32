"""`scoctl plan --claims FILE`: claims from a YAML or JSON file (what-if runs, CI dry-runs).

JSON when the name ends in ``.json`` (fast for tens of thousands of claims), else YAML through
PyYAML's C loader where present. Errors name the file and the claim's field; a field the format
does not know is refused (a typo such as ``larget_pod`` must not silently fall back to a
default).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scoctl.config.yamlsrc import load_data_file
from scoctl.core.model import Claim, is_slug
from scoctl.core.quantity import QuantityError, parse_quantity
from scoctl.errors import ConfigError

CLAIM_FIELDS = frozenset({"workload", "contract", "requests", "largest_pod", "pods",
                          "tolerates_reclaimable", "gang"})
MAX_PODS = 10**9


def load_claims(path: Path, contracts: Mapping[str, Any]) -> list[Claim]:
    """Parse and validate a claims file into Claim values (version 0)."""
    data = load_data_file(path, "claims")
    if not isinstance(data, Mapping) or not isinstance(data.get("claims"), list):
        raise ConfigError("expected a mapping with a `claims` list", file=str(path),
                          field="claims")
    unknown = sorted(str(k) for k in data if k != "claims")
    if unknown:
        raise ConfigError("unknown field (expected only `claims`)", file=str(path),
                          field=unknown[0])
    out = []
    seen: set[str] = set()
    for index, raw in enumerate(data["claims"]):
        claim = _claim(raw, f"claims[{index}]", str(path), contracts)
        if claim.workload in seen:
            raise ConfigError(f"workload {claim.workload} appears twice", file=str(path),
                              field=f"claims[{index}].workload")
        seen.add(claim.workload)
        out.append(claim)
    return out


def _claim(raw: Any, where: str, file: str, contracts: Mapping[str, Any]) -> Claim:
    """One claim of the file; `where` is its field path (``claims[3]``)."""
    if not isinstance(raw, Mapping):
        raise ConfigError("must be a mapping", file=file, field=where)
    for key in raw:
        if key not in CLAIM_FIELDS:
            raise ConfigError(f"unknown field (expected one of: {', '.join(sorted(CLAIM_FIELDS))})",
                              file=file, field=f"{where}.{key}")
    workload = raw.get("workload")
    if not isinstance(workload, str) or not is_slug(workload):
        raise ConfigError(f"{workload!r} is not a workload slug", file=file,
                          field=f"{where}.workload")
    contract = raw.get("contract", "T1")
    if not isinstance(contract, str) or contract not in contracts:
        raise ConfigError(f"unknown contract {contract!r}", file=file, field=f"{where}.contract")
    requests = _resources(raw, "requests", where, file)
    largest = _resources(raw, "largest_pod", where, file)
    for name, amount in largest.items():
        if amount > requests.get(name, 0):
            raise ConfigError(f"largest_pod.{name} exceeds the whole claim's requests",
                              file=file, field=f"{where}.largest_pod.{name}")
    pods = raw.get("pods", 1)
    if isinstance(pods, bool) or not isinstance(pods, int) or not 1 <= pods <= MAX_PODS:
        raise ConfigError(f"must be a whole number from 1 to {MAX_PODS}", file=file,
                          field=f"{where}.pods")
    tolerates = raw.get("tolerates_reclaimable", True)
    if not isinstance(tolerates, bool):
        raise ConfigError("must be true or false", file=file,
                          field=f"{where}.tolerates_reclaimable")
    return Claim(workload=workload, contract=contract, requests=requests, largest_pod=largest,
                 pods=pods, tolerates_reclaimable=tolerates,
                 gang=_gang(raw.get("gang"), pods, where, file))


def _gang(raw: Any, pods: int, where: str, file: str) -> int:
    """``gang: {size: N}`` (design: Gangs): N members per gang, `largest_pod` one member."""
    if raw is None:
        return 0
    if not isinstance(raw, Mapping) or set(raw) != {"size"}:
        raise ConfigError("must be a mapping with only `size`", file=file, field=f"{where}.gang")
    size = raw["size"]
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= pods:
        raise ConfigError(f"must be a whole number from 1 to the claim's pods ({pods})",
                          file=file, field=f"{where}.gang.size")
    return size


def _resources(raw: Mapping[str, Any], key: str, where: str, file: str) -> dict[str, int]:
    value = raw.get(key)
    if not isinstance(value, Mapping) or not value:
        raise ConfigError("is required (a mapping of resource quantities)", file=file,
                          field=f"{where}.{key}")
    out: dict[str, int] = {}
    for name, amount in value.items():
        if not isinstance(name, str):
            raise ConfigError(f"resource name {name!r} is not a string", file=file,
                              field=f"{where}.{key}")
        try:
            canonical = parse_quantity(name, amount)
        except QuantityError as exc:
            raise ConfigError(str(exc), file=file, field=f"{where}.{key}.{name}") from exc
        if canonical:
            out[name] = canonical
    return out
