from dataclasses import replace

from tests.scheduler.core.builders import evicted, make_job, make_node, make_queue, make_task, run


def _low(queue, node, count, prefix, created=0, priority=0):
    return [
        make_job(
            f"{prefix}{i}",
            queue,
            [make_task(f"{prefix}{i}-0", status="Running", node=node)],
            created + i,
            priority=priority,
            min_available=1,
        )
        for i in range(count)
    ]


def test_preempt_evicts_just_enough_lower_priority_pods():
    low = make_job(
        "low",
        "q",
        [make_task(f"l{i}", status="Running", node="n1") for i in range(8)],
        1,
        priority=1,
        min_available=1,
    )
    urgent = make_job("urgent", "q", [make_task("u0", gpu=2)], 2, priority=100)
    result = run(
        [make_node("n1")], [make_queue("q")], [low, urgent], actions="enqueue, allocate, preempt"
    )
    assert evicted(result) == ["l6", "l7"]
    assert [(p.task, p.node) for p in result.pipelined] == [("u0", "n1")]


def test_preempt_never_policy_blocks():
    low = make_job(
        "low",
        "q",
        [make_task("l0", gpu=8, status="Running", node="n1")],
        1,
        priority=1,
        min_available=1,
    )
    urgent = make_job(
        "urgent", "q", [make_task("u0", gpu=2, preemption_policy="Never")], 2, priority=100
    )
    result = run([make_node("n1")], [make_queue("q")], [low, urgent], actions="allocate, preempt")
    assert result.evictions == ()


def test_reclaim_returns_the_borrowed_share_newest_first():
    jobs = _low("alpha", "n1", 8, "a") + [make_job("b", "beta", [make_task("b0", gpu=2)], 100)]
    result = run(
        [make_node("n1")],
        [make_queue("alpha"), make_queue("beta")],
        jobs,
        actions="enqueue, allocate, reclaim",
    )
    assert evicted(result) == ["a6-0", "a7-0"]
    assert all(e.action == "reclaim" and e.preemptor_job == "b" for e in result.evictions)


def test_reclaim_respects_guarantee_and_non_reclaimable_queues():
    queues = [make_queue("alpha", reclaimable=False), make_queue("beta")]
    jobs = _low("alpha", "n1", 8, "a") + [make_job("b", "beta", [make_task("b0", gpu=2)], 100)]
    assert run([make_node("n1")], queues, jobs, actions="allocate, reclaim").evictions == ()
    queues = [make_queue("alpha", guarantee={"gpu": 8}), make_queue("beta")]
    assert run([make_node("n1")], queues, jobs, actions="allocate, reclaim").evictions == ()


def test_preempt_never_evicts_a_pod_for_its_identical_twin():
    """When no preemptable plugin compares task priorities, nothing else stops the intra-job
    pass from evicting a running replica to pipeline the same job's pending replica of the
    same role and size (priority only says the job starves here)."""
    job = make_job(
        "elastic",
        "q",
        [
            make_task("w-0", gpu=8, status="Running", node="n1", role="worker"),
            make_task("w-1", gpu=8, role="worker"),
        ],
        1,
        min_available=1,
    )
    tiers = [
        {"plugins": [{"name": "conformance"}]},
        {"plugins": [{"name": "priority", "enablePreemptable": False}]},
    ]
    result = run([make_node("n1")], [make_queue("q")], [job], actions="preempt", tiers=tiers)
    assert result.evictions == ()


def _reclaim_sentences(reclaimer_namespace):
    jobs = [replace(job, namespace="alpha-team") for job in _low("alpha", "n1", 8, "a")] + [
        make_job("b", "beta", [make_task("b0", gpu=2)], 100, namespace=reclaimer_namespace)
    ]
    result = run(
        [make_node("n1")],
        [make_queue("alpha"), make_queue("beta")],
        jobs,
        actions="enqueue, allocate, reclaim",
    )
    return {e.reason for e in result.evictions}


def test_a_reclaim_names_the_reclaimer_to_its_own_tenant_only():
    assert _reclaim_sentences("alpha-team") == {
        "reclaimed for b0 of job b: queue beta is below its deserved share and queue alpha is "
        "above its own"
    }
    # The victim's submitter reads it: another tenant's job, task and queue stay unnamed.
    assert _reclaim_sentences("beta-team") == {
        "reclaimed for a job of another tenant: its queue is below its deserved share and "
        "queue alpha is above its own"
    }


def test_a_preemption_names_the_preemptor_to_its_own_tenant_only():
    def sentences(namespace):
        low = make_job(
            "low",
            "q",
            [make_task(f"l{i}", status="Running", node="n1") for i in range(8)],
            1,
            priority=1,
            min_available=1,
            namespace="team-a",
        )
        urgent = make_job(
            "urgent", "q", [make_task("u0", gpu=2)], 2, priority=100, namespace=namespace
        )
        result = run(
            [make_node("n1")],
            [make_queue("q")],
            [low, urgent],
            actions="enqueue, allocate, preempt",
        )
        return {e.reason for e in result.evictions}

    assert sentences("team-a") == {"preempted by u0 of higher-priority job urgent in queue q"}
    assert sentences("team-b") == {"preempted by a higher-priority job of another tenant"}
