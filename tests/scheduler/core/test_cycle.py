import gc
import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.actions import ACTIONS
from scheduler.core.config import default_conf
from scheduler.core.cycle import close_session, open_session, run_cycle, run_cycle_timed
from scheduler.core.scenario import result_to_dict
from scheduler.core.synthetic import synthetic_snapshot
from scheduler.core.types import Snapshot, TaskStatus
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task
from tests.scheduler.core.strategies import confs, snapshots


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


# Shared quota sentences -------------------------------------------------------------------------
def _plain_cycle(snapshot, conf):
    """The cycle with every pending job's sentence worked out on its own: the oracle."""
    ssn = open_session(snapshot, conf)
    for action in conf.actions:
        ACTIONS[action].execute(ssn)
    result = close_session(ssn, share_reasons=False)
    ssn.release()
    return result


@st.composite
def _tenanted(draw):
    """A random snapshot whose queues belong to two tenants (some jobs in the default
    namespace), with expected ends for some jobs, pending ones included, and gangs that share
    shapes: what the shared sentences key on."""
    snapshot = draw(snapshots(max_jobs=16))
    tenants = ["default", "t1", "t2"]
    jobs = tuple(replace(job, namespace=draw(st.sampled_from(tenants))) for job in snapshot.jobs)
    ends = tuple(
        (job.name, snapshot.now + draw(st.sampled_from([-600.0, 60.0, 3600.0, 200_000.0])))
        for job in jobs
        if draw(st.integers(0, 2)) == 0
    )
    return replace(snapshot, jobs=jobs, expected_ends=ends)


def _next(snapshot, result, step):
    """The snapshot after ``result``: bound pods run where they were placed, evicted ones are
    gone, and the clock moves on."""
    bound = {bind.task: bind.node for bind in result.binds}
    evicted = {evict.task for evict in result.evictions}
    jobs = []
    for job in snapshot.jobs:
        tasks = tuple(
            replace(task, status=TaskStatus.RUNNING, node=bound[task.name])
            if task.name in bound
            else task
            for task in job.tasks
            if task.name not in evicted
        )
        jobs.append(replace(job, tasks=tasks))
    return replace(snapshot, jobs=tuple(jobs), now=snapshot.now + 60.0 * step)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=_tenanted(), conf=confs())
def test_shared_quota_sentences_read_like_each_jobs_own(snapshot, conf):
    _, conf = conf
    for step in range(1, 4):
        result = run_cycle(snapshot, conf)
        assert result == _plain_cycle(snapshot, conf)
        snapshot = _next(snapshot, result, step)


@pytest.mark.parametrize("tenants", [0, 5])
@pytest.mark.parametrize("running", [0.0, 0.5])
def test_shared_quota_sentences_on_a_synthetic_cluster(tenants, running):
    snapshot = synthetic_snapshot(40, 400, 6, 1, running, tenants=tenants)
    # jobs of one queue in two namespaces: a sentence names the other's jobs differently
    jobs = tuple(replace(job, namespace="ab"[i % 2]) for i, job in enumerate(snapshot.jobs))
    ends = tuple((job.name, 100.0 * i) for i, job in enumerate(jobs) if i % 3 == 0)
    snapshot = replace(snapshot, jobs=jobs, expected_ends=ends, now=1000.0)
    shared = run_cycle(snapshot, default_conf())
    assert shared == _plain_cycle(snapshot, default_conf())
    # the case the sharing is for: many quota-blocked jobs
    assert sum("left of" in r for r in shared.pending_reasons.values()) > 20


def test_jobs_that_differ_in_one_input_of_the_quota_sentence_each_get_their_own():
    # Capped queues; each pair below differs in a single input of the shared sentence.
    nodes = tuple(make_node(f"n{i}", labels=(("host", f"n{i}"),)) for i in range(5))
    queues = (make_queue("q", capability={"gpu": 12}), make_queue("p", capability={"gpu": 8}))
    llama = make_job("llama", "q", [make_task("l-0", gpu=8, status="Running", node="n0")], 0)
    held = make_job("held", "p", [make_task("h-0", gpu=4, status="Running", node="n4")], 0)
    own = make_job(
        "own",
        "q",
        [
            make_task("own-0", gpu=4, status="Running", node="n1"),
            make_task("own-1", gpu=4),
            make_task("own-2", gpu=4),
        ],
        1,
        min_available=2,
    )

    def gang(name, sizes, created, min_available=1, priorities=None, queue="q", **task_kw):
        priorities = priorities or [1] * len(sizes)
        tasks = [
            make_task(f"{name}-{i}", gpu=size, priority=priorities[i], **task_kw)
            for i, size in enumerate(sizes)
        ]
        return make_job(name, queue, tasks, created, min_available=min_available)

    pending = [
        gang("tenant-a", [4], 2),
        replace(gang("tenant-b", [4], 2), namespace="other"),  # names llama differently
        gang("min-2", [4, 4], 3, min_available=2),  # needs both at once
        gang("min-1", [4, 4], 3, min_available=1),
        gang("ready-0", [4, 4], 4, min_available=2),  # like "own" but nothing runs
        gang("by-name", [1, 4], 5),  # needs its first pod in task order: 1 GPU
        gang("by-priority", [1, 4], 5, priorities=[1, 2]),  # the 4-GPU pod comes first
        # only a full node: no offer, no idle fit
        gang("on-n0", [6], 6, queue="p", node_selector=(("host", "n0"),)),
        gang("anywhere", [6], 6, queue="p"),
    ]
    snapshot = Snapshot(
        nodes, queues, (llama, held, own, *pending), now=0.0, expected_ends=(("llama", 3600.0),)
    )
    conf = default_conf()
    shared = run_cycle(snapshot, conf)
    assert shared == _plain_cycle(snapshot, conf)
    reasons = shared.pending_reasons
    for first, second in [
        ("tenant-a", "tenant-b"),
        ("min-2", "min-1"),
        ("own", "ready-0"),
        ("by-name", "by-priority"),
        ("on-n0", "anywhere"),
    ]:
        assert reasons[first].split("; ")[:-1] != reasons[second].split("; ")[:-1], first
