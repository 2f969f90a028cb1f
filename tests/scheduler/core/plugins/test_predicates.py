"""predicates: a node the job's pod was refused on lately is avoided until the time given."""

from scheduler.core.types import PendingKind
from tests.scheduler.core.builders import binds, make_job, make_node, make_queue, make_task, run

NOON = 1_767_614_400.0  # 2026-01-05 12:00:00 UTC


def test_a_task_avoids_the_node_that_refused_it_and_goes_to_another():
    avoid = (("gpu-a", NOON + 40),)
    job = make_job("1", "q", [make_task("1-w-0", gpu=8, avoid_nodes=avoid)])
    nodes = [make_node("gpu-a"), make_node("gpu-b")]
    result = run(nodes=nodes, queues=[make_queue("q")], jobs=[job], now=NOON)
    assert binds(result) == {"1-w-0": "gpu-b"}


def test_with_only_the_avoided_node_the_job_waits_saying_until_when():
    avoid = (("gpu-a", NOON + 40),)
    job = make_job("1", "q", [make_task("1-w-0", gpu=8, avoid_nodes=avoid)])
    other = make_job("2", "q", [make_task("2-w-0", gpu=8)], created=1)
    result = run(nodes=[make_node("gpu-a")], queues=[make_queue("q")], jobs=[job, other], now=NOON)
    assert binds(result) == {"2-w-0": "gpu-a"}
    assert (
        "node refused this job's pod recently; it may be tried again at 12:00:40 UTC"
        in (result.pending_reasons["1"])
    )
    assert result.pending_kinds["1"] == PendingKind.WAITS  # not never: it passes
