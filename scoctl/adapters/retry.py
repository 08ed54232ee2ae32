"""A bounded retry policy for outside API calls.

Only `TemporaryError` is retried, and not `Unanswered`: a call that got no answer within
`timeouts.api` is reported at once (the API stalls; `adapters.guard` keeps the rest of the pass
from waiting on it again). A `delay` on the error (from `Retry-After`) is honoured: the
wait is never shorter, plus a uniform draw between 0 and `retry_after_jitter` so that callers
told the same Retry-After (several launches, several scoctl processes) do not all come back in
the same instant. Otherwise the wait is exponential backoff with full jitter (a uniform draw
between 0 and `min(max_delay, base_delay * 2**n)`), so retries of different launches never
march in lock-step.
`before_attempt` runs before every attempt, the first one included: the caller spends a token of
its mutating-call budget there, so retries are paid for like any other call.

Every retry loop is bounded in time, not only in attempts: a `RetryBudget` shared by all the
calls of one adapter (one region, one pass) holds the seconds of waiting left — once a wait
would overdraw it, the error is raised instead (a persistent 429 with Retry-After 5 costs the
budget once, not 15 s per call) — and the pass's deadline, after which no attempt starts
(`DeadlineExceeded`: nothing is sent).

A caller may also bound the calls it makes (`calls_until`): a runner's mutating calls must end
before its lease does (design: Runners). Inside, every attempt first asks `call_time_left`, just
before it is sent: `DeadlineExceeded` (nothing sent) when too little is left, else the seconds
the attempt may take (the adapter's timeout for it).

`sleep`, `rng` and the budget's clock are injected, so tests assert the exact waits and never
sleep.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

from scoctl.errors import DeadlineExceeded, TemporaryError, Unanswered

T = TypeVar("T")

MIN_CALL_S = 0.5  # an attempt with less time than this left is not sent at all
_calls_until: ContextVar[float | None] = ContextVar("scoctl_calls_until", default=None)


@contextlib.contextmanager
def calls_until(deadline: float | None) -> Iterator[None]:
    """Within the block, every call attempt must end by `deadline` (`time.monotonic`; None:
    no bound); a nested bound never extends an outer one."""
    outer = _calls_until.get()
    bound = deadline if outer is None else outer if deadline is None else min(outer, deadline)
    token = _calls_until.set(bound)
    try:
        yield
    finally:
        _calls_until.reset(token)


def call_time_left(limit: float | None = None, *,
                   clock: Callable[[], float] = time.monotonic) -> float | None:
    """Seconds the attempt about to be sent may take: at most `limit`, and within the caller's
    bound (`calls_until`); None when neither bounds it. Raises DeadlineExceeded (send nothing)
    when less than `MIN_CALL_S` is left."""
    deadline = _calls_until.get()
    if deadline is None:
        return limit
    left = deadline - clock()
    if left < MIN_CALL_S:
        raise DeadlineExceeded(f"the caller's deadline is {max(left, 0):.1f} s away (its "
                               "lease ends): call not made")
    return left if limit is None else min(limit, left)


class RetryBudget:
    """Seconds of retry waiting left, and the deadline (on `clock`) after which nothing starts.

    Mutable and shared on purpose: every call of one adapter draws on the same budget.
    """

    def __init__(self, seconds: float = float("inf"), *, deadline: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.left = seconds
        self.deadline = deadline
        self.clock = clock

    def expired(self) -> bool:
        """Whether the deadline has passed."""
        return self.deadline is not None and self.clock() >= self.deadline

    def allows(self, delay: float) -> bool:
        """Whether a wait of `delay` fits in the budget and ends before the deadline."""
        if delay > self.left:
            return False
        return self.deadline is None or self.clock() + delay < self.deadline

    def spend(self, delay: float) -> None:
        self.left -= delay


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a call that raised `TemporaryError`."""

    max_attempts: int = 4
    base_delay: float = 0.5
    max_delay: float = 30.0
    max_retry_after: float = 120.0
    retry_after_jitter: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False)
    rng: random.Random = field(default_factory=random.Random, compare=False)
    budget: RetryBudget = field(default_factory=RetryBudget, compare=False)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.retry_after_jitter < 0:
            raise ValueError("retry_after_jitter must not be negative")

    def backoff(self, retry: int, hint: float | None) -> float:
        """Seconds to wait before retry number `retry` (1-based), given a server hint."""
        if hint is not None:
            told = min(max(0.0, hint), self.max_retry_after)
            return told + self.rng.uniform(0.0, self.retry_after_jitter)
        ceiling = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        return self.rng.uniform(0.0, ceiling)

    def check_deadline(self) -> None:
        """Raise `DeadlineExceeded` when the pass's deadline has passed."""
        if self.budget.expired():
            raise DeadlineExceeded("the pass's deadline (timeouts.run) passed: call not made")

    def call(
        self,
        fn: Callable[[], T],
        *,
        before_attempt: Callable[[], None] | None = None,
        on_retry: Callable[[int, TemporaryError, float], None] | None = None,
    ) -> T:
        """Run `fn`, retrying `TemporaryError` up to `max_attempts` attempts in all.

        Raises the last `TemporaryError` when the attempts or the budget run out, and
        `DeadlineExceeded` (before `before_attempt`: nothing spent, nothing sent) once the
        deadline has passed; any other error at once. `on_retry(attempt, error, delay)` is told
        about each retry before its wait.
        """
        attempt = 0
        while True:
            attempt += 1
            self.check_deadline()
            if before_attempt is not None:
                before_attempt()
            try:
                return fn()
            except DeadlineExceeded:
                raise  # nothing was sent, and waiting only brings the deadline nearer
            except Unanswered:
                raise  # the API stalls: another timeouts.api of waiting helps no one
            except TemporaryError as error:
                if attempt >= self.max_attempts:
                    raise
                delay = self.backoff(attempt, error.delay)
                if not self.budget.allows(delay):
                    raise
                self.budget.spend(delay)
                if on_retry is not None:
                    on_retry(attempt, error, delay)
                self.sleep(delay)
