"""cdp: pods younger than their queue's minimum run time are not victims."""

import pytest

from scheduler.core.config import ConfigError
from scheduler.core.plugins import cdp
from tests.scheduler.core.builders import (
    SEED_TIERS,
    evicted,
    make_job,
    make_node,
    make_queue,
    make_task,
    run,
)

CDP_TIERS = [
    {"plugins": [*SEED_TIERS[0]["plugins"], {"name": "cdp"}]},
    *SEED_TIERS[1:],
]
# drf in the second tier picks victims from every candidate: a tier walk alone would let it
# take the pods cdp protects in the first.
CDP_DRF_TIERS = [
    {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "cdp"}]},
    {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"}]},
]


def _running(queue, started, prefix="l", priority=1):
    """One job of 8 one-GPU pods on n1 (gang spares all but one), ``started`` per pod."""
    tasks = [
        make_task(f"{prefix}{i}", status="Running", node="n1", started=at)
        for i, at in enumerate(started)
    ]
    return [make_job(f"{prefix}", queue, tasks, 1, priority=priority, min_available=1)]


def _preempt(min_runtime, started, now, tiers=CDP_TIERS):
    urgent = make_job("urgent", "q", [make_task("u0", gpu=2)], 100, priority=100)
    return run(
        [make_node("n1")],
        [make_queue("q", min_runtime=min_runtime)],
        [*_running("q", started), urgent],
        actions="enqueue, allocate, preempt",
        tiers=tiers,
        now=now,
    )


def test_preempt_skips_pods_younger_than_the_minimum():
    # l6 and l7 would go first (newest); they started 100 s ago, the minimum is 600 s.
    started = [0.0] * 6 + [900.0, 900.0]
    assert evicted(_preempt(600, started, now=1000.0)) == ["l4", "l5"]


def test_preempt_takes_them_once_the_minimum_has_passed():
    started = [0.0] * 6 + [900.0, 900.0]
    assert evicted(_preempt(600, started, now=1500.0)) == ["l6", "l7"]


def test_the_minimum_is_reached_at_exactly_its_length():
    started = [0.0] * 6 + [400.0, 400.0]
    assert evicted(_preempt(600, started, now=1000.0)) == ["l6", "l7"]


def test_nothing_is_evicted_when_every_pod_is_protected():
    result = _preempt(600, [900.0] * 8, now=1000.0)
    assert result.evictions == ()
    assert result.pipelined == ()


def test_a_later_tier_cannot_take_what_cdp_protects():
    assert _preempt(600, [900.0] * 8, now=1000.0, tiers=CDP_DRF_TIERS).evictions == ()


@pytest.mark.parametrize(
    ("min_runtime", "tiers"),
    [
        pytest.param(0, CDP_TIERS, id="minimum-zero"),
        pytest.param(600, None, id="cdp-not-enabled"),
    ],
)
def test_without_a_minimum_or_without_cdp_volcano_preempts_as_before(min_runtime, tiers):
    started = [0.0] * 6 + [900.0, 900.0]
    assert evicted(_preempt(min_runtime, started, now=1000.0, tiers=tiers)) == ["l6", "l7"]


def test_a_pod_of_unknown_start_or_not_running_is_not_protected():
    tasks = [
        make_task("a0", gpu=3, status="Running", node="n1"),
        make_task("b0", gpu=3, status="Bound", node="n1", started=990.0),
        make_task("c0", gpu=2, status="Running", node="n1", started=990.0),
    ]
    low = make_job("low", "q", tasks, 1, priority=1, min_available=1)
    urgent = make_job("urgent", "q", [make_task("u0", gpu=6)], 100, priority=100)
    result = run(
        [make_node("n1")],
        [make_queue("q", min_runtime=600)],
        [low, urgent],
        actions="enqueue, allocate, preempt",
        tiers=CDP_TIERS,
        now=1000.0,
    )
    assert evicted(result) == ["a0", "b0"]


def test_reclaim_skips_pods_younger_than_their_queues_minimum():
    started = [0.0] * 6 + [900.0, 900.0]
    jobs = [*_running("alpha", started, prefix="a", priority=0)]
    jobs.append(make_job("b", "beta", [make_task("b0", gpu=2)], 100))
    queues = [make_queue("alpha", min_runtime=600), make_queue("beta")]
    result = run(
        [make_node("n1")],
        queues,
        jobs,
        actions="enqueue, allocate, reclaim",
        tiers=CDP_TIERS,
        now=1000.0,
    )
    assert evicted(result) == ["a4", "a5"]
    # the minimum is the victim's queue's: the reclaimer's own has none and changes nothing
    queues = [make_queue("alpha"), make_queue("beta", min_runtime=600)]
    result = run(
        [make_node("n1")],
        queues,
        jobs,
        actions="enqueue, allocate, reclaim",
        tiers=CDP_TIERS,
        now=1000.0,
    )
    assert evicted(result) == ["a6", "a7"]


def _reclaim_for_guarantee(cdp_arguments, guarantee_gpus):
    jobs = [*_running("alpha", [900.0] * 8, prefix="a", priority=0)]
    jobs.append(make_job("b", "beta", [make_task("b0", gpu=2)], 100))
    queues = [
        make_queue("alpha", min_runtime=600),
        make_queue("beta", guarantee={"gpu": guarantee_gpus}),
    ]
    tiers = [
        {"plugins": [*SEED_TIERS[0]["plugins"], {"name": "cdp", "arguments": cdp_arguments}]},
        *SEED_TIERS[1:],
    ]
    return run(
        [make_node("n1")], queues, jobs, actions="enqueue, allocate, reclaim", tiers=tiers,
        now=1000.0,
    )  # fmt: skip


def test_reclaim_within_a_guarantee_overrides_the_minimum_when_the_conf_says_so():
    result = _reclaim_for_guarantee({"cdp.guaranteeOverrides": True}, guarantee_gpus=2)
    assert evicted(result) == ["a6", "a7"]
    assert all(
        e.reason.endswith(
            "its minimum run time of 600 s was overridden: queue beta reclaims within its guarantee"
        )
        for e in result.evictions
    )


@pytest.mark.parametrize(
    ("arguments", "guarantee"),
    [
        pytest.param({}, 2, id="override-off-by-default"),
        pytest.param({"cdp.guaranteeOverrides": True}, 1, id="beyond-the-guarantee"),
        pytest.param({"cdp.guaranteeOverrides": True}, 0, id="no-guarantee"),
    ],
)
def test_otherwise_the_minimum_holds_for_reclaim(arguments, guarantee):
    assert _reclaim_for_guarantee(arguments, guarantee).evictions == ()


def test_the_override_argument_must_be_a_boolean():
    with pytest.raises(ConfigError) as info:
        cdp.build({"cdp.guaranteeOverrides": "yes"})
    assert info.value.field == "cdp.guaranteeOverrides"
