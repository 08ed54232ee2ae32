"""Bulk work (the Kubernetes adapter's list decoding, a watch pass, a plan) runs with the
cyclic collector paused, and restores it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from scoctl.bulk import collector_paused


@pytest.fixture
def collector_on() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.usefixtures("collector_on")
def test_the_collector_is_off_inside_and_back_on_after() -> None:
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_a_failing_block_or_call_still_turns_it_back_on() -> None:
    @collector_paused()
    def fails() -> None:
        assert not gc.isenabled()
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        fails()
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


@pytest.mark.usefixtures("collector_on")
def test_nested_pauses_leave_it_off_until_the_outer_one_ends() -> None:
    with collector_paused():
        with collector_paused():
            pass
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_already_off_stays_off() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
