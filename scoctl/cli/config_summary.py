"""A config summary for `config check`, plus warnings about likely mistakes."""

from __future__ import annotations

from typing import Any

from scoctl.config.schema import Config
from scoctl.core.quantity import to_json_resources


def summarise(config: Config) -> dict[str, Any]:
    """What the config holds, and warnings that are not errors."""
    committed = [p for p in config.pools if p.tier == "committed"]
    groups = sorted({p.group for p in config.pools})
    warnings = []
    ranking = config.ranking
    if ranking.scores is not None:
        unranked = [p.name for p in config.pools if p.name not in ranking.scores]
        if unranked:
            warnings.append(f"{len(unranked)} pools have no ranking score and are not used: "
                            + ", ".join(unranked[:5]) + ("…" if len(unranked) > 5 else ""))
        unknown = sorted(set(ranking.scores) - {p.name for p in config.pools})
        if unknown:
            warnings.append("ranking scores name unknown pools: " + ", ".join(unknown[:5]))
    for name, contract in sorted(config.contracts.items()):
        groups_needed = int(1 / contract.group_cap) if contract.group_cap else 0
        if len(groups) < min(groups_needed, contract.min_pools):
            warnings.append(f"contract {name}: {len(groups)} groups cannot keep the group cap "
                            f"{contract.group_cap:.0%}; plans will be degraded")
    if ranking.scores is not None:
        source = f"{ranking.id} (inline, {len(ranking.scores)} scores)"
    elif ranking.file is not None:
        source = f"file {ranking.file}"
    else:
        source = f"url {ranking.url} (max age {ranking.max_age:g}s)"
    return {
        "config": config.source_name,
        "state": str(config.state),
        "regions": [{"name": r.name, "cloud": r.cloud,
                     "calls_per_second": r.mutating_calls_per_second,
                     "image": config.launch_settings(r).image,
                     "networks": list(config.launch_settings(r).networks)}
                    for r in config.regions],
        "flavors": [{"name": f.name, "capacity": to_json_resources(f.capacity),
                     "allocatable": to_json_resources(f.allocatable)}
                    for f in config.flavors.values()],
        "pools": {"total": len(config.pools), "committed": len(committed),
                  "reclaimable": len(config.pools) - len(committed), "groups": len(groups),
                  "depth": sum(p.depth for p in config.pools)},
        "contracts": sorted(config.contracts),
        "ranking": source,
        "workloads": [{"name": w.name, "contract": w.contract, "source": w.source,
                       "kind": w.kind} for w in config.workloads],
        "spool": str(config.spool),
        "warnings": warnings,
    }
