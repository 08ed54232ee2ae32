"""The host-wide token budget: a sliding window of mutating calls per region."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from scoctl.host.budget import TokenBudget


class FakeTime:
    def __init__(self) -> None:
        self.now = 1000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def windows_hold(calls: list[float], rate: int, window: float = 1.0) -> bool:
    calls = sorted(calls)
    return all(sum(1 for t in calls if start <= t < start + window) <= rate for start in calls)


def test_no_window_of_one_second_holds_more_calls_than_the_rate(tmp_path):
    fake = FakeTime()
    budget = TokenBudget(tmp_path, "region-a", 10, clock=fake.clock, sleep=fake.sleep, guard=0)
    calls = [budget.acquire() for _ in range(35)]
    assert windows_hold(calls, 10)
    assert calls[-1] - calls[0] >= 3.0  # 35 calls at 10/s need at least 3 s
    assert budget.spent == 35


def test_budgets_of_different_regions_do_not_share_tokens(tmp_path):
    fake = FakeTime()
    a = TokenBudget(tmp_path, "a", 2, clock=fake.clock, sleep=fake.sleep, guard=0)
    b = TokenBudget(tmp_path, "b", 2, clock=fake.clock, sleep=fake.sleep, guard=0)
    for _ in range(2):
        a.acquire()
        b.acquire()
    assert fake.now == 1000.0  # nobody waited
    assert a.available() == 0 and b.available() == 0


def _spend(directory: str, count: int, queue: multiprocessing.Queue) -> None:
    budget = TokenBudget(Path(directory), "shared", 5)
    queue.put([budget.acquire() for _ in range(count)])


def test_two_processes_share_one_budget(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_spend, args=(str(tmp_path), 8, queue)) for _ in range(2)]
    for p in procs:
        p.start()
    calls = queue.get(timeout=30) + queue.get(timeout=30)
    for p in procs:
        p.join(timeout=30)
    assert len(calls) == 16
    assert windows_hold(calls, 5)


def test_a_stamp_from_the_future_costs_at_most_one_window_and_never_an_hour(tmp_path):
    """Issue 49 item 12: a burst, then the clock the stamps were taken on goes back an hour
    (a budget file written before a reboot, or by the time of day stepped back): before, the
    next call slept 3,601 s. A stamp from the future is taken as now (and written back so),
    no wait is longer than one window, and the calls after it go on at the rate."""
    fake = FakeTime()
    budget = TokenBudget(tmp_path, "region-a", 10, clock=fake.clock, sleep=fake.sleep, guard=0)
    for _ in range(10):
        budget.acquire()  # the burst: the window is full
    fake.now -= 3600.0
    waits: list[float] = []

    def sleep(seconds: float) -> None:
        waits.append(seconds)
        fake.sleep(seconds)

    budget.sleep = sleep
    calls = [budget.acquire() for _ in range(25)]
    assert waits and max(waits) <= budget.window, waits
    assert sum(waits) < 4.0  # 25 calls at 10/s after a full window: about 3 s, not an hour
    assert windows_hold(calls, 10)
    assert budget.available() >= 0


def test_the_budget_counts_on_the_monotonic_clock(tmp_path):
    """A step of the time of day neither stretches nor shrinks the window: the default clock
    is the host's monotonic one."""
    import time

    budget = TokenBudget(tmp_path, "region-a", 10)
    assert budget.clock is time.monotonic
