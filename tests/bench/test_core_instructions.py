"""bench.core_instructions: its --without switches turn off what they name (counted without
valgrind here: a switch that patched a name the cycle no longer calls would count 0)."""

from bench.core_instructions import _CYCLES
from scheduler.core import cycle
from scheduler.core.config import default_conf
from scheduler.core.types import Snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


def _switch(name: str) -> str:
    """The script's line that replaces ``cycle.<name>``."""
    return next(
        line.strip() for line in _CYCLES.splitlines() if line.strip().startswith(f"cycle.{name} =")
    )


def test_without_never_turns_the_verdict_off(monkeypatch):
    # a job in a queue that does not exist can never run, unless the verdict is off
    snapshot = Snapshot(
        (make_node("n0"),),
        (make_queue("q"),),
        (make_job("lost", "nowhere", [make_task("lost-0")], 0),),
        now=0.0,
    )
    assert cycle.run_cycle(snapshot, default_conf()).pending_kinds["lost"] == "never"
    monkeypatch.setattr(cycle, "never_reasons", cycle.never_reasons)  # restored afterwards
    exec(_switch("never_reasons"), {"cycle": cycle})  # noqa: S102 - the script's own line
    assert cycle.run_cycle(snapshot, default_conf()).pending_kinds["lost"] == "waits"


def test_without_reasons_turns_the_sentences_off(monkeypatch):
    # the node is full: the waiting job's sentence says so, unless reasons are off
    running = make_job("run", "q", [make_task("r-0", gpu=8, status="Running", node="n0")], 0)
    waiting = make_job("wait", "q", [make_task("w-0", gpu=4)], 1)
    snapshot = Snapshot((make_node("n0"),), (make_queue("q"),), (running, waiting), now=0.0)
    assert cycle.run_cycle(snapshot, default_conf()).pending_reasons["wait"]
    monkeypatch.setattr(cycle, "pending_reason", cycle.pending_reason)  # restored afterwards
    exec(_switch("pending_reason"), {"cycle": cycle})  # noqa: S102 - the script's own line
    assert cycle.run_cycle(snapshot, default_conf()).pending_reasons["wait"] == ""
