import gc
import json

from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle, run_cycle_timed
from scheduler.core.scenario import result_to_dict
from scheduler.core.synthetic import synthetic_snapshot
from scheduler.core.types import Snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


def _snapshot():
    nodes = tuple(make_node(f"n{i}") for i in range(4))
    queues = (make_queue("a"), make_queue("b", weight=2))
    jobs = tuple(
        make_job(f"j{i}", "ab"[i % 2], [make_task(f"j{i}-{k}", gpu=1 + i % 3) for k in range(2)], i)
        for i in range(12)
    )
    return Snapshot(nodes, queues, jobs, now=0)


def test_same_input_gives_byte_identical_output():
    outputs = {json.dumps(result_to_dict(run_cycle(_snapshot(), default_conf()))) for _ in range(3)}
    assert len(outputs) == 1


def test_every_job_with_pending_pods_gets_one_sentence():
    result = run_cycle(_snapshot(), default_conf())
    bound_jobs = {b.job for b in result.binds}
    for job in _snapshot().jobs:
        if job.name not in bound_jobs:
            assert result.pending_reasons[job.name].strip()
    assert all("\n" not in reason for reason in result.pending_reasons.values())


def test_the_core_leaves_the_collector_to_its_caller(monkeypatch):
    # gc is process-wide: the web process runs the core for the quota preview, and must keep
    # collecting (scheduler.adapters.gc_pause pauses it for the cycle worker).
    calls = []
    monkeypatch.setattr(gc, "disable", lambda: calls.append("disable"))
    monkeypatch.setattr(gc, "enable", lambda: calls.append("enable"))
    snapshot = synthetic_snapshot(4, 10, 2, seed=1)
    run_cycle(snapshot, default_conf())
    run_cycle_timed(snapshot, default_conf(), lambda: 0.0)
    assert calls == []


def test_a_cycle_leaves_no_reference_cycles_for_the_collector():
    # The session is freed by reference counting when the cycle ends; a cycle left behind
    # (a plugin holding the session, a node holding the index) would make the collector walk
    # every object of the session again.
    snapshot = synthetic_snapshot(20, 60, 3, seed=1, running_fraction=0.5)
    gc.collect()
    gc.disable()
    try:
        run_cycle(snapshot, default_conf())
        run_cycle_timed(snapshot, default_conf(), lambda: 0.0)
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_queue_orders_are_the_lines_the_reasons_count_in():
    """One full node: the waiting jobs of each queue in job order (priority first here), the
    job that can never run left out, each reason counting the jobs before it in its line."""
    full = make_job("full", "a", [make_task("full-0", gpu=8, status="Running", node="n0")])
    jobs = (
        full,
        make_job("low", "a", [make_task("low-0", gpu=4)], 1, priority=1),
        make_job("high", "a", [make_task("high-0", gpu=4)], 2, priority=9),
        make_job("never", "a", [make_task("never-0", gpu=16)], 0, priority=5),
        make_job("other", "b", [make_task("other-0", gpu=4)], 3),
    )
    snapshot = Snapshot((make_node("n0"),), (make_queue("a"), make_queue("b")), jobs, now=10)
    result = run_cycle(snapshot, default_conf())
    assert result.queue_orders == {"a": ("high", "low"), "b": ("other",)}
    assert result.pending_kinds["never"] == "never"
    assert "1 job of queue a comes first" in result.pending_reasons["low"]
    assert "come first" not in result.pending_reasons["high"]
