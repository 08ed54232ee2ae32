"""The controller's pure scheduling: what runs now, given the timers, the deltas and the clock
(an injected number, never a sleep)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core import controller as c

T = c.Timers(batch_idle=1.0, batch_max=5.0, poll=5.0, spool=1.0, reconcile=15.0,
             follow_up=2.0, gap=1.0, slurm=True)


def settled(now: float = 0.0) -> c.Schedule:
    """A controller past its first passes: nothing due until the timers say so."""
    s = c.start(now)
    s = c.after_intake(s, T, now, c.Due("intake", kubernetes=True, slurm=True), failed=False,
                       changed=False, replan=False)
    s = c.after_reconcile(s, T, now, failed=False, booting=False, replan=False)
    return c.spool_looked(s, T, now, waiting=False)


def test_a_fresh_controller_reads_everything_at_once() -> None:
    due = c.next_step(c.start(100.0), T, 100.0)
    assert (due.step, due.kubernetes, due.slurm) == ("intake", True, True)


def test_a_delta_waits_for_the_idle_window_then_the_intake_reads_kubernetes_only() -> None:
    s = c.spool_looked(c.demand_changed(settled(), 0.5), T, 1.4, waiting=False)
    assert c.next_step(s, T, 1.4).step is None
    assert abs(c.next_step(s, T, 1.4).wait - 0.1) < 1e-9  # the window closes at 1.5
    due = c.next_step(s, T, 1.5)
    assert (due.step, due.kubernetes, due.slurm) == ("intake", True, False)


def test_steady_deltas_close_the_window_at_batch_max() -> None:
    s = settled()
    for tick in range(1, 10):  # a new pod every 0.5 s: the idle timer never runs out
        now = 0.5 * tick
        s = c.demand_changed(s, now)
        if now >= 5.0:
            break
        assert c.next_step(s, T, now).step is None
    assert c.next_step(s, T, 0.5 + 5.0).step == "intake"


def test_a_changed_claim_is_planned_and_acquired_in_the_same_pass() -> None:
    s = c.demand_changed(settled(), 0.0)
    due = c.next_step(s, T, 1.0)
    s = c.after_intake(s, T, 1.0, due, failed=False, changed=True, replan=False)
    assert s.window is None
    assert c.next_step(s, T, 1.0).step == "act"
    s = c.after_act(s, T, 1.0, failed=False, launched=True, replan=False)
    assert c.next_step(s, T, 1.0).step == "reconcile"  # right after launches
    s = c.after_reconcile(s, T, 1.0, failed=False, booting=True, replan=False)
    assert c.next_step(s, T, 2.9).step is None
    assert c.next_step(s, T, 3.0).step == "reconcile"  # follow-up while servers boot


def test_reclaimable_capacity_is_reconciled_every_notice_poll_and_committed_every_interval(
) -> None:
    """A `sco:reclaim-at` notice shows in reconcile's server listing: while the fleet holds
    reclaimable capacity the listing runs every `notice` seconds, not every `reconcile`."""
    timers = c.Timers(poll=60.0, spool=60.0, reconcile=15.0, notice=5.0, follow_up=2.0)
    for reclaimable, due_at in ((True, 5.0), (False, 15.0)):
        s = c.after_intake(c.start(0.0), timers, 0.0, c.Due("intake", kubernetes=True),
                           failed=False, changed=False, replan=False)
        s = c.after_reconcile(s, timers, 0.0, failed=False, booting=False, replan=False,
                              reclaimable=reclaimable)
        assert c.next_step(s, timers, due_at - 0.01).step is None
        assert c.next_step(s, timers, due_at).step == "reconcile"
    assert c.reconcile_period(timers, booting=True, reclaimable=True) == 2.0
    off = c.Timers(reconcile=15.0, notice=0.0)  # notice_poll: 0 turns it off
    assert c.reconcile_period(off, booting=False, reclaimable=True) == 15.0
    fast = c.Timers(reconcile=3.0, notice=5.0)  # never slower than reconcile_interval
    assert c.reconcile_period(fast, booting=False, reclaimable=True) == 3.0


def test_only_a_live_instance_in_a_reclaimable_pool_counts_as_reclaimable_capacity() -> None:
    tiers = {"a": "committed", "b": "reclaimable"}
    assert c.holds_reclaimable(["a", "b"], tiers)
    assert not c.holds_reclaimable(["a", None], tiers)
    assert not c.holds_reclaimable(["gone-from-config"], tiers)
    assert not c.holds_reclaimable([], tiers)


def test_an_unchanged_claim_plans_nothing() -> None:
    s = c.demand_changed(settled(), 0.0)
    s = c.after_intake(s, T, 1.0, c.next_step(s, T, 1.0), failed=False, changed=False,
                       replan=False)
    assert c.next_step(s, T, 1.0).step is None


def test_reconcile_runs_every_interval_and_slurm_every_poll() -> None:
    s = settled()
    for poll in (5.0, 10.0):
        assert c.next_step(s, T, poll - 0.1).step is None
        due = c.next_step(s, T, poll)
        assert (due.step, due.kubernetes, due.slurm) == ("intake", True, True)
        s = c.after_intake(s, T, poll, due, failed=False, changed=False, replan=False)
    s = c.spool_looked(s, T, 14.0, waiting=False)
    assert c.next_step(s, T, 14.9).step is None
    due = c.next_step(s, T, 15.0)
    assert due.step == "intake"  # the third poll first, then the reconcile of 15 s
    s = c.after_intake(s, T, 15.0, due, failed=False, changed=False, replan=False)
    assert c.next_step(s, T, 15.0).step == "reconcile"


def test_spool_events_start_an_intake_of_the_spool_alone() -> None:
    s = c.spool_looked(settled(), T, 0.5, waiting=True)
    due = c.next_step(s, T, 0.5)
    assert (due.step, due.kubernetes, due.slurm) == ("intake", False, False)
    assert not c.spool_due(s, 1.4) and c.spool_due(s, 1.5)


def test_a_reconcile_asked_for_runs_at_once_but_at_most_once_per_gap() -> None:
    s = c.reconcile_wanted(settled())
    assert c.next_step(s, T, 0.5).step is None  # the last reconcile ran at 0
    assert c.next_step(s, T, 1.0).step == "reconcile"
    s = c.after_reconcile(s, T, 1.0, failed=False, booting=False, replan=True)
    assert c.next_step(s, T, 1.0).step == "act"  # a stage left workloads to re-plan


def test_a_failing_step_backs_off_instead_of_spinning() -> None:
    s = settled()
    now = 5.0
    waits = []
    for _ in range(8):
        s = c.spool_looked(s, T, now, waiting=True)  # something keeps asking for an intake
        due = c.next_step(s, T, now)
        assert due.step == "intake"
        s = c.after_intake(s, T, now, due, failed=True, changed=False, replan=False)
        s = c.spool_looked(s, T, now, waiting=True)
        assert c.next_step(s, T, now).step != "intake"
        retry = s.retry_at["intake"]
        waits.append(retry - now)
        now = retry
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0]
    assert c.recovered(s, "intake").retry_at == {}


def test_a_failed_acquire_is_tried_again_after_its_back_off() -> None:
    s = c.after_act(settled(), T, 1.0, failed=True, launched=False, replan=False)
    assert s.act and c.next_step(s, T, 1.5).step is None
    assert c.next_step(s, T, 2.0).step == "act"


@given(st.lists(st.tuples(st.sampled_from(["delta", "spool", "ask", "step"]),
                          st.floats(min_value=0.0, max_value=3.0)), max_size=40))
def test_the_wait_never_passes_a_due_step_and_nothing_runs_early(events) -> None:
    s, now = settled(), 0.0
    for kind, dt in events:
        due = c.next_step(s, T, now)
        if due.step is None:
            # nothing is due before the wait runs out
            assert c.next_step(s, T, now + due.wait * 0.999).step is None or due.wait == 0
        now += dt
        if kind == "delta":
            s = c.demand_changed(s, now)
        elif kind == "spool":
            s = c.spool_looked(s, T, now, waiting=True)
        elif kind == "ask":
            s = c.reconcile_wanted(s)
        else:
            due = c.next_step(s, T, now)
            if due.step == "intake":
                s = c.after_intake(s, T, now, due, failed=False, changed=False, replan=False)
                assert s.window is None or not due.kubernetes
            elif due.step == "act":
                s = c.after_act(s, T, now, failed=False, launched=False, replan=False)
            elif due.step == "reconcile":
                s = c.after_reconcile(s, T, now, failed=False, booting=False, replan=False)
        if s.window is not None:  # a window never outlives batch_max unnoticed
            assert c.next_step(s, T, s.window.opened + T.batch_max).step is not None


def test_one_warning_per_outage_and_one_notice_when_it_ends() -> None:
    o = c.Outages()
    events = []
    for second in range(60):  # the Kubernetes API is down for a minute, failing every second
        o, event = c.api_result(o, "kubernetes", float(second), error="connection refused")
        events.append(event)
    o, back = c.api_result(o, "kubernetes", 60.0, error=None)
    o, again = c.api_result(o, "kubernetes", 61.0, error=None)
    raised = [e for e in events if e is not None]
    assert [(e.token, e.api) for e in raised] == [("API_UNAVAILABLE", "kubernetes")]
    assert back is not None and back.token == "API_RECOVERED" and back.seconds == 60.0
    assert again is None and o.down == {}


def test_a_stage_problem_is_attributed_to_the_api_that_failed_not_to_the_words_in_it() -> None:
    """A Kubernetes failure while deleting a Node is a Kubernetes outage, though its text names
    neither Kubernetes nor Nova; a Nova failure whose message mentions Kubernetes is Nova's."""
    from scoctl.core.model.problems import Problem, first_of

    node = Problem("kubernetes", "sim-region", "delete node web-1", "connection refused")
    nova = Problem("nova", "sim-region", "Nova", "503 (the kubernetes bootstrap waits)")
    assert first_of([nova, node], "kubernetes") == node
    assert first_of([nova, node], "nova") == nova
    assert first_of([nova, node], "slurm") is None
    assert str(node) == "sim-region: delete node web-1: connection refused"


def test_demand_that_leaves_opens_a_window_but_never_holds_an_open_one_back() -> None:
    s = c.demand_changed(settled(), 0.0)
    s = c.demand_left(s, 0.9)  # a pod of the batch got bound meanwhile
    assert c.next_step(c.spool_looked(s, T, 1.0, waiting=False), T, 1.0).step == "intake"
    alone = c.demand_left(settled(), 2.0)  # a shrink alone still gets its re-plan
    assert alone.window is not None and c.next_step(alone, T, 3.0).step == "intake"


def test_claims_written_by_another_process_are_behind_their_plans() -> None:
    assert not c.plans_behind([("a", 2, True), ("b", 1, True)], {"a": 2, "b": 1})
    assert c.plans_behind([("a", 3, True)], {"a": 2})  # slurm resume grew the claim
    assert c.plans_behind([("a", 1, True)], {})  # plan --claims wrote a new one
    assert c.plans_behind([("a", 4, False)], {"a": 3})  # its demand ended: the plan must go
    assert not c.plans_behind([("a", 4, False)], {})


def test_a_region_taken_over_is_acquired_then_reconciled_at_once() -> None:
    s = c.leader_gained(settled())
    assert c.next_step(s, T, 0.5).step == "act"  # nothing else due: the take-over alone
    s = c.after_act(s, T, 0.5, failed=False, launched=False, replan=False)
    assert c.next_step(s, T, 1.0).step == "reconcile"  # the old leader's launches adopted
    s = c.after_reconcile(s, T, 1.0, failed=False, booting=False, replan=False)
    assert c.next_step(s, T, 1.5).step is None


def test_a_spooled_notice_asks_for_a_reconcile_and_a_token_for_an_intake() -> None:
    s = settled(0.0)
    notice = c.spool_looked(s, T, 1.0, waiting=False, notices=True)
    assert c.next_step(notice, T, 1.0).step == "reconcile"  # the notice stage runs there
    token = c.spool_looked(s, T, 1.0, waiting=True)
    assert c.next_step(token, T, 1.0).step == "intake"
    assert c.next_step(c.spool_looked(s, T, 1.0, waiting=False), T, 1.0).step is None


def test_a_plan_generation_newer_than_the_last_acquire_is_owed_an_acquire() -> None:
    assert c.plan_unacquired(3, 2)  # another runner planned since
    assert not c.plan_unacquired(3, 3) and not c.plan_unacquired(2, 3)
    assert c.plan_unacquired(1, None)  # a plan, and no acquire here yet
    assert not c.plan_unacquired(None, None)  # no plan at all


def test_a_lapsed_exclusion_or_a_rebalance_out_of_its_window_runs_the_plan_step() -> None:
    # design: Rebalance: nothing else changes when an exclusion lapses or a trigger has held long
    assert c.plans_stale({"p0", "p1"}, {"p1"}, [], now=100.0)  # p0 lapsed since the plan
    assert not c.plans_stale({"p1"}, {"p1", "p2"}, [], now=100.0)  # only a new exclusion
    assert not c.plans_stale(None, set(), [], now=100.0)  # no plan step yet: nothing to redo
    assert c.plans_stale(set(), set(), [90.0, 200.0], now=100.0)  # one window ran out
    assert not c.plans_stale(set(), set(), [100.5], now=100.0)  # still waiting it out


def quiet(t: c.Timers) -> c.Schedule:
    """`settled` under `t`: the first passes done at 0."""
    s = c.start(0.0)
    s = c.after_intake(s, t, 0.0, c.Due("intake", kubernetes=True), failed=False,
                       changed=False, replan=False)
    return c.after_reconcile(s, t, 0.0, failed=False, booting=False, replan=False)


def test_a_region_answering_again_ends_the_act_and_reconcile_back_off_at_once() -> None:
    # issue 49 item 13: launches waited on the back-off their failed acquires earned while
    # Nova stalled (+1, +3, +7, +15, +31 s) though Nova answered again
    t = c.Timers(poll=1e6, spool=1e6, reconcile=1e6)  # nothing else comes due
    s = quiet(t)
    for now in (1.0, 2.0, 4.0, 8.0):
        s = c.after_act(s, t, now, failed=True, launched=False, replan=False)
        s = c.after_reconcile(s, t, now, failed=True, booting=False, replan=False)
    assert s.retry_at["act"] == 16.0 and c.next_step(s, t, 9.0).step is None
    s = c.answered_again(s)
    assert c.next_step(s, t, 9.0).step == "act"
    s = c.after_act(s, t, 9.0, failed=False, launched=True, replan=False)
    assert c.next_step(s, t, 9.0).step == "reconcile"


def test_launches_held_for_a_name_their_region_lacks_are_tried_again_without_back_off() -> None:
    # issue 49 item 1: not a failure (nothing else waits), tried again every `held` seconds,
    # and at once after a reload
    t = c.Timers(poll=1e6, spool=1e6, reconcile=1e6, held=180.0)
    s = c.after_act(quiet(t), t, 1.0, failed=False, launched=False, replan=False, held=True)
    assert "act" not in s.retry_at and not s.act
    assert c.next_step(s, t, 100.0).step != "act"
    assert c.next_step(s, t, 181.0).step == "act"
    assert c.next_step(c.reloaded(s), t, 2.0).step == "act"
    done = c.after_act(s, t, 181.0, failed=False, launched=True, replan=False)
    assert done.recheck_at == float("inf")
