"""Five-field cron (scoctl.core.cron): Vixie cron's syntax and day rule, robfig/cron v3's
firings in a time zone (the library Karpenter's disruption budgets use)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.cron import CronError, instants, parse_cron

NEW_YORK, BERLIN = ZoneInfo("America/New_York"), ZoneInfo("Europe/Berlin")


# robfig/cron v3, spec_test.go `TestNext` (the six-field specs there without their seconds
# field): the cases in America/New_York across the 2012 DST changes, and America/Sao_Paulo,
# whose midnight did not exist on its spring-forward day (robfig/cron issue 157).
ROBFIG = [
    ("2012-03-11T00:00:00-05:00", "30 2 11 Mar *", "2013-03-11T02:30:00-04:00", NEW_YORK),
    ("2012-03-11T00:00:00-05:00", "0 * * * *", "2012-03-11T01:00:00-05:00", NEW_YORK),
    ("2012-03-11T01:00:00-05:00", "0 * * * *", "2012-03-11T03:00:00-04:00", NEW_YORK),
    ("2012-03-11T03:00:00-04:00", "0 * * * *", "2012-03-11T04:00:00-04:00", NEW_YORK),
    ("2012-03-11T00:00:00-05:00", "0 1 * * *", "2012-03-11T01:00:00-05:00", NEW_YORK),
    ("2012-03-11T01:00:00-05:00", "0 1 * * *", "2012-03-12T01:00:00-04:00", NEW_YORK),
    ("2012-03-11T00:00:00-05:00", "0 2 * * *", "2012-03-12T02:00:00-04:00", NEW_YORK),  # skipped
    ("2012-11-04T00:00:00-04:00", "30 2 04 Nov *", "2012-11-04T02:30:00-05:00", NEW_YORK),
    ("2012-11-04T01:45:00-04:00", "30 1 04 Nov *", "2012-11-04T01:30:00-05:00", NEW_YORK),
    ("2012-11-04T00:00:00-04:00", "0 * * * *", "2012-11-04T01:00:00-04:00", NEW_YORK),
    ("2012-11-04T01:00:00-04:00", "0 * * * *", "2012-11-04T01:00:00-05:00", NEW_YORK),
    ("2012-11-04T01:00:00-05:00", "0 * * * *", "2012-11-04T02:00:00-05:00", NEW_YORK),
    ("2012-11-04T00:00:00-04:00", "0 1 * * *", "2012-11-04T01:00:00-04:00", NEW_YORK),  # twice
    ("2012-11-04T01:00:00-04:00", "0 1 * * *", "2012-11-04T01:00:00-05:00", NEW_YORK),
    ("2012-11-04T01:00:00-05:00", "0 1 * * *", "2012-11-05T01:00:00-05:00", NEW_YORK),
    ("2012-11-04T00:00:00-04:00", "0 2 * * *", "2012-11-04T02:00:00-05:00", NEW_YORK),
    ("2012-11-04T02:00:00-05:00", "0 2 * * *", "2012-11-05T02:00:00-05:00", NEW_YORK),
    ("2012-11-04T00:00:00-04:00", "0 3 * * *", "2012-11-04T03:00:00-05:00", NEW_YORK),
    ("2012-11-04T00:00:00-04:00", "0 3 3 * *", "2012-12-03T03:00:00-05:00", NEW_YORK),
    ("2018-10-17T05:00:00-04:00", "0 9 10 * *", "2018-11-10T06:00:00-05:00",
     ZoneInfo("America/Sao_Paulo")),
    ("2018-02-14T05:00:00-05:00", "0 9 22 * *", "2018-02-22T07:00:00-05:00",
     ZoneInfo("America/Sao_Paulo")),
    ("2012-07-09T23:35:00+00:00", "0 0 29 Feb *", "2016-02-29T00:00:00+00:00", ZoneInfo("UTC")),
    ("2012-07-09T23:35:00+00:00", "0 0 * Feb mon", "2013-02-04T00:00:00+00:00", ZoneInfo("UTC")),
]


@pytest.mark.parametrize(("after", "spec", "want", "zone"), ROBFIG)
def test_next_firing_matches_robfig_cron(after: str, spec: str, want: str,
                                         zone: ZoneInfo) -> None:
    got = parse_cron(spec).next_after(datetime.fromisoformat(after), zone)
    assert got == datetime.fromisoformat(want)
    assert got is not None and got.tzinfo is UTC


def test_a_reading_in_a_spring_forward_gap_does_not_fire_that_day() -> None:
    # Europe/Berlin 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC)
    daily = parse_cron("30 2 * * *")
    assert daily.next_after(datetime(2026, 3, 28, 12, tzinfo=UTC), BERLIN) == datetime(
        2026, 3, 30, 0, 30, tzinfo=UTC)
    assert instants(datetime(2026, 3, 29, 2, 30), BERLIN) == ()


def test_a_reading_that_happens_twice_fires_twice() -> None:
    # Europe/Berlin 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC)
    daily = parse_cron("30 2 * * *")
    first = daily.next_after(datetime(2026, 10, 24, 12, tzinfo=UTC), BERLIN)
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert daily.next_after(first, BERLIN) == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)
    assert daily.next_after(datetime(2026, 10, 25, 1, 30, tzinfo=UTC), BERLIN) == datetime(
        2026, 10, 26, 1, 30, tzinfo=UTC)


def test_the_next_firing_is_strictly_after_to_the_second() -> None:
    hourly = parse_cron("0 * * * *")
    at = datetime(2026, 5, 1, 10, tzinfo=UTC)
    assert hourly.next_after(at - timedelta(seconds=1), ZoneInfo("UTC")) == at
    assert hourly.next_after(at, ZoneInfo("UTC")) == at + timedelta(hours=1)


@pytest.mark.parametrize(("spec", "day", "fires"), [
    ("0 0 13 * fri", datetime(2026, 3, 13), True),  # both restricted: a 13th ...
    ("0 0 13 * fri", datetime(2026, 3, 20), True),  # ... or a Friday (Vixie's OR rule)
    ("0 0 13 * fri", datetime(2026, 3, 14), False),
    ("0 0 * * fri", datetime(2026, 3, 13), True),  # day of month *: the weekday alone
    ("0 0 * * fri", datetime(2026, 3, 14), False),
    ("0 0 */2 * fri", datetime(2026, 3, 13), True),  # a field starting with *: AND
    ("0 0 */2 * fri", datetime(2026, 3, 20), False),
    ("0 0 1-7 * 0", datetime(2026, 3, 8), True),  # Sunday as 0 ...
    ("0 0 * * 7", datetime(2026, 3, 8), True),  # ... and as 7
    ("0 0 * * sun", datetime(2026, 3, 9), False),
    ("0 0 1 jan,JUL *", datetime(2026, 7, 1), True),  # names, in any case
    ("0 0 1 jan,JUL *", datetime(2026, 6, 1), False),
    ("0 9 * * mon-fri", datetime(2026, 3, 9), True),
    ("0 9 * * mon-fri", datetime(2026, 3, 7), False),
])
def test_days_follow_vixie_cron(spec: str, day: datetime, fires: bool) -> None:
    assert parse_cron(spec).matches_day(day.date()) is fires


@pytest.mark.parametrize(("spec", "minutes", "hours"), [
    ("*/15 * * * *", (0, 15, 30, 45), tuple(range(24))),
    ("5-20/5 1,3 * * *", (5, 10, 15, 20), (1, 3)),
    ("50/5 22/1 * * *", (50, 55), (22, 23)),  # a/n: from a to the field's end
    ("@hourly", (0,), tuple(range(24))),
    ("@daily", (0,), (0,)),
    ("@midnight", (0,), (0,)),
])
def test_lists_ranges_steps_and_macros(spec: str, minutes: tuple[int, ...],
                                       hours: tuple[int, ...]) -> None:
    cron = parse_cron(spec)
    assert (cron.minutes, cron.hours) == (minutes, hours)


def test_the_weekly_monthly_and_yearly_macros() -> None:
    utc = ZoneInfo("UTC")
    at = datetime(2026, 3, 4, 12, tzinfo=UTC)  # a Wednesday
    assert parse_cron("@weekly").next_after(at, utc) == datetime(2026, 3, 8, tzinfo=UTC)
    assert parse_cron("@monthly").next_after(at, utc) == datetime(2026, 4, 1, tzinfo=UTC)
    assert parse_cron("@yearly").next_after(at, utc) == datetime(2027, 1, 1, tzinfo=UTC)
    assert parse_cron("@annually").next_after(at, utc) == datetime(2027, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(("spec", "says"), [
    ("0 9 * *", "4 fields"), ("0 9 * * * *", "6 fields"), ("", "0 fields"),
    ("60 * * * *", "minute: 60 is outside 0-59"), ("* 24 * * *", "hour: 24"),
    ("* * 0 * *", "day of month: 0"), ("* * * 13 *", "month: 13"), ("* * * * 8", "week: 8"),
    ("* * * * fri-mon", "backwards"), ("*/0 * * * *", "step"), ("*/x * * * *", "step"),
    ("* * * foo *", "month: 'foo'"), ("* * * * funday", "day of week: 'funday'"),
    ("mon * * * *", "minute: 'mon'"), ("1-x * * * *", "minute"), ("-1 * * * *", "minute"),
    ("0 0 30 2 *", "never fires"), ("0 0 31 4,6,9,11 *", "never fires"),
    ("@fortnightly", "unknown macro"), ("0 0 * * *,", "day of week: ''"),
])
def test_a_bad_schedule_names_what_is_wrong(spec: str, says: str) -> None:
    with pytest.raises(CronError) as caught:
        parse_cron(spec)
    assert says in str(caught.value)


def test_a_day_that_only_leap_years_have_fires_and_a_weekday_rescues_a_missing_day() -> None:
    utc = ZoneInfo("UTC")
    assert parse_cron("0 0 29 2 *").next_after(datetime(2026, 3, 1, tzinfo=UTC), utc) == (
        datetime(2028, 2, 29, tzinfo=UTC))
    # both restricted: February 30 never comes, but its Mondays do (OR rule)
    assert parse_cron("0 0 30 2 mon").next_after(datetime(2026, 1, 1, tzinfo=UTC), utc) == (
        datetime(2026, 2, 2, tzinfo=UTC))


# -- properties: a firing is an instant whose reading in the zone matches -----------------------

ZONES = st.sampled_from([ZoneInfo(z) for z in (
    "UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "America/Santiago",
    "Asia/Kolkata")])
SPECS = st.sampled_from([
    "* * * * *", "*/7 * * * *", "30 * * * *", "0,30 1-3 * * *", "30 2 * * *", "0 0 * * *",
    "15 */2 * * *", "45 23 * * *", "0 9 * * 1-5", "*/20 0-4 * * sun", "59 1 * * *",
    "0 0 1 * *"])
# around the 2026 changes in these zones, and ordinary days
INSTANTS = st.sampled_from([
    datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 10, 24, 22, tzinfo=UTC),
    datetime(2026, 3, 7, 23, tzinfo=UTC), datetime(2026, 10, 31, 23, tzinfo=UTC),
    datetime(2026, 4, 4, 12, tzinfo=UTC), datetime(2026, 9, 5, 23, tzinfo=UTC),
    datetime(2026, 6, 15, tzinfo=UTC)]).flatmap(
        lambda base: st.integers(0, 3 * 86400).map(lambda s: base + timedelta(seconds=s)))


def brute_next(spec: str, after: datetime, zone: ZoneInfo, days: int = 35) -> datetime | None:
    """The first whole UTC minute after `after` whose reading in `zone` matches, by scanning
    minute by minute (every zone offset is a whole number of minutes)."""
    cron = parse_cron(spec)
    minute = after.replace(second=0, microsecond=0) + timedelta(minutes=1)
    for _ in range(days * 1440):
        local = minute.astimezone(zone)
        if (local.minute in cron.minutes and local.hour in cron.hours
                and cron.matches_day(local.date())):
            return minute
        minute += timedelta(minutes=1)
    return None


@settings(max_examples=150, deadline=None)
@given(SPECS, INSTANTS, ZONES)
def test_next_after_is_the_first_matching_minute(spec: str, after: datetime,
                                                 zone: ZoneInfo) -> None:
    want = brute_next(spec, after, zone)
    got = parse_cron(spec).next_after(after, zone)
    assert got == want
