"""The state's own outage (its PostgreSQL restarting, its filesystem full) is the state's:
recorded as ``STATE_UNAVAILABLE`` / ``STATE_RECOVERED``, never as Nova's or Kubernetes'
(issue 49 item 14), even when it is met inside a step that called Nova."""

from __future__ import annotations

from scoctl.core import controller as decide
from scoctl.core.model.problems import Problem, first_of
from scoctl.errors import StateUnavailable, TemporaryError


def test_a_state_outage_has_the_state_tokens_and_an_api_outage_keeps_its_own():
    down, event = decide.api_result(decide.Outages(), "state", 10.0, error="disk is full")
    assert event is not None and (event.token, event.api, event.starts) == (
        "STATE_UNAVAILABLE", "state", True)
    _, back = decide.api_result(down, "state", 25.0, error=None)
    assert back is not None and (back.token, back.seconds, back.starts) == (
        "STATE_RECOVERED", 15.0, False)
    _, nova = decide.api_result(decide.Outages(), "nova", 10.0, error="stalled")
    assert nova is not None and (nova.token, nova.starts) == ("API_UNAVAILABLE", True)


def test_a_state_outage_met_in_a_nova_step_is_the_states_problem():
    lost = StateUnavailable("state postgresql://db/scoctl: terminating connection")
    problem = Problem.of(lost, api="nova", region="region-a", what="Nova")
    assert problem.api == "state" and first_of([problem], "nova") is None
    nova = Problem.of(TemporaryError("Nova answered 503"), api="nova", region="region-a")
    assert nova.api == "nova"
