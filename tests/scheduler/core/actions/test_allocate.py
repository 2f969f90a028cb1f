from tests.scheduler.core.builders import binds, make_job, make_node, make_queue, make_task, run


def test_gang_binds_all_or_nothing():
    jobs = [
        make_job("big", "q", [make_task(f"b{i}", gpu=8) for i in range(3)], 1),
        make_job("small", "q", [make_task(f"s{i}", gpu=4) for i in range(2)], 2),
    ]
    result = run([make_node("n1"), make_node("n2")], [make_queue("q")], jobs)
    assert binds(result) == {"s0": "n1", "s1": "n1"}
    assert result.pending_reasons["big"] == (
        "gang needs 3 pods of 8 GPUs; 1 node has 8 free GPUs (largest other free block: 0)"
    )


def test_node_selector_reason():
    job = make_job("j", "q", [make_task("t", node_selector=(("gpu-model", "H100"),))], 1)
    result = run([make_node("n1", labels=(("gpu-model", "A100"),))], [make_queue("q")], [job])
    assert result.pending_reasons == {"j": "no node matches node selector gpu-model=H100"}


def test_pending_job_waits_for_enqueue_when_enqueue_rejects():
    from scheduler.core.resources import Resources
    from scheduler.core.types import PodGroupPhase

    job = make_job(
        "j",
        "q",
        [make_task("t", gpu=8)],
        1,
        phase=PodGroupPhase.PENDING,
        min_resources=Resources({"gpu": 8}),
    )
    result = run([make_node("n1")], [make_queue("q", capability={"gpu": 4})], [job])
    assert binds(result) == {}
    assert result.phases == {"j": "Pending"}
    assert "cannot admit" in result.pending_reasons["j"]


def test_unknown_queue_and_empty_job_do_not_crash():
    jobs = [
        make_job("lost", "nope", [make_task("l0")], 1),
        make_job("empty", "q", [], 2),
        make_job("ghost", "q", [make_task("g0", status="Running", node=None)], 3),
    ]
    result = run([make_node("n1")], [make_queue("q")], jobs)
    assert result.pending_reasons == {"lost": "queue 'nope' does not exist"}
    assert result.queues["q"].allocated.get("gpu") == 1
