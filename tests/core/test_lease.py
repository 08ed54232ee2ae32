"""The pure lease decision: take, renew, held, lost, release, and the fence check."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.lease import decide, fenced, release
from scoctl.core.model import LeaseRecord

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TTL = 15.0


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def row(holder: str, generation: int, expires: float) -> LeaseRecord:
    return LeaseRecord("region-a", holder, generation, at(expires))


def test_a_region_never_leased_is_taken_for_the_first_term() -> None:
    d = decide(None, region="region-a", holder="a:1", mine=None, now=T0, ttl=TTL)
    assert (d.outcome, d.leads, d.write, d.elected) == ("taken", True, True, True)
    assert d.lease == row("a:1", 1, TTL)


def test_the_holder_renews_its_own_term_ttl_from_now() -> None:
    d = decide(row("a:1", 4, 10), region="region-a", holder="a:1", mine=4, now=at(5), ttl=TTL)
    assert (d.outcome, d.elected) == ("renewed", False)
    assert d.lease == row("a:1", 4, 5 + TTL)


def test_a_late_renewal_keeps_the_term_when_nobody_took_it() -> None:
    d = decide(row("a:1", 4, 10), region="region-a", holder="a:1", mine=4, now=at(12), ttl=TTL)
    assert d.outcome == "renewed" and d.lease.generation == 4


def test_another_runners_live_lease_is_followed() -> None:
    d = decide(row("a:1", 4, 10), region="region-a", holder="b:2", mine=None, now=at(9.9),
               ttl=TTL)
    assert (d.outcome, d.leads, d.write) == ("held", False, False)
    assert d.lease == row("a:1", 4, 10)


def test_an_expired_lease_is_taken_as_a_new_term() -> None:
    d = decide(row("a:1", 4, 10), region="region-a", holder="b:2", mine=None, now=at(10),
               ttl=TTL)
    assert (d.outcome, d.elected) == ("taken", True)
    assert d.lease == row("b:2", 5, 10 + TTL)
    assert d.previous == row("a:1", 4, 10)


def test_a_deposed_leader_learns_it_lost_the_region() -> None:
    d = decide(row("b:2", 5, 25), region="region-a", holder="a:1", mine=4, now=at(12), ttl=TTL)
    assert (d.outcome, d.leads, d.write) == ("lost", False, False)


def test_a_deposed_leader_may_take_a_later_expired_term_anew() -> None:
    d = decide(row("b:2", 5, 25), region="region-a", holder="a:1", mine=4, now=at(30), ttl=TTL)
    assert d.outcome == "taken" and d.lease.generation == 6


def test_release_ends_only_the_holders_own_live_term() -> None:
    assert release(row("a:1", 4, 10), holder="a:1", mine=4, now=at(3)) == row("a:1", 4, 3)
    assert release(row("a:1", 4, 10), holder="a:1", mine=3, now=at(3)) is None
    assert release(row("b:2", 4, 10), holder="a:1", mine=4, now=at(3)) is None
    assert release(row("a:1", 4, 10), holder="a:1", mine=4, now=at(11)) is None
    assert release(None, holder="a:1", mine=4, now=at(3)) is None


def test_the_fence_passes_only_the_live_term_of_its_holder() -> None:
    lease = row("a:1", 4, 10)
    assert fenced(lease, holder="a:1", mine=4, now=at(9))
    assert not fenced(lease, holder="a:1", mine=4, now=at(10))  # expired
    assert not fenced(lease, holder="a:1", mine=3, now=at(9))  # an older term
    assert not fenced(lease, holder="b:2", mine=4, now=at(9))
    assert not fenced(None, holder="a:1", mine=4, now=at(9))


@given(st.lists(st.tuples(st.integers(0, 2), st.floats(0, 20)), max_size=60))
def test_a_live_lease_is_never_taken_and_terms_only_grow(steps: list[tuple[int, float]]) -> None:
    """Runners decide in any order at non-decreasing times, each against the row the last
    write left: a live lease keeps its holder and term, terms only grow, and the one runner
    that passes the fence is the one that believes it leads."""
    holders = ["a:1", "b:2", "c:3"]
    mine: dict[str, int | None] = dict.fromkeys(holders)
    current: LeaseRecord | None = None
    now = T0
    last_generation = 0
    for who, gap in steps:
        now += timedelta(seconds=gap)
        holder = holders[who]
        d = decide(current, region="region-a", holder=holder, mine=mine[holder], now=now,
                   ttl=TTL)
        before = current if current is not None and current.live(now) else None
        if d.write:
            current = d.lease
        if before is not None:
            assert current is not None
            assert (current.holder, current.generation) == (before.holder, before.generation)
        mine[holder] = d.lease.generation if d.leads else None
        assert current is not None and current.generation >= last_generation
        last_generation = current.generation
        passing = [h for h in holders
                   if mine[h] is not None
                   and fenced(current, holder=h, mine=mine[h] or 0, now=now)]
        assert len(passing) <= 1
        assert passing == ([holder] if d.leads else passing)
