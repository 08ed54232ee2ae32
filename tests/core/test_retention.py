"""The retention decision: cutoffs from the config's `retention` and `now`, pure."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.retention import EVENTS_FLOOR, PRUNE_BATCH, pruning

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
DAY = 86400.0


def test_the_cutoffs_are_now_minus_each_retention_in_state_timestamps() -> None:
    p = pruning(events=30 * DAY, instances=7 * DAY, launches=2 * DAY, now=NOW)
    assert p.events_before == "2026-01-30T12:00:00.000000Z"
    assert p.instances_before == "2026-02-22T12:00:00.000000Z"
    assert p.launches_before == "2026-02-27T12:00:00.000000Z"
    assert (p.instance_statuses, p.launch_statuses) == (("deleted",), ("recorded", "failed"))
    assert p.batch == PRUNE_BATCH == 1000


def test_events_are_never_cut_closer_than_the_schemas_floor_of_a_day() -> None:
    assert pruning(events=60, instances=0, launches=0, now=NOW).events_before == \
        "2026-02-28T12:00:00.000000Z"


def test_a_retention_reaching_before_year_one_prunes_nothing() -> None:
    p = pruning(events=1e15, instances=1e15, launches=1e15, now=NOW)
    assert (p.events_before, p.instances_before, p.launches_before) == ("", "", "")


@given(st.floats(min_value=0, max_value=1e13), st.floats(min_value=0, max_value=1e13))
def test_a_longer_retention_never_prunes_more(shorter: float, extra: float) -> None:
    short = pruning(events=shorter, instances=shorter, launches=shorter, now=NOW)
    long = pruning(events=shorter + extra, instances=shorter + extra,
                   launches=shorter + extra, now=NOW)
    assert long.events_before <= short.events_before
    assert long.instances_before <= short.instances_before
    assert short.events_before <= pruning(events=EVENTS_FLOOR, instances=0, launches=0,
                                          now=NOW).events_before
