import pytest

from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task, run


def _demand(queue: str, count: int, start: int = 0):
    return [
        make_job(f"{queue}{i}", queue, [make_task(f"{queue}{i}-0")], start + i, min_available=1)
        for i in range(count)
    ]


@pytest.mark.parametrize(
    ("queues", "demand", "deserved"),
    [
        pytest.param(
            [make_queue("a"), make_queue("b")],
            {"a": 16, "b": 16},
            {"a": 8, "b": 8},
            id="equal-weights",
        ),
        pytest.param(
            [make_queue("a", weight=3), make_queue("b")],
            {"a": 16, "b": 16},
            {"a": 12, "b": 4},
            id="weights",
        ),
        pytest.param(
            [make_queue("a"), make_queue("b")],
            {"a": 16, "b": 2},
            {"a": 14, "b": 2},
            id="capped-by-request",
        ),
        pytest.param(
            [make_queue("a", capability={"gpu": 3}), make_queue("b")],
            {"a": 16, "b": 16},
            {"a": 3, "b": 13},
            id="capability-then-redistribution",
        ),
        pytest.param(
            [make_queue("a", guarantee={"gpu": 12}), make_queue("b", weight=3)],
            {"a": 16, "b": 16},
            {"a": 12, "b": 4},
            id="guarantee-floor",
        ),
        pytest.param(
            [make_queue("a", borrowing_limit={"gpu": 2}), make_queue("b")],
            {"a": 16},
            {"a": 10},
            id="borrowing-limit-over-nominal",
        ),
        pytest.param(
            [make_queue("a", borrowing_limit={"gpu": 0}, guarantee={"gpu": 10}), make_queue("b")],
            {"a": 16},
            {"a": 10},
            id="nominal-is-the-guarantee-when-larger",
        ),
    ],
)
def test_deserved_water_filling(queues, demand, deserved):
    jobs = []
    for offset, (queue, count) in enumerate(demand.items()):
        jobs += _demand(queue, count, start=100 * offset)
    result = run([make_node("n1"), make_node("n2")], queues, jobs)
    assert {q: result.queues[q].deserved.get("gpu") for q in deserved} == deserved
    for queue, gpus in deserved.items():
        assert result.queues[queue].allocated.get("gpu") == gpus


def test_capability_reason_names_the_numbers():
    result = run(
        [make_node("n1")],
        [make_queue("nlp", capability={"gpu": 2})],
        [make_job("big", "nlp", [make_task("b0", gpu=4)], 1)],
    )
    assert result.pending_reasons == {
        "big": "can never run as submitted: its gang needs 4 GPUs at once and queue nlp's "
        "capability is 2 GPUs; lower the request to 2 GPUs or ask a team lead to raise the "
        "capability"
    }


def test_the_borrowing_limit_is_named_only_when_it_holds_the_share_down():
    # a may borrow 2 above its nominal 8: it deserves 10 and says why.
    capped = run(
        [make_node("n1"), make_node("n2")],
        [make_queue("a", borrowing_limit={"gpu": 2}), make_queue("b")],
        _demand("a", 16),
    )
    assert capped.pending_reasons["a10"].startswith(
        "job needs 1 GPU; queue a may borrow at most 2 GPUs above its nominal share: it "
        "deserves 10 GPUs and has 10 GPUs allocated; "
    )
    # With b's guarantee of 10 held back, a's share (6) is below its borrowing cap (10): the
    # limit is not the reason.
    held = run(
        [make_node("n1"), make_node("n2")],
        [make_queue("a", borrowing_limit={"gpu": 2}), make_queue("b", guarantee={"gpu": 10})],
        _demand("a", 16),
    )
    assert held.pending_reasons["a6"].startswith(
        "job needs 1 GPU; queue a deserves 6 GPUs and has 6 GPUs allocated; "
    )
