"""Notice times at the edges (issue 28, item 3): a time outside the horizon is no notice, and
no arithmetic on a notice time ever raises, whatever the reclaimer, the spool or an older
state holds."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.model import NoticedRecord, NoticeRecord
from scoctl.core.notice import (
    NoticeSnapshot,
    decide,
    held_ids,
    metadata_refusals,
    reclaim_figures,
)
from scoctl.core.timefmt import parse_rfc3339, rfc3339
from tests.core.test_notice import (
    NOW,
    POLICY,
    REGION,
    at,
    event,
    instance,
    server,
    snap,
    tokens,
)

FAR = "9999-12-31T23:59:59Z"


def test_a_far_future_metadata_time_is_no_notice_and_is_reported_once() -> None:
    world = snap(servers=(server("s1", raw=FAR),), instances=(instance("s1"),))
    d = decide(world, POLICY, NOW)
    assert not d.rows and not d.exclusions and not d.statuses and not d.dirty
    assert tokens(d) == ["NOTICE_IGNORED"]
    [ignored] = d.events
    assert ignored.detail["server"] == "s1" and ignored.detail["value"] == FAR
    assert "horizon" in d.warnings[0]
    assert metadata_refusals(world, NOW) == {"s1": FAR}
    # the next pass knows it was said (the stage reads it back from the event log): silence
    again = decide(snap(servers=world.servers, instances=world.instances,
                        warned=frozenset({("s1", FAR)})), POLICY, NOW)
    assert again.empty and not again.warnings


def test_a_far_past_metadata_time_is_a_reclaim_due_now() -> None:
    d = decide(snap(servers=(server("s1", raw="0001-01-01T00:00:00Z"),),
                    instances=(instance("s1"),)), POLICY, NOW)
    assert d.statuses == {"s1": "noticed"} and "NOTICE_IGNORED" not in tokens(d)
    assert event(d, "RECLAIM_NOTICED")["deadline"] == "0001-01-01T00:00:00.000000Z"
    # one with no UTC form at all does not parse: the warning every unreadable value gets
    d = decide(snap(servers=(server("s1", raw="0001-01-01T00:00:00+01:00"),),
                    instances=(instance("s1"),)), POLICY, NOW)
    assert d.empty and "is not an RFC 3339 time" in d.warnings[0]


def test_a_stored_time_keeps_four_year_digits_and_reads_back() -> None:
    early = datetime(1, 1, 1, tzinfo=UTC)
    assert rfc3339(early) == "0001-01-01T00:00:00.000000Z"
    assert parse_rfc3339(rfc3339(early)) == early
    assert rfc3339(NOW) == "2026-03-01T12:00:00.000000Z"


def test_a_time_within_the_horizon_is_still_a_notice() -> None:
    d = decide(snap(servers=(server("s1", deadline=300 * 86400),), instances=(instance("s1"),)),
               POLICY, NOW)
    assert d.statuses == {"s1": "noticed"}


def test_an_announced_far_future_notice_already_stored_is_dropped_with_a_warning() -> None:
    notice = NoticeRecord(kind="pool", target="p0", region=REGION,
                          deadline="9999-12-31T23:59:59.000000Z", received=at(-60))
    d = decide(snap(servers=(server("s1"),), instances=(instance("s1"),), announced=(notice,)),
               POLICY, NOW)
    assert not d.rows and not d.exclusions
    assert d.expired == (("pool", "p0"),)
    assert tokens(d) == ["NOTICE_IGNORED"]


# -- the property ---------------------------------------------------------------------------

EXTREME = st.one_of(
    st.sampled_from([datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC),
                     NOW, NOW + timedelta(days=366), NOW - timedelta(days=366)]),
    st.datetimes(timezones=st.just(UTC)))
OFFSETS = st.sampled_from(["Z", "+00:00", "+14:00", "-12:00", "+01:00"])


def stored(moment: datetime) -> str:
    """As the state stores a time (`rfc3339`), without strftime's unpadded years."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


@st.composite
def extreme_worlds(draw: st.DrawFn) -> tuple[NoticeSnapshot, datetime]:
    now = draw(EXTREME)
    raw = draw(EXTREME).replace(tzinfo=None).isoformat() + draw(OFFSETS)
    deadline, noticed = stored(draw(EXTREME)), stored(draw(EXTREME))
    row = NoticedRecord(server_id="s2", region=REGION, name="n-s2", workload="web", pool="p0",
                        deadline=deadline, noticed_at=noticed, source="metadata")
    notice = NoticeRecord(kind=draw(st.sampled_from(["pool", "server"])),
                          target=draw(st.sampled_from(["p0", "s1", "s3"])), region=REGION,
                          deadline=stored(draw(EXTREME)), received=noticed)
    world = snap(servers=(server("s1", raw=raw), server("s2", raw=raw)),
                 instances=(instance("s1"), instance("s2", status="noticed")),
                 noticed=(row,), announced=(notice,),
                 exclusions={"p0": stored(draw(EXTREME))})
    return world, now


@given(extreme_worlds())
def test_property_no_notice_time_ever_makes_the_decision_raise(
        drawn: tuple[NoticeSnapshot, datetime]) -> None:
    world, now = drawn
    d = decide(world, POLICY, now)
    held_ids(world, now)
    metadata_refusals(world, now)
    reclaim_figures((*world.noticed, *d.rows))
