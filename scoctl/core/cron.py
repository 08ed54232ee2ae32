"""Five-field cron schedules (design: Disruption's budget windows), pure: parse once, then ask for
the
next firing after an instant, in an IANA time zone.

Fields: minute (0-59), hour (0-23), day of month (1-31), month (1-12 or ``jan``-``dec``), day of
week (0-7, 0 and 7 both Sunday, or ``sun``-``sat``); each a ``*``, a value, a range ``a-b``, a
list ``a,b``, a step ``*/n`` or ``a-b/n`` (or ``a/n``: from a to the field's end), names
case-insensitive. Macros: ``@yearly`` (``@annually``), ``@monthly``, ``@weekly``, ``@daily``
(``@midnight``), ``@hourly``. Day of month and day of week follow Vixie cron (and robfig/cron's
`dayMatches`): when both are restricted (neither starts with ``*``), a day matches either;
otherwise both must.

Time zones, following robfig/cron v3 (`SpecSchedule.Next` in spec.go, the library Karpenter's
budgets use) rather than Vixie cron's DST adjustments: a firing is an instant whose wall-clock
reading in the zone matches the fields. So a reading that does not exist (a spring-forward gap:
02:30 in Europe/Berlin on 2026-03-29) does not fire that day, and a reading that happens twice
(fall-back: 02:30 on 2026-10-25 is both 00:30 and 01:30 UTC) fires at each of its instants
(robfig's spec_test.go: "2am nightly job (skipped)", "1am nightly job (runs twice)"). A budget
window is thus a span of real time, `duration` long from each firing: it never stretches or
shrinks with a clock change inside it.

No clock and no I/O: instants come in, aware, and go out in UTC.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the zone is the caller's: reading a config imports no tz database
    from zoneinfo import ZoneInfo

MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTHS = {name: n for n, name in enumerate(
    ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), 1)}
# the days of each month in a leap year (February's 29 can match)
_LONGEST = {1: 31, 2: 29, 3: 31, 4: 30, 5: 31, 6: 30, 7: 31, 8: 31, 9: 30, 10: 31, 11: 30, 12: 31}
WEEKDAYS = {"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
# (name, least, greatest, names) of the five fields, in order
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}), ("hour", 0, 23, {}), ("day of month", 1, 31, {}),
    ("month", 1, 12, MONTHS), ("day of week", 0, 7, WEEKDAYS))
SEARCH_YEARS = 5  # robfig/cron's limit: a schedule that fires in none of them never fires
_LONGEST_SHIFT = timedelta(hours=3)  # more than any UTC offset change in the tz database


class CronError(ValueError):
    """A schedule that is not five-field cron, or that never fires."""


@dataclass(frozen=True)
class Cron:
    """A parsed schedule: the values each field allows; `dom_any` / `dow_any`: that field
    was written starting with ``*`` (the Vixie OR rule applies only when neither was)."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    dom_any: bool
    dow_any: bool

    def matches_day(self, day: date) -> bool:
        """Whether the schedule fires on `day` (a calendar date in its zone)."""
        if day.month not in self.months:
            return False
        in_month = day.day in self.days
        in_week = (day.isoweekday() % 7) in self.weekdays
        if self.dom_any or self.dow_any:
            return in_month and in_week
        return in_month or in_week

    def next_after(self, after: datetime, zone: ZoneInfo) -> datetime | None:
        """The first firing strictly after the aware instant `after` (to the second: a firing
        is on a whole minute), in UTC; None when none comes within `SEARCH_YEARS`."""
        local = after.astimezone(zone).replace(tzinfo=None)
        day = local.date()
        limit = day.replace(year=day.year + SEARCH_YEARS, day=min(day.day, 28))
        while day <= limit:
            if not _folds(day, zone):
                found = self._first_on(day, after, zone, local if day == local.date() else None)
                if found is not None:
                    return found
            else:  # readings go back: every candidate counts, and the next day's too
                floor = local - _LONGEST_SHIFT if day == local.date() else None
                found = self._least_on(day, after, zone, floor)
                if found is not None:
                    later = self._least_on(day + timedelta(days=1), after, zone, None)
                    return found if later is None else min(found, later)
            day += timedelta(days=1)
        return None

    def _walls(self, day: date, floor: datetime | None) -> Iterator[datetime]:
        """The readings on `day` the schedule fires at, in order, after `floor` (if given)."""
        if not self.matches_day(day):
            return
        for hour in self.hours:
            if floor is not None and floor.date() == day and hour < floor.hour:
                continue
            for minute in self.minutes:
                wall = datetime.combine(day, time(hour, minute))
                if floor is None or wall > floor:
                    yield wall

    def _first_on(self, day: date, after: datetime, zone: ZoneInfo,
                  floor: datetime | None) -> datetime | None:
        """On a day whose readings only go forward, the first firing after `after`: the
        first reading past `floor` (`after`'s own) that exists (a gap's do not)."""
        for wall in self._walls(day, floor):
            for instant in instants(wall, zone):
                if instant > after:
                    return instant
        return None

    def _least_on(self, day: date, after: datetime, zone: ZoneInfo,
                  floor: datetime | None) -> datetime | None:
        """On a day whose readings go back (a fold), the earliest firing after `after`;
        readings in order, stopping once they are past the best instant found by more than
        any clock change."""
        best: datetime | None = None
        for wall in self._walls(day, floor):
            if best is not None and wall > best.astimezone(zone).replace(
                    tzinfo=None) + _LONGEST_SHIFT:
                break
            for instant in instants(wall, zone):
                if instant > after and (best is None or instant < best):
                    best = instant
        return best


def _folds(day: date, zone: ZoneInfo) -> bool:
    """Whether the zone's clock goes back during `day` (its offset at the next midnight is
    less than at this one's), so readings on it are not in the order of time."""
    start = datetime.combine(day, time()).replace(tzinfo=zone).utcoffset()
    end = datetime.combine(day + timedelta(days=1), time()).replace(tzinfo=zone).utcoffset()
    return start is not None and end is not None and end < start


def instants(wall: datetime, zone: ZoneInfo) -> tuple[datetime, ...]:
    """The UTC instants whose reading in `zone` is the naive `wall`: none in a gap, two in a
    fold, else one (PEP 495: `fold` picks the first or second occurrence)."""
    found: list[datetime] = []
    for fold in (0, 1):
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant not in found:
            found.append(instant)
    return tuple(sorted(found))


def parse_cron(text: str) -> Cron:
    """`text` as a `Cron`; CronError naming the field and what is wrong, or that the schedule
    never fires (``0 0 30 2 *``)."""
    spec = MACROS.get(text.strip().lower(), text) if text.strip().startswith("@") else text
    if spec.strip().startswith("@"):
        raise CronError(f"unknown macro {text.strip()!r} (use one of {', '.join(MACROS)})")
    parts = spec.split()
    if len(parts) != 5:
        raise CronError(f"{text!r} has {len(parts)} fields, not 5 "
                        "(minute hour day-of-month month day-of-week)")
    values = [_field(part, *meta) for part, meta in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(d % 7 for d in values[4])
    cron = Cron(text=text.strip(), minutes=tuple(sorted(values[0])),
                hours=tuple(sorted(values[1])), days=frozenset(values[2]),
                months=frozenset(values[3]), weekdays=weekdays,
                dom_any=parts[2].startswith("*"), dow_any=parts[4].startswith("*"))
    if not _ever(cron):
        raise CronError(f"{text!r} never fires (no month has that day)")
    return cron


def _ever(cron: Cron) -> bool:
    """Whether some day matches: with a weekday that can match, any month has every weekday;
    else some allowed month must have an allowed day (February: a leap year's 29)."""
    if not (cron.dom_any or cron.dow_any) or cron.dom_any:
        return True  # OR rule: the weekdays alone match; or every day of the month matches
    return any(day <= _LONGEST[month] for month in cron.months for day in cron.days)


def _field(part: str, name: str, least: int, greatest: int, names: dict[str, int]) -> set[int]:
    out: set[int] = set()
    for item in part.split(","):
        out |= _item(item, name, least, greatest, names)
    return out


def _item(item: str, name: str, least: int, greatest: int, names: dict[str, int]) -> set[int]:
    body, slash, step_text = item.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit() or int(step_text) < 1:
            raise CronError(f"{name}: step {step_text!r} must be a whole number of 1 or more")
        step = int(step_text)
    if body == "*":
        low, high = least, greatest
    elif "-" in body:
        first, _, last = body.partition("-")
        low, high = (_value(first, name, least, greatest, names),
                     _value(last, name, least, greatest, names))
        if low > high:
            raise CronError(f"{name}: range {body!r} runs backwards")
    else:
        low = _value(body, name, least, greatest, names)
        high = greatest if slash else low
    return set(range(low, high + 1, step))


def _value(text: str, name: str, least: int, greatest: int, names: dict[str, int]) -> int:
    word = text.lower()
    if word in names:
        return names[word]
    if not text.isdigit():
        known = f" or a name ({', '.join(names)})" if names else ""
        raise CronError(f"{name}: {text!r} is not a number from {least} to {greatest}{known}")
    value = int(text)
    if not least <= value <= greatest:
        raise CronError(f"{name}: {value} is outside {least}-{greatest}")
    return value
