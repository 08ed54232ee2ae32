"""The ranking: pool scores from the pool-scoring pipeline, with an id (``r-8812``).

This module validates ranking documents (pure); `scoctl.adapters.ranking` reads them from the
config, a file or a URL. A malformed ranking is a ConfigError naming the source and field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scoctl.errors import ConfigError


@dataclass(frozen=True)
class Ranking:
    """Pool scores (`id`, `scores`), where they came from, when fetched, and whether they are
    older than allowed."""

    id: str
    scores: Mapping[str, float]
    source: str
    fetched: str | None = None
    stale: bool = False


MAX_SCORE = 1e9  # scores are compared with each other and with a small depth premium


def score_problem(score: object) -> str | None:
    """What is wrong with a pool score, or None: a score is a finite number within
    ±`MAX_SCORE` (beyond it the planner's depth premium, 0.05, is lost to rounding). The one
    rule for a ranking file, a ranking URL's answer and a config's own scores."""
    if (isinstance(score, bool) or not isinstance(score, int | float)
            or not math.isfinite(score)):
        return f"must be a finite number, not {score!r}"
    if abs(score) > MAX_SCORE:
        return f"must be between -{MAX_SCORE:g} and {MAX_SCORE:g}, not {score!r}"
    return None


def parse_ranking(data: Any, source: str, *, default_id: str | None = None) -> Ranking:
    """Validate a ranking document ``{"id": ..., "scores": {pool: number}}`` (pure)."""
    if not isinstance(data, Mapping):
        raise ConfigError("a ranking must be a mapping with id and scores", file=source)
    rid = data.get("id", default_id)
    if not isinstance(rid, str) or not rid:
        raise ConfigError("missing or empty ranking id", file=source, field="id")
    scores = data.get("scores")
    if not isinstance(scores, Mapping) or not scores:
        raise ConfigError("missing or empty scores", file=source, field="scores")
    out: dict[str, float] = {}
    for pool, score in scores.items():
        wrong = score_problem(score)
        if wrong is not None:
            raise ConfigError(f"score {wrong}", file=source, field=f"scores.{pool}")
        out[str(pool)] = float(score)
    return Ranking(id=rid, scores=out, source=source)
