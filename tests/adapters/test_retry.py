"""The retry policy's total budget and deadline (issue 17 item 1), with injected sleep and clock:
exact, and nothing sleeps."""

from __future__ import annotations

import random

import pytest

from scoctl.adapters.retry import RetryBudget, RetryPolicy
from scoctl.errors import DeadlineExceeded, TemporaryError


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def rate_limited() -> None:
    raise TemporaryError("Nova answered 429", delay=5.0)


def test_a_persistent_retry_after_draws_one_shared_budget_across_calls():
    clock = Clock()
    policy = RetryPolicy(sleep=clock.sleep, rng=random.Random(1),
                         budget=RetryBudget(12.0, clock=clock))
    attempts = []
    for _ in range(11):  # the 11 launches of the 174 s acquire
        with pytest.raises(TemporaryError):
            policy.call(rate_limited, before_attempt=lambda: attempts.append(clock.now))
    # two waits of 5 s (+ jitter) fit in 12 s: the first call makes 3 attempts; after that
    # every call is tried once and fails at once (not 11 x 15 s)
    assert 10.0 <= clock.now <= 11.0
    assert len(attempts) == 3 + 10
    assert attempts[3:] == [clock.now] * 10


def test_a_wait_longer_than_the_budget_is_not_started():
    clock = Clock()
    policy = RetryPolicy(sleep=clock.sleep, budget=RetryBudget(2.0, clock=clock))
    calls = []
    with pytest.raises(TemporaryError):
        policy.call(lambda: (calls.append(1), rate_limited()))
    assert calls == [1] and clock.now == 0.0


def test_after_the_deadline_nothing_is_attempted_or_spent():
    clock = Clock()
    policy = RetryPolicy(sleep=clock.sleep, budget=RetryBudget(deadline=10.0, clock=clock))
    clock.now = 10.0
    spent = []
    with pytest.raises(DeadlineExceeded):
        policy.call(lambda: "never", before_attempt=lambda: spent.append(1))
    assert spent == []


def test_a_retry_that_would_end_past_the_deadline_raises_the_error_instead():
    clock = Clock()
    policy = RetryPolicy(sleep=clock.sleep, budget=RetryBudget(deadline=3.0, clock=clock))
    with pytest.raises(TemporaryError) as caught:
        policy.call(rate_limited)
    assert not isinstance(caught.value, DeadlineExceeded)  # the call's own error, at once
    assert clock.now == 0.0


def test_without_a_budget_the_attempts_still_bound_the_loop():
    clock = Clock()
    policy = RetryPolicy(max_attempts=3, sleep=clock.sleep, rng=random.Random(2))
    calls = []
    with pytest.raises(TemporaryError):
        policy.call(lambda: (calls.append(1), rate_limited()))
    assert len(calls) == 3 and 10.0 <= clock.now <= 11.0
