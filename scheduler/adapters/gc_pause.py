"""The cyclic garbage collector, paused for a scheduling cycle by the processes that run one.

A cycle allocates hundreds of thousands of small objects that live until it ends, so the
cyclic collector ran over and over across the whole session for nothing: about a fifth of a
10,000-job cycle. Plain reference counting still frees garbage meanwhile, and
``Session.release`` cuts the session's own reference cycles before the collector is back, so
its first pass finds only the result.

The pause is the caller's choice, not the core's: ``gc`` is process-wide state, and the quota
preview runs the core inside a web request, where other threads' garbage must still be
collected. The cycle worker, `python -m scheduler bench` and the queue replay pause it; the web
process never does.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

from scheduler.core.config import SchedulerConf
from scheduler.core.cycle import run_cycle
from scheduler.core.types import CycleResult, Snapshot


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic collection inside; the collector is back as it was (enabled or not) after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_cycle_paused(snapshot: Snapshot, conf: SchedulerConf) -> CycleResult:
    """``run_cycle`` with the collector paused: how the cycle worker runs the core."""
    with gc_paused():
        return run_cycle(snapshot, conf)
