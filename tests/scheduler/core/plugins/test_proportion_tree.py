"""The hierarchical proportion (``enableHierarchy`` on proportion): our departure from the flat
upstream plugin, see docs/design/hierarchical-proportion.md."""

import pytest

from scheduler.core.plugins._proportion_tree import _water_level
from tests.scheduler.core.builders import (
    SEED_TIERS,
    binds,
    evicted,
    make_job,
    make_node,
    make_queue,
    make_task,
    run,
)

TREE_TIERS = [
    SEED_TIERS[0],
    {
        "plugins": [
            {"name": "predicates"},
            {"name": "proportion", "enableHierarchy": True},
            {"name": "binpack", "arguments": {"binpack.resources": "gpu"}},
        ]
    },
]


def _pods(queue, count, start=0, gpu=1, status="Pending", node=None):
    return [
        make_job(
            f"{queue}-{i}",
            queue,
            [make_task(f"{queue}-{i}-0", gpu=gpu, status=status, node=node)],
            start + i,
            min_available=1,
        )
        for i in range(count)
    ]


def _deserved(result, *names):
    return {name: result.queues[name].deserved.get("gpu") for name in names}


def test_without_parents_the_flag_changes_nothing():
    queues = [
        make_queue("a", weight=3, guarantee={"gpu": 2}),
        make_queue("b", capability={"gpu": 5}),
    ]
    jobs = _pods("a", 20) + _pods("b", 20, start=100)
    nodes = [make_node("n1"), make_node("n2")]
    flat = run(nodes, queues, jobs, tiers=SEED_TIERS)
    tree = run(nodes, queues, jobs, tiers=TREE_TIERS)
    assert tree == flat


def test_a_tenant_guarantee_without_jobs_is_lent_and_taken_back():
    nodes = [make_node("n1"), make_node("n2")]
    queues = [
        make_queue("tenant/a", guarantee={"gpu": 8}),
        make_queue("tenant/b"),
        make_queue("a1", parent="tenant/a"),
        make_queue("b1", parent="tenant/b"),
    ]
    # a is idle: b may use the whole cluster, a's guarantee included.
    borrowed = run(nodes, queues, _pods("b1", 16), tiers=TREE_TIERS)
    assert len(binds(borrowed)) == 16
    # a's jobs arrive: reclaim takes its 8 back from b.
    running = _pods("b1", 16, status="Running", node="n1")[:8] + [
        make_job(f"b1-{i}", "b1", [make_task(f"b1-{i}-0", status="Running", node="n2")], i)
        for i in range(8, 16)
    ]
    back = run(
        nodes, queues, running + _pods("a1", 8, start=100), "enqueue, allocate, reclaim", TREE_TIERS
    )
    assert _deserved(back, "tenant/a", "tenant/b") == {"tenant/a": 8, "tenant/b": 8}
    assert len(evicted(back)) == 8


def test_jobs_in_a_queue_with_children_never_run():
    queues = [make_queue("tenant/a"), make_queue("a1", parent="tenant/a")]
    result = run([make_node("n1")], queues, _pods("tenant/a", 1), tiers=TREE_TIERS)
    assert binds(result) == {}
    assert result.pending_reasons["tenant/a-0"].endswith(
        "queue tenant/a has child queues; jobs must go to a leaf queue"
    )


@pytest.mark.parametrize(
    "queues",
    [
        pytest.param([make_queue("a1", parent="nowhere")], id="unknown-parent"),
        pytest.param(
            [
                make_queue("x", parent="y"),
                make_queue("y", parent="x"),
                make_queue("a1", parent="x"),
            ],
            id="cycle",
        ),
    ],
)
def test_a_broken_tree_lifts_queues_to_the_top_instead_of_failing(queues):
    result = run([make_node("n1")], queues, _pods("a1", 2), tiers=TREE_TIERS)
    assert len(binds(result)) == 2


def test_a_queue_below_its_share_takes_the_last_pod_its_sibling_cannot_use():
    # Tenant a deserves 10 of 16 GPUs (guarantee), split 5/5; pods of 2 GPUs. Without the last
    # pod rule each queue stops at 4 and the tenant at 8.
    queues = [
        make_queue("tenant/a", guarantee={"gpu": 10}, capability={"gpu": 10}),
        make_queue("a1", parent="tenant/a"),
        make_queue("a2", parent="tenant/a"),
    ]
    result = run(
        [make_node("n1"), make_node("n2")],
        queues,
        _pods("a1", 4, gpu=2) + _pods("a2", 4, start=100, gpu=2),
        tiers=TREE_TIERS,
    )
    assert _deserved(result, "a1", "a2") == {"a1": 5, "a2": 5}
    assert result.queues["tenant/a"].allocated.get("gpu") == 10


@pytest.mark.parametrize(
    ("rows", "total", "expected"),
    [
        pytest.param([("a", 1, 0, 10), ("b", 1, 0, 10)], 8, {"a": 4, "b": 4}, id="even"),
        pytest.param([("a", 3, 0, 10), ("b", 1, 0, 10)], 8, {"a": 6, "b": 2}, id="weights"),
        pytest.param([("a", 1, 0, 1), ("b", 1, 0, 10)], 8, {"a": 1, "b": 7}, id="cap-spills-over"),
        pytest.param([("a", 1, 6, 10), ("b", 1, 0, 10)], 8, {"a": 6, "b": 2}, id="floor-first"),
        pytest.param(
            [("a", 1, 12, 12), ("b", 1, 0, 4)], 16, {"a": 12, "b": 4}, id="floor-not-overdrawn"
        ),
        pytest.param([("a", 1, 0, 2), ("b", 1, 0, 3)], 8, {"a": 2, "b": 3}, id="every-cap-met"),
        pytest.param([("a", 1, 6, 6), ("b", 1, 6, 6)], 8, {"a": 6, "b": 6}, id="floors-over-total"),
    ],
)
def test_water_level(rows, total, expected):
    shares = _water_level(rows, total)
    assert shares == pytest.approx(expected)
    if sum(cap for *_, cap in rows) > total and sum(f for _, _, f, _ in rows) < total:
        assert sum(shares.values()) == pytest.approx(total)
