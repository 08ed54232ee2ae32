"""`scoctl plan --claims FILE`: claims from a YAML or JSON file (what-if runs, CI dry-runs).

JSON when the name ends in ``.json`` (fast for tens of thousands of claims), else YAML through
PyYAML's C loader where present. Errors name the file and the claim's field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scoctl.config.yamlsrc import load_data_file
from scoctl.core.model import Claim, is_slug
from scoctl.core.quantity import QuantityError, parse_resources
from scoctl.errors import ConfigError


def load_claims(path: Path, contracts: Mapping[str, Any]) -> list[Claim]:
    """Parse and validate a claims file into Claim values (version 0)."""
    data = load_data_file(path, "claims")
    if not isinstance(data, Mapping) or not isinstance(data.get("claims"), list):
        raise ConfigError("expected a mapping with a `claims` list", file=str(path),
                          field="claims")
    out = []
    seen = set()
    for index, raw in enumerate(data["claims"]):
        where = f"claims[{index}]"
        if not isinstance(raw, Mapping):
            raise ConfigError("must be a mapping", file=str(path), field=where)
        workload = raw.get("workload")
        if not isinstance(workload, str) or not is_slug(workload):
            raise ConfigError(f"{workload!r} is not a workload slug", file=str(path),
                              field=f"{where}.workload")
        if workload in seen:
            raise ConfigError(f"workload {workload} appears twice", file=str(path),
                              field=f"{where}.workload")
        seen.add(workload)
        contract = str(raw.get("contract", "T1"))
        if contract not in contracts:
            raise ConfigError(f"unknown contract {contract!r}", file=str(path),
                              field=f"{where}.contract")
        resources = {}
        for key in ("requests", "largest_pod"):
            value = raw.get(key)
            if not isinstance(value, Mapping) or not value:
                raise ConfigError("is required (a mapping of resource quantities)",
                                  file=str(path), field=f"{where}.{key}")
            try:
                resources[key] = parse_resources(value)
            except QuantityError as exc:
                raise ConfigError(str(exc), file=str(path), field=f"{where}.{key}") from exc
        for name, amount in resources["largest_pod"].items():
            if amount > resources["requests"].get(name, 0):
                raise ConfigError(f"largest_pod.{name} exceeds the whole claim's requests",
                                  file=str(path), field=f"{where}.largest_pod.{name}")
        pods = raw.get("pods", 1)
        if isinstance(pods, bool) or not isinstance(pods, int) or pods < 1:
            raise ConfigError("must be a whole number ≥ 1", file=str(path), field=f"{where}.pods")
        tolerates = raw.get("tolerates_reclaimable", True)
        if not isinstance(tolerates, bool):
            raise ConfigError("must be true or false", file=str(path),
                              field=f"{where}.tolerates_reclaimable")
        out.append(Claim(workload=workload, contract=contract, requests=resources["requests"],
                         largest_pod=resources["largest_pod"], pods=pods,
                         tolerates_reclaimable=tolerates))
    return out
