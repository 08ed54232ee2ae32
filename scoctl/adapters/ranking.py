"""Reading the ranking from its source: inline scores, a JSON/YAML file, or a URL over httpx.

A URL that is down falls back to the last good ranking (kept in the state by the caller) with a
warning, until that copy is older than `max_age`; then it is an ApiError.
"""

from __future__ import annotations

import logging
from datetime import datetime

from scoctl.clock import parse_rfc3339, rfc3339
from scoctl.config.ranking import Ranking, parse_ranking
from scoctl.config.schema import RankingSource
from scoctl.core.model import RankingCache
from scoctl.errors import ApiError, ConfigError

LOG = logging.getLogger("scoctl.ranking")


def load_ranking(source: RankingSource, *, now: datetime, cache: RankingCache | None = None,
                 timeout: float = 5.0) -> tuple[Ranking, RankingCache | None]:
    """Read the ranking. Returns it and, for a URL, the new cache entry to store.

    `cache` is the last good URL ranking as stored by the caller, or None.
    """
    if source.scores is not None:
        return Ranking(id=source.id or "inline", scores=dict(source.scores), source="config"), None
    if source.file is not None:
        from scoctl.config.yamlsrc import load_data_file

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
        if cache is not None and cache.url == source.url:
            age = (now - parse_rfc3339(cache.fetched)).total_seconds()
            if age <= source.max_age:
                LOG.warning("ranking URL %s unreachable (%s); using the last good ranking %s "
                            "from %ds ago", source.url, reason, cache.id, int(age))
                return Ranking(id=cache.id, scores=dict(cache.scores), source=source.url,
                               fetched=cache.fetched, stale=True), None
            raise ApiError(f"ranking URL {source.url} unreachable ({reason}) and the last good "
                           f"ranking is {int(age)}s old (max_age {source.max_age:g}s)") from exc
        raise ApiError(f"ranking URL {source.url} unreachable ({reason}) and no last good "
                       "ranking is stored") from exc
    stamp = rfc3339(now)
    entry = RankingCache(url=source.url, id=ranking.id, scores=dict(ranking.scores),
                         fetched=stamp)
    return Ranking(id=ranking.id, scores=ranking.scores, source=source.url,
                   fetched=stamp), entry
