"""The host's record of its clock's steps (`host.clockstep`): one file in ``budget_dir`` that
every scoctl process of the host reads and writes under its lock, so that a step between two
``run --once`` passes (two processes, one monotonic clock) is seen as well as one under the
controller (issue 49 item 12)."""

from __future__ import annotations

from pathlib import Path

from scoctl.clock import FixedClock
from scoctl.host.clockstep import FILE, seen_steps


def test_a_step_between_two_processes_is_seen_by_the_second(tmp_path: Path) -> None:
    first = FixedClock()  # one pass, then the process ends
    assert seen_steps(tmp_path, first, boot="b") == ()
    later = FixedClock(first.now())  # the next pass: another process, the same host clocks
    later.advance(30)
    later.step(3600)
    [step] = seen_steps(tmp_path, later, boot="b")
    assert step.seconds == 3600 and step.seen == later.now().timestamp()
    later.advance(30)
    assert seen_steps(tmp_path, later, boot="b") == (step,)  # noted once, kept


def test_an_unreadable_record_starts_again_and_an_unusable_directory_costs_nothing(
        tmp_path: Path) -> None:
    (tmp_path / FILE).write_text("{not json")
    clock = FixedClock()
    assert seen_steps(tmp_path, clock, boot="b") == ()
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert seen_steps(blocked / "sub", clock, boot="b") == ()  # not a directory: no steps
