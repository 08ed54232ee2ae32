"""The claim delta (design: Words): when an observed demand is a new claim version.

A claim gets a new version only when its normalised demand changed — requests, largest pod,
contract, whether it tolerates reclaimable capacity, the Slurm node names it asks for, the pools
its pods' placement rules out, the zone spread its pods ask for, the DaemonSet overhead of its
flavors, its parts (its pods' and its buffer's, design: Buffers, Constraints), the members per gang
(design: Gangs). That change wakes the planner. A pod count that
changed alone is saved in place (the same version). The state saves what this decides; it
never compares claims itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scoctl.core.model import ClaimPart, ClaimRecord
from scoctl.core.model.vocabulary import PartSource


@dataclass(frozen=True)
class ObservedClaim:
    """A workload's demand as a stage observed it, before it is stored."""

    workload: str
    contract: str
    requests: Mapping[str, int]
    largest_pod: Mapping[str, int]
    pods: int
    source: str
    tolerates_reclaimable: bool = True
    nodes: tuple[str, ...] = ()
    ineligible: Mapping[str, str] = field(default_factory=dict)  # pool -> the constraint
    zone_spread: int = 0  # maxSkew of the pods' DoNotSchedule zone spread (0: none)
    overhead: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # DaemonSets
    parts: tuple[ClaimPart, ...] = ()  # split by where its pods may run (Constraints)
    preferred: Mapping[str, int] = field(default_factory=dict)  # soft terms' weight per pool
    gang: int = 0  # members per gang (design: Gangs), 0: not a gang


@dataclass(frozen=True)
class ClaimWrite:
    """What to save: `claim` at `version` — a new version (`delta`), or the stored one whose
    pod count alone changed."""

    claim: ObservedClaim
    version: int
    delta: bool


def _demand(requests: Mapping[str, int], largest: Mapping[str, int], contract: str,
            tolerates: bool, nodes: tuple[str, ...] | list[str],
            ineligible: Mapping[str, str], zone_spread: int,
            overhead: Mapping[str, Mapping[str, int]],
            parts: tuple[ClaimPart, ...], preferred: Mapping[str, int],
            gang: int) -> tuple[object, ...]:
    return (dict(sorted(requests.items())), dict(sorted(largest.items())), contract, tolerates,
            sorted(nodes), dict(sorted(ineligible.items())), zone_spread,
            {f: dict(sorted(r.items())) for f, r in sorted(overhead.items())},
            [part_json(p) for p in parts], dict(sorted(preferred.items())), gang)


def part_json(part: ClaimPart) -> dict[str, object]:
    """A claim part as plain values (how the state stores it, and compares it)."""
    return {"requests": dict(sorted(part.requests.items())),
            "largest_pod": dict(sorted(part.largest_pod.items())), "pods": part.pods,
            "ineligible": dict(sorted(part.ineligible.items())),
            "zone_spread": part.zone_spread,
            "preferred": dict(sorted(part.preferred.items())), "source": str(part.source)}


def part_of(value: Mapping[str, object]) -> ClaimPart:
    """`part_json`'s value back as a `ClaimPart`."""
    def mapping(key: str) -> dict[str, object]:
        found = value.get(key)
        return dict(found) if isinstance(found, Mapping) else {}

    pods, spread = value.get("pods"), value.get("zone_spread")
    # a part stored before parts had sources is some of the pods
    source = PartSource(str(value.get("source") or PartSource.PODS))
    return ClaimPart(requests={k: int(str(v)) for k, v in mapping("requests").items()},
                     largest_pod={k: int(str(v)) for k, v in mapping("largest_pod").items()},
                     pods=int(str(pods)) if pods is not None else 0,
                     ineligible={k: str(v) for k, v in mapping("ineligible").items()},
                     zone_spread=int(str(spread)) if spread is not None else 0,
                     preferred={k: int(str(v)) for k, v in mapping("preferred").items()},
                     source=source)


def claim_write(stored: ClaimRecord | None, observed: ObservedClaim) -> ClaimWrite | None:
    """What `observed` changes against the `stored` claim: None when nothing (the same demand
    and pod count), a write at the stored version when only the pod count moved, else a new
    version (a claim delta)."""
    if stored is not None and _demand(
            stored.requests, stored.largest_pod, stored.contract, stored.tolerates_reclaimable,
            stored.nodes, stored.ineligible, stored.zone_spread, stored.overhead,
            stored.parts, stored.preferred, stored.gang) == _demand(
                observed.requests, observed.largest_pod, observed.contract,
                observed.tolerates_reclaimable, observed.nodes, observed.ineligible,
                observed.zone_spread, observed.overhead, observed.parts, observed.preferred,
                observed.gang):
        if stored.pods == observed.pods:
            return None
        return ClaimWrite(observed, stored.version, delta=False)
    return ClaimWrite(observed, (stored.version if stored else 0) + 1, delta=True)
