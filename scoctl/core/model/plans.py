"""Typed rows of the state file for the plan (generations, workload plans and their pool
units) and the ranking cache, as the stages see them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlanGeneration:
    generation: int
    created: str
    ranking: str | None
    changed: tuple[str, ...]
    full: bool


@dataclass(frozen=True)
class PlanUnitRecord:
    pool: str
    tier: str
    group: str
    units: int
    share: float
    score: float


@dataclass(frozen=True)
class PlanWorkloadRecord:
    workload: str
    generation: int
    claim_version: int
    contract: str
    ranking: str | None
    feasible: bool
    degraded: bool
    reasons: tuple[str, ...]
    pools: tuple[PlanUnitRecord, ...]
    exclusions: tuple[str, ...] = ()
    explain: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class RankingCache:
    """The last ranking read from a URL: a URL that is down falls back to it until max_age."""

    url: str
    id: str
    fetched: str  # RFC 3339
    scores: Mapping[str, float]
