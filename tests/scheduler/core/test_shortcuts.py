"""Speed shortcuts must decide exactly what the slow paths decide; bench and reasons checks."""

import json

import pytest

from scheduler.__main__ import main
from scheduler.core.actions.allocate import AllocateState
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle, run_cycle_timed
from scheduler.core.session import Session
from scheduler.core.synthetic import ZONE_LABEL, synthetic_snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task, run


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("running", [0.0, 0.4, 0.8])
def test_sort_keys_decide_like_compare_functions(monkeypatch, seed, running):
    snapshot = synthetic_snapshot(24, 160, 4, seed, running)
    fast = run_cycle(snapshot, default_conf())
    for key_fn in ("job_key_fn", "task_key_fn", "queue_key_fn"):
        monkeypatch.setattr(Session, key_fn, lambda self: None)
    assert run_cycle(snapshot, default_conf()) == fast


def test_timed_cycle_gives_the_same_result():
    snapshot = synthetic_snapshot(16, 80, 3, 1, 0.5)
    ticks = iter(range(10_000))
    result, timings = run_cycle_timed(snapshot, default_conf(), lambda: float(next(ticks)))
    assert result == run_cycle(snapshot, default_conf())
    assert set(timings) == {"open_session", "close_session", *default_conf().actions}


def test_bench_prints_one_json_object(capsys):
    argv = ["bench", "--nodes", "8", "--jobs", "30", "--queues", "3", "--repeat", "1"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["nodes"] == 8
    assert out["placements"] > 0
    assert out["peak_memory_mb"] > 0
    assert out["rss_peak_mb"] > out["peak_memory_mb"]  # the interpreter's own memory too
    assert set(out["action_seconds"]) >= {"allocate", "preempt", "reclaim"}


def test_quota_reason_says_what_the_job_needs():
    nodes = [make_node(f"n{i}") for i in range(4)]
    queues = [make_queue("nlp-train", weight=14), make_queue("cv", weight=10)]
    jobs = [
        make_job("big", "nlp-train", [make_task(f"big-{i}", gpu=8) for i in range(4)], 1),
        make_job("other", "cv", [make_task(f"o-{i}", gpu=8) for i in range(2)], 0),
    ]
    reason = run(nodes, queues, jobs).pending_reasons["big"]
    assert reason.startswith("job needs 32 GPUs (4 pods x 8); queue nlp-train deserves ")
    assert "GPUs allocated" in reason


def test_quota_reasons_keep_each_jobs_own_shape():
    # The sentences are memoised by pending requests: jobs of one queue with different shapes
    # must still each get their own.
    nodes = [make_node(f"n{i}") for i in range(2)]
    queues = [make_queue("small", weight=1), make_queue("cv", weight=10)]
    jobs = [
        make_job("busy", "cv", [make_task(f"b-{i}", gpu=8) for i in range(2)], 0),
        make_job("one", "small", [make_task("one-0", gpu=4)], 1),
        make_job("two", "small", [make_task(f"two-{i}", gpu=2) for i in range(2)], 2),
        make_job("mixed", "small", [make_task("m-0", gpu=3), make_task("m-1", gpu=1)], 3),
        make_job("again", "small", [make_task(f"a-{i}", gpu=2) for i in range(2)], 4),
    ]
    reasons = run(nodes, queues, jobs).pending_reasons
    assert reasons["one"].startswith("job needs 4 GPUs; ")
    assert reasons["two"].startswith("job needs 4 GPUs (2 pods x 2); ")
    assert reasons["mixed"].startswith("job needs 4 GPUs (2 pods of 3 + 1); ")
    assert reasons["again"].startswith("job needs 4 GPUs (2 pods x 2); ")


def _varied_snapshot(seed: int, running: float):
    """The synthetic cluster with some variety: bigger and unschedulable nodes, zone selectors."""
    import dataclasses
    import random

    from scheduler.core.resources import Resources

    rng = random.Random(seed)
    snapshot = synthetic_snapshot(40, 240, 4, seed, running)
    nodes = []
    for i, node in enumerate(snapshot.nodes):
        if i % 5 == 3:
            values = {**node.allocatable.explicit(), "nvidia.com/gpu": 16}
            node = dataclasses.replace(node, allocatable=Resources.of(values))
        if i % 11 == 7:
            node = dataclasses.replace(node, unschedulable=True)
        nodes.append(node)
    jobs = []
    for job in snapshot.jobs:
        if rng.random() < 0.2:
            zone = ((ZONE_LABEL, f"zone-{rng.randrange(2):03d}"),)
            tasks = tuple(dataclasses.replace(t, node_selector=zone) for t in job.tasks)
            job = dataclasses.replace(job, tasks=tasks)
        jobs.append(job)
    return dataclasses.replace(snapshot, nodes=tuple(nodes), jobs=tuple(jobs))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("running", [0.0, 0.3, 0.5, 0.8])
def test_class_shortcuts_decide_like_a_full_node_scan(monkeypatch, seed, running):
    """Label-free classes and memoised class answers vs every node checked and scored."""
    snapshot = _varied_snapshot(seed, running)
    fast = run_cycle(snapshot, default_conf())
    monkeypatch.setattr(AllocateState, "class_equivalent", lambda self, task: False)
    assert run_cycle(snapshot, default_conf()) == fast


@pytest.mark.parametrize("seed", range(20))
def test_resource_arithmetic_matches_the_generic_combine(seed):
    import math
    import random

    from scheduler.core.resources import Resources

    rng = random.Random(seed)

    def vector():
        names = rng.sample(["cpu", "memory", "gpu", "pods", "x/y"], rng.randint(0, 5))
        values = {n: rng.choice([0, 1, 2.5, -1, 1e12, math.inf, 3]) for n in names}
        return Resources(values, default=rng.choice([0, 0.0, math.inf]))

    def minus(a, b):
        return math.inf if a == math.inf else a - b

    for _ in range(200):
        left, right = vector(), vector()
        for fast, slow in (
            (left.add(right), left._combine(right, lambda a, b: a + b)),
            (left.sub(right), left._combine(right, minus)),
        ):
            assert repr(sorted(fast.explicit().items())) == repr(sorted(slow.explicit().items()))
            assert repr(fast.default) == repr(slow.default)
        # a node's idle at open: the same numbers, whether or not anything was subtracted
        for other in (right, Resources(), Resources({}, default=0)):
            clamped, plain = left.sub_clamped(other), left.sub(other).clamp_non_negative()
            assert clamped.explicit() == plain.explicit()
            assert clamped.default == plain.default


def _many_domains_snapshot(seed: int, running: float):
    """Zones of 3 nodes and a hostname label on every node, as on a real cluster: the
    topology plugin then scores a few nodes of many domains, and label classes are singletons."""
    import dataclasses

    snapshot = _varied_snapshot(seed, running)
    nodes = tuple(
        dataclasses.replace(
            node,
            labels=((ZONE_LABEL, f"zone-{i // 3:03d}"), ("kubernetes.io/hostname", node.name)),
        )
        for i, node in enumerate(snapshot.nodes)
    )
    return dataclasses.replace(snapshot, nodes=nodes)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("running", [0.0, 0.3, 0.6, 0.8])
def test_topology_shortcut_decides_like_a_full_node_scan(monkeypatch, seed, running):
    """Label-free classes plus the preferred domain's classes vs every node scored."""
    snapshot = _many_domains_snapshot(seed, running)
    fast = run_cycle(snapshot, default_conf())
    assert fast.binds  # the comparison must cover placements, not only pending jobs
    monkeypatch.setattr(AllocateState, "class_equivalent", lambda self, task: False)
    assert run_cycle(snapshot, default_conf()) == fast
