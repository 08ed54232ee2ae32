"""Forward steps of the time of day never make a timeout fire early (issue 49 item 12): the
host notes each step (the time of day moved further than the monotonic clock), and an age is
reckoned without the steps seen after its stamp."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from scoctl.core.clockstep import TOLERANCE_S, AgesNow, ClockLog, Step, ages_now, observe

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC).timestamp()


def test_a_forward_step_is_noted_and_slewing_or_a_backward_step_is_not():
    log = observe(None, boot="b", wall=T0, mono=100.0)
    log = observe(log, boot="b", wall=T0 + 30 + TOLERANCE_S / 2, mono=130.0)  # slewing
    assert log.steps == ()
    log = observe(log, boot="b", wall=T0 + 3700, mono=160.0)  # an hour ahead
    [step] = log.steps
    assert step == Step(T0 + 3700, 3700 - (30 + TOLERANCE_S / 2) - 30)
    log = observe(log, boot="b", wall=T0 + 100, mono=170.0)  # back: every age shrinks
    assert log.steps == (step,)


def test_a_new_boot_starts_the_monotonic_reckoning_again_and_keeps_the_steps():
    log = ClockLog("b1", T0, 5000.0, (Step(T0, 600.0),))
    after = observe(log, boot="b2", wall=T0 + 900, mono=10.0)
    assert after == ClockLog("b2", T0 + 900, 10.0, (Step(T0, 600.0),))


def test_an_age_from_before_a_step_is_reckoned_without_it_and_a_later_one_as_is():
    now = datetime(2026, 1, 1, 13, 10, tzinfo=UTC)
    seen = now - timedelta(minutes=5)  # a step of one hour, seen five minutes ago
    aged = ages_now(now, [Step(seen.timestamp(), 3600.0)])
    booted = now - timedelta(hours=1, minutes=8)  # three minutes before the step, really
    assert (aged - booted).total_seconds() == 8 * 60
    assert (aged - (now - timedelta(minutes=2))).total_seconds() == 120  # after the step
    assert (aged - (now - timedelta(minutes=30))).total_seconds() == 0  # never below zero
    later = aged + timedelta(seconds=10)  # everything else is the time of day
    assert type(later) is datetime and later == now + timedelta(seconds=10)
    assert aged == now and aged.isoformat() == now.isoformat()
    assert isinstance(aged, AgesNow) and ages_now(now, []) is now


def test_a_forward_step_does_not_tear_a_booting_gang_down():
    """The gang's deadline (600 s after its launch) on an age without the step: launched
    100 s before a one-hour step, it is not late; the same gang without the step is."""
    from scoctl.core.gang import DEFAULT_GANG_POLICY as GANG
    from scoctl.core.model import GangRecord
    from scoctl.core.reconcile import decide
    from tests.core.test_reconcile import (
        NOW,
        POLICY,
        make_instance,
        make_node,
        make_server,
        snap,
    )

    t = NOW.timestamp()
    servers = tuple(make_server(f"s{i}") for i in range(3))
    insts = (make_instance("s0"), *(make_instance(f"s{i}", status="active") for i in (1, 2)))
    nodes = (make_node(insts[0].name, sid="s0"),)
    record = GangRecord("web", 3, launched_at=t - 3600 - 100)
    view = snap(servers=servers, instances=insts, k8s_nodes=nodes, gangs={"web": record},
                gang_policy=GANG, targets={"web": {"p-spot": 3}})
    stepped = ages_now(NOW, [Step(t - 10, 3600.0)])
    assert not decide(view, POLICY, stepped).deletions
    assert {d.server_id for d in decide(view, POLICY, NOW).deletions} == {"s0", "s1", "s2"}
