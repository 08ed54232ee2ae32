"""Disruption budgets (design: Disruption, scoctl.core.budgets): windows exact to the second in
their
zone across DST changes, the one `allowed` rule, and `select` never exceeding a budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.budgets import Allowance, active, allowed, next_window, select, window_end
from scoctl.core.cron import parse_cron
from scoctl.core.model.disruption import Budget, Rate, Units
from scoctl.core.model.vocabulary import BudgetLimit, DisruptionReason

EMPTY, DRIFTED, EXPIRED = DisruptionReason.EMPTY, DisruptionReason.DRIFTED, DisruptionReason.EXPIRED
NOTICED = DisruptionReason.NOTICED
SECOND = timedelta(seconds=1)
NOW = datetime(2026, 6, 1, 12, tzinfo=UTC)


def window(spec: str, duration: float, zone: str, units: int = 0,
           reasons: frozenset[DisruptionReason] = frozenset()) -> Budget:
    return Budget(Units.count(units), reasons, schedule=parse_cron(spec), duration=duration,
                  time_zone=zone)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def edges(budget: Budget, start: datetime, end: datetime) -> None:
    """Inactive the second before `start`, active at it and the second before `end`, inactive
    at `end`; the next change is `start` before it and `end` within it."""
    assert not active(budget, start - SECOND)
    assert next_window(budget, start - SECOND) == start
    assert active(budget, start) and active(budget, end - SECOND)
    assert next_window(budget, start) == end == window_end(budget, start)
    assert next_window(budget, end - SECOND) == end
    assert not active(budget, end)


# -- windows, to the second, in their zone ----------------------------------------------------

def test_a_berlin_business_day_window_before_and_after_spring_forward() -> None:
    # Europe/Berlin: 2026-03-29 02:00 CET -> 03:00 CEST; 09:00 is 08:00 UTC before, 07:00 after
    business = window("0 9 * * 1-5", 9 * 3600, "Europe/Berlin")
    edges(business, utc(2026, 3, 27, 8), utc(2026, 3, 27, 17))  # Friday, CET
    assert next_window(business, utc(2026, 3, 27, 17)) == utc(2026, 3, 30, 7)  # Monday, CEST
    edges(business, utc(2026, 3, 30, 7), utc(2026, 3, 30, 16))


def test_a_window_across_the_spring_forward_gap_is_its_duration_of_real_time() -> None:
    # 01:30 CET (00:30 UTC) for 2h: ends 02:30 UTC, which reads 04:30 CEST
    night = window("30 1 * * *", 2 * 3600, "Europe/Berlin")
    edges(night, utc(2026, 3, 29, 0, 30), utc(2026, 3, 29, 2, 30))


def test_a_window_whose_start_is_in_the_gap_does_not_open_that_day() -> None:
    gap = window("30 2 * * *", 3600, "Europe/Berlin")
    assert not any(active(gap, utc(2026, 3, 29, 0) + timedelta(minutes=m)) for m in range(240))
    assert next_window(gap, utc(2026, 3, 28, 23)) == utc(2026, 3, 30, 0, 30)
    edges(gap, utc(2026, 3, 28, 1, 30), utc(2026, 3, 28, 2, 30))  # the day before: CET


def test_a_window_whose_start_happens_twice_at_fall_back_opens_twice() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST -> 02:00 CET; 02:30 is 00:30 and 01:30 UTC
    twice = window("30 2 * * *", 1800, "Europe/Berlin")
    edges(twice, utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1))
    edges(twice, utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 2))
    assert next_window(twice, utc(2026, 10, 25, 2)) == utc(2026, 10, 26, 1, 30)


def test_windows_that_touch_across_fall_back_are_one_span() -> None:
    # 02:30 for 1h: [00:30, 01:30) and [01:30, 02:30) UTC chain into one span
    chained = window("30 2 * * *", 3600, "Europe/Berlin")
    edges(chained, utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 2, 30))


def test_a_new_york_night_window_across_both_changes() -> None:
    # America/New_York 2026: 03-08 02:00 EST -> 03:00 EDT; 11-01 02:00 EDT -> 01:00 EST
    night = window("0 22 * * *", 8 * 3600, "America/New_York")
    edges(night, utc(2026, 3, 8, 3), utc(2026, 3, 8, 11))  # 22:00 EST on 03-07
    edges(night, utc(2026, 3, 9, 2), utc(2026, 3, 9, 10))  # 22:00 EDT on 03-08
    edges(night, utc(2026, 11, 1, 2), utc(2026, 11, 1, 10))  # 22:00 EDT on 10-31: 06:00 EST
    edges(night, utc(2026, 11, 2, 3), utc(2026, 11, 2, 11))  # 22:00 EST on 11-01


def test_a_window_from_a_firing_exactly_duration_ago_is_over() -> None:
    # Karpenter's Budget.IsActive: the next firing after now - duration must not be after now
    hourly = window("0 * * * *", 600, "UTC")
    assert active(hourly, utc(2026, 6, 1, 12, 9, 59))
    assert not active(hourly, utc(2026, 6, 1, 12, 10))


def test_a_budget_without_a_schedule_is_always_active_and_has_no_next_window() -> None:
    always = Budget(Units.count(1))
    assert active(always, NOW) and next_window(always, NOW) is None
    assert window_end(always, NOW) is None


def test_windows_that_never_close_have_no_end_within_the_horizon() -> None:
    overlapping = window("0 */2 * * *", 3 * 3600, "UTC")
    assert active(overlapping, NOW) and window_end(overlapping, NOW) is None


# -- allowed ----------------------------------------------------------------------------------

def test_percentages_round_up_and_counts_are_counts() -> None:
    tenth = Budget(Units.share(10))
    assert [tenth.limit(n) for n in (0, 1, 10, 11, 30)] == [0, 1, 1, 2, 3]
    assert Budget(Units.share("12.5")).limit(8) == 1 and Budget(Units.share("12.5")).limit(9) == 2
    assert Budget(Units.count(3)).limit(0) == 3
    assert allowed((Budget(Units.share(25)),), EMPTY, registered=9, now=NOW,
                   in_flight=[EMPTY]) == Allowance(2, Budget(Units.share(25)), 0)


def test_the_least_room_over_the_active_budgets_counting_the_reason() -> None:
    budgets = (Budget(Units.count(5)), Budget(Units.count(2), frozenset({EMPTY})),
               Budget(Units.count(0), frozenset({DRIFTED})))
    assert allowed(budgets, EMPTY, registered=10, now=NOW, in_flight=[EMPTY]).units == 1
    assert allowed(budgets, EMPTY, registered=10, now=NOW, in_flight=[EMPTY]).index == 1
    # in flight for a reason a budget does not name does not count against it
    assert allowed(budgets, EMPTY, registered=10, now=NOW,
                   in_flight=[DRIFTED] * 4).units == 1
    assert allowed(budgets, EXPIRED, registered=10, now=NOW, in_flight=[DRIFTED] * 4) == (
        Allowance(1, budgets[0], 0))
    assert allowed(budgets, DRIFTED, registered=10, now=NOW, in_flight=[]) == Allowance(
        0, budgets[2], 2, by=BudgetLimit.UNITS)
    assert allowed((), EMPTY, registered=10, now=NOW, in_flight=[]) == Allowance(None)


def test_noticed_is_never_held_back_but_counts_against_budgets_naming_no_reason() -> None:
    everything, empty_only = Budget(Units.count(2)), Budget(Units.count(2), frozenset({EMPTY}))
    assert allowed((Budget(Units.count(0)),), NOTICED, registered=5, now=NOW,
                   in_flight=[]) == Allowance(None)
    assert allowed((everything, empty_only), EMPTY, registered=5, now=NOW,
                   in_flight=[NOTICED, NOTICED]) == Allowance(0, everything, 0,
                                                               by=BudgetLimit.UNITS)
    assert allowed((empty_only,), EMPTY, registered=5, now=NOW,
                   in_flight=[NOTICED, NOTICED]).units == 2


def test_a_budget_outside_its_window_does_not_limit() -> None:
    freeze = window("0 9 * * *", 3600, "UTC", units=0, reasons=frozenset({DRIFTED}))
    assert allowed((freeze,), DRIFTED, registered=10, now=utc(2026, 6, 1, 8, 59, 59),
                   in_flight=[]) == Allowance(None)
    assert allowed((freeze,), DRIFTED, registered=10, now=utc(2026, 6, 1, 9),
                   in_flight=[]) == Allowance(0, freeze, 0, until=utc(2026, 6, 1, 10),
                                              by=BudgetLimit.UNITS)


def test_a_rate_caps_starts_within_the_sliding_window() -> None:
    rated = Budget(Units.count(10), frozenset({DRIFTED}), rate=Rate(Units.count(2), 600))
    starts = [(NOW - timedelta(seconds=600), DRIFTED), (NOW - timedelta(seconds=599), DRIFTED),
              (NOW - timedelta(seconds=10), DRIFTED), (NOW - timedelta(seconds=5), EMPTY)]
    # 600 s ago is out of the window (now - per, now]; 599 s and 10 s ago are in it
    assert allowed((rated,), DRIFTED, registered=5, now=NOW, in_flight=[],
                   starts=starts) == Allowance(0, rated, 0, until=NOW + timedelta(seconds=1),
                                               by=BudgetLimit.RATE)
    assert allowed((rated,), DRIFTED, registered=5, now=NOW + SECOND, in_flight=[],
                   starts=starts).units == 1
    # a block by units in flight is lifted by a disruption ending, not by time
    assert allowed((rated,), DRIFTED, registered=5, now=NOW, in_flight=[DRIFTED] * 10,
                   starts=starts) == Allowance(0, rated, 0, until=None,
                                               by=BudgetLimit.UNITS)


def test_select_shares_a_budget_naming_no_reason_across_reasons() -> None:
    shared = (Budget(Units.count(3)), Budget(Units.count(5), frozenset({EMPTY})))
    chosen = select([("a", EMPTY), ("b", DRIFTED), ("c", EMPTY), ("d", DRIFTED),
                     ("e", NOTICED)], shared, registered=10, now=NOW, in_flight={"z": EXPIRED})
    assert chosen.start == (("a", EMPTY), ("b", DRIFTED), ("e", NOTICED))
    assert [(u, r, a.index) for u, r, a in chosen.blocked] == [("c", EMPTY, 0), ("d", DRIFTED, 0)]
    # a unit already in flight is not started again
    assert select([("z", EMPTY)], shared, registered=10, now=NOW,
                  in_flight={"z": EMPTY}).start == ()


# -- properties ---------------------------------------------------------------------------------

REASONS = st.sampled_from(list(DisruptionReason))
ZONES = ["UTC", "Europe/Berlin", "America/New_York"]
SCHEDULES = ["0 9 * * 1-5", "30 2 * * *", "*/20 * * * *", "0 */3 * * *", "0 0 * * sun"]
UNITS = st.one_of(st.integers(0, 4).map(Units.count),
                  st.sampled_from(["0", "10", "25", "33.3", "50", "100"]).map(Units.share))


@st.composite
def budgets(draw: st.DrawFn) -> Budget:
    scheduled = draw(st.booleans())
    rate = draw(st.none() | st.builds(Rate, UNITS, st.sampled_from([60.0, 600.0, 3600.0])))
    return Budget(draw(UNITS), draw(st.frozensets(REASONS.filter(lambda r: r is not NOTICED),
                                                  max_size=2)),
                  schedule=parse_cron(draw(st.sampled_from(SCHEDULES))) if scheduled else None,
                  duration=draw(st.sampled_from([60.0, 1800.0, 5400.0])) if scheduled else None,
                  time_zone=draw(st.sampled_from(ZONES)) if scheduled else "UTC", rate=rate)


# around both 2026 changes in Berlin and New York, to the second
CLOCKS = st.sampled_from([utc(2026, 3, 8, 5), utc(2026, 3, 28, 23), utc(2026, 10, 24, 23),
                          utc(2026, 10, 31, 5), utc(2026, 6, 1)]).flatmap(
    lambda base: st.integers(0, 6 * 3600).map(lambda s: base + timedelta(seconds=s)))


def counted(budget: Budget, reasons: list[DisruptionReason]) -> int:
    return sum(1 for r in reasons if budget.counts(r))


def in_window(budget: Budget, starts: list[tuple[datetime, DisruptionReason]],
              now: datetime) -> int:
    assert budget.rate is not None
    return sum(1 for t, r in starts if budget.counts(r)
               and now - timedelta(seconds=budget.rate.per) < t <= now)


def brute_active(budget: Budget, now: datetime) -> bool:
    """A firing (a whole minute whose reading in the zone matches) in (now - duration, now]."""
    assert budget.schedule is not None and budget.duration is not None
    zone, cron = ZoneInfo(budget.time_zone), budget.schedule
    minute = now.replace(second=0, microsecond=0)
    while minute > now - timedelta(seconds=budget.duration):
        local = minute.astimezone(zone)
        if (local.minute in cron.minutes and local.hour in cron.hours
                and cron.matches_day(local.date())):
            return True
        minute -= timedelta(minutes=1)
    return False


@settings(max_examples=200, deadline=None)
@given(budgets(), CLOCKS)
def test_active_is_a_firing_within_duration_before_now(budget: Budget, now: datetime) -> None:
    if budget.schedule is None:
        assert active(budget, now)
        return
    assert active(budget, now) is brute_active(budget, now)
    change = next_window(budget, now)
    if change is not None:  # nothing changes before the next change, and it changes then
        assert active(budget, change - SECOND) is active(budget, now)
        assert active(budget, change) is not active(budget, now)


@settings(max_examples=300, deadline=None)
@given(st.lists(budgets(), max_size=4), st.integers(0, 30), CLOCKS,
       st.lists(REASONS, max_size=8), st.lists(REASONS, max_size=15),
       st.lists(st.tuples(st.integers(1, 4000), REASONS), max_size=8))
def test_selected_starts_never_exceed_an_active_budget(
        given_budgets: list[Budget], registered: int, now: datetime,
        flying: list[DisruptionReason], wanted: list[DisruptionReason],
        history: list[tuple[int, DisruptionReason]]) -> None:
    in_flight = {f"f{i}": r for i, r in enumerate(flying)}
    starts = [(now - timedelta(seconds=ago), r) for ago, r in history]
    candidates = [(f"c{i}", r) for i, r in enumerate(wanted)]
    chosen = select(candidates, given_budgets, registered=registered, now=now,
                    in_flight=in_flight, starts=starts)
    assert sorted(chosen.start + tuple((u, r) for u, r, _ in chosen.blocked)) == sorted(candidates)
    assert all(r is not NOTICED for _, r, _ in chosen.blocked)
    held = [r for _, r in chosen.start if r is not NOTICED]
    for budget in given_budgets:
        if not active(budget, now) or not counted(budget, held):
            continue
        # every start this budget counts (noticed aside) found room in it
        assert counted(budget, list(in_flight.values())) + counted(budget, held) <= budget.limit(
            registered)
        if budget.rate is not None:
            assert in_window(budget, starts, now) + counted(budget, held) <= (
                budget.rate.units.of(registered))
    for _, reason, room in chosen.blocked:  # held back by an active budget counting it
        assert room.units == 0 and room.budget is not None and room.budget.counts(reason)
        assert active(room.budget, now) and room.budget is given_budgets[room.index or 0]


@settings(max_examples=60, deadline=None)
@given(st.lists(budgets(), min_size=1, max_size=3), st.integers(1, 20), CLOCKS,
       st.lists(st.tuples(st.integers(1, 900), st.lists(REASONS, max_size=4),
                          st.integers(0, 3)), min_size=1, max_size=40))
def test_over_a_timeline_no_budget_is_ever_exceeded_in_flight_or_by_rate(
        given_budgets: list[Budget], registered: int, start: datetime,
        ticks: list[tuple[int, list[DisruptionReason], int]]) -> None:
    """Passes at random intervals: candidates arrive, some disruptions in flight end. At
    each pass, the starts an active budget counts (noticed aside: never held back) fit in
    what it had left, in flight and in its rate window; over the whole timeline, an
    always-active budget never sees more held-back starts within one `rate.per` than its
    rate allows."""
    now = start
    flying: dict[str, DisruptionReason] = {}
    starts: list[tuple[datetime, DisruptionReason]] = []
    serial = 0
    for step, reasons, ending in ticks:
        now += timedelta(seconds=step)
        for unit in sorted(flying)[:ending]:
            del flying[unit]
        candidates = []
        for reason in reasons:
            serial += 1
            candidates.append((f"u{serial}", reason))
        chosen = select(candidates, given_budgets, registered=registered, now=now,
                        in_flight=flying, starts=starts)
        held = [r for _, r in chosen.start if r is not NOTICED]
        for budget in given_budgets:
            if active(budget, now) and counted(budget, held):
                assert counted(budget, list(flying.values())) + counted(budget, held) <= (
                    budget.limit(registered))
                if budget.rate is not None:
                    assert in_window(budget, starts, now) + counted(budget, held) <= (
                        budget.rate.units.of(registered))
        for unit, reason in chosen.start:
            flying[unit] = reason
            starts.append((now, reason))
    for budget in given_budgets:
        if budget.schedule is not None or budget.rate is None:
            continue
        mine = [(t, r) for t, r in starts if r is not NOTICED]
        for t, r in mine:
            if budget.counts(r):
                assert in_window(budget, mine, t) <= budget.rate.units.of(registered)


@pytest.mark.parametrize("zone", ZONES)
def test_every_second_across_a_change_agrees_with_the_firings(zone: str) -> None:
    budget = window("59 1 * * *", 3600 + 1, zone)
    base = {"UTC": utc(2026, 3, 29, 1), "Europe/Berlin": utc(2026, 3, 28, 23),
            "America/New_York": utc(2026, 11, 1, 4)}[zone]
    firings = []
    firing = budget.schedule.next_after(base - timedelta(days=1), ZoneInfo(zone)) if (
        budget.schedule) else None
    while firing is not None and firing < base + timedelta(hours=6):
        firings.append(firing)
        firing = budget.schedule.next_after(firing, ZoneInfo(zone)) if budget.schedule else None
    for second in range(0, 6 * 3600, 7):
        now = base + timedelta(seconds=second)
        want = any(f <= now < f + timedelta(seconds=3601) for f in firings)
        assert active(budget, now) is want, now
