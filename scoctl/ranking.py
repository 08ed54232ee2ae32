"""The ranking: pool scores from the pool-scoring pipeline, with an id (``r-8812``).

Sources (config `ranking`): inline scores, a JSON/YAML file, or a URL read with httpx. A URL
that is down falls back to the last good ranking (kept in the state) with a warning, until that
copy is older than `max_age`; then it is an error. A malformed ranking is a ConfigError naming
the source and field.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scoctl.clock import parse_rfc3339, rfc3339
from scoctl.config import RankingSource
from scoctl.errors import ApiError, ConfigError

LOG = logging.getLogger("scoctl.ranking")
CACHE_KEY = "ranking:last_good"


@dataclass(frozen=True)
class Ranking:
    id: str
    scores: Mapping[str, float]
    source: str
    fetched: str | None = None
    stale: bool = False


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
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ConfigError(f"score must be a number, not {score!r}", file=source,
                              field=f"scores.{pool}")
        out[str(pool)] = float(score)
    return Ranking(id=rid, scores=out, source=source)


def load_ranking(source: RankingSource, *, now: datetime, cache: Any = None,
                 timeout: float = 5.0) -> tuple[Ranking, dict[str, Any] | None]:
    """Read the ranking. Returns it and, for a URL, the new cache entry to store.

    `cache` is the last good URL ranking as stored by the caller (``{"fetched", "id",
    "scores", "url"}``) or None.
    """
    if source.scores is not None:
        return Ranking(id=source.id or "inline", scores=dict(source.scores), source="config"), None
    if source.file is not None:
        from scoctl.yamlsrc import load_data_file

        data = load_data_file(source.file, "ranking")
        return parse_ranking(data, str(source.file), default_id=source.id), None
    assert source.url is not None
    import httpx

    try:
        response = httpx.get(source.url, timeout=timeout, follow_redirects=True)
        response.raise_for_status()
        ranking = parse_ranking(response.json(), source.url, default_id=source.id)
    except (httpx.HTTPError, ValueError) as exc:
        if isinstance(exc, ConfigError):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        if cache and cache.get("url") == source.url:
            age = (now - parse_rfc3339(cache["fetched"])).total_seconds()
            if age <= source.max_age:
                LOG.warning("ranking URL %s unreachable (%s); using the last good ranking %s "
                            "from %ds ago", source.url, reason, cache["id"], int(age))
                return Ranking(id=cache["id"], scores=cache["scores"], source=source.url,
                               fetched=cache["fetched"], stale=True), None
            raise ApiError(f"ranking URL {source.url} unreachable ({reason}) and the last good "
                           f"ranking is {int(age)}s old (max_age {source.max_age:g}s)") from exc
        raise ApiError(f"ranking URL {source.url} unreachable ({reason}) and no last good "
                       "ranking is stored") from exc
    stamp = rfc3339(now)
    entry = {"url": source.url, "id": ranking.id, "scores": dict(ranking.scores),
             "fetched": stamp}
    return Ranking(id=ranking.id, scores=ranking.scores, source=source.url,
                   fetched=stamp), entry
