"""Bulk work over tens of thousands of fresh values: the cyclic garbage collector paused.

Decoding and converting a list of 40,000 pods (the Kubernetes adapter), a watch pass over them
or a plan over 1,000 workloads and 2,000 pools allocates
hundreds of thousands of containers that all stay alive until the stage commits. Each one
counts towards the collector's thresholds, so the collector runs full collections over them
again and again and finds nothing to free; at that scale they cost a third of a watch pass
and a quarter of a plan. Cycles made meanwhile are collected once the collector is back on.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block (or, as a decorator, the call); it is
    re-enabled afterwards, exception or not, unless it was already off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
