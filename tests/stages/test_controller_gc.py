"""The controller keeps the cyclic garbage collector off its long-lived memos (issue 29): after
each pass it collects the young generations and freezes what survived, and every `THAW_S` it
collects everything frozen once more, so garbage a pass left in cycles is freed in bounded
time. CPython's own collector, observed through weak references."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from scoctl.runner.controller import freeze_after_pass

# This test runs the collector over the whole process: garbage other tests left (a TLS socket
# their client library dropped) is finalised here and is not this test's to judge
pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")


class Cell:
    """An object that can hold itself: a cycle only the cyclic collector frees."""

    other: object = None


def cycle() -> weakref.ref[Cell]:
    cell = Cell()
    cell.other = cell
    return weakref.ref(cell)


@pytest.fixture
def collector() -> Iterator[None]:
    """No automatic collection during the test (each step is then the test's own), and nothing
    left frozen after it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.collect()
        if enabled:
            gc.enable()


def test_a_pass_frees_its_young_cycles_and_freezes_what_survived(collector: None) -> None:
    young = cycle()  # garbage the pass made
    kept = Cell()  # a memo the pass keeps
    frozen = gc.get_freeze_count()
    freeze_after_pass(False)
    assert young() is None
    assert gc.get_freeze_count() > frozen
    assert not any(obj is kept for gen in (0, 1, 2) for obj in gc.get_objects(gen))  # frozen


def test_a_thaw_frees_the_cycles_frozen_since(collector: None) -> None:
    cell = Cell()
    cell.other = cell
    ref = weakref.ref(cell)
    freeze_after_pass(False)  # frozen while alive
    del cell  # garbage now, in a cycle, frozen
    gc.collect()
    assert ref() is not None  # a full collection does not see the frozen
    freeze_after_pass(True)
    assert ref() is None
