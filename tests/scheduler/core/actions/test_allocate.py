from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core.actions.allocate import _Hopeless
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.session import Session
from scheduler.core.synthetic import synthetic_snapshot
from tests.scheduler.core.builders import binds, make_job, make_node, make_queue, make_task, run
from tests.scheduler.core.strategies import contended_snapshots, gpu_only_snapshots, snapshots


def test_gang_binds_all_or_nothing():
    jobs = [
        make_job("big", "q", [make_task(f"b{i}", gpu=8) for i in range(3)], 1),
        make_job("small", "q", [make_task(f"s{i}", gpu=4) for i in range(2)], 2),
    ]
    result = run([make_node("n1"), make_node("n2")], [make_queue("q")], jobs)
    assert binds(result) == {"s0": "n1", "s1": "n1"}
    # Two 8-GPU nodes can never hold three 8-GPU pods at once, whatever else runs.
    assert result.pending_reasons["big"] == (
        "can never run as submitted: its gang needs 3 pods of 8 GPUs running together and the "
        "2 nodes it may use hold at most 2 of them; lower min_available to 2 or ask for "
        "smaller pods"
    )
    assert result.pending_kinds["big"] == "never"


def test_gang_that_fits_an_empty_cluster_waits_with_the_free_blocks():
    jobs = [
        make_job("small", "q", [make_task("s0", gpu=4, status="Running", node="n1")], 0),
        make_job("big", "q", [make_task(f"b{i}", gpu=8) for i in range(2)], 1),
    ]
    result = run([make_node("n1"), make_node("n2")], [make_queue("q")], jobs)
    assert result.pending_reasons["big"] == (
        "gang needs 2 pods of 8 GPUs; 1 node has 8 free GPUs (largest other free block: 4)"
    )
    assert result.pending_kinds["big"] == "waits"


def test_node_selector_reason():
    job = make_job("j", "q", [make_task("t", node_selector=(("gpu-model", "H100"),))], 1)
    result = run([make_node("n1", labels=(("gpu-model", "A100"),))], [make_queue("q")], [job])
    assert result.pending_reasons == {
        "j": "can never run as submitted: no node matches its node selector gpu-model=H100; "
        "change or drop the selector"
    }
    assert result.pending_kinds == {"j": "never"}


def test_pending_job_waits_for_enqueue_when_enqueue_rejects():
    from scheduler.core.resources import Resources
    from scheduler.core.types import PodGroupPhase

    running = make_job("r", "q", [make_task("r0", gpu=4, status="Running", node="n1")], 0)
    job = make_job(
        "j",
        "q",
        [make_task("t", gpu=8)],
        1,
        phase=PodGroupPhase.PENDING,
        min_resources=Resources({"gpu": 8}),
    )
    nodes = [make_node("n1"), make_node("n2")]
    result = run(nodes, [make_queue("q", capability={"gpu": 8})], [running, job])
    assert binds(result) == {}
    assert result.phases["j"] == "Pending"
    assert "cannot admit" in result.pending_reasons["j"]
    assert result.pending_kinds["j"] == "waits"  # the 4 GPUs running in q will end


def test_unknown_queue_and_empty_job_do_not_crash():
    jobs = [
        make_job("lost", "nope", [make_task("l0")], 1),
        make_job("empty", "q", [], 2),
        make_job("ghost", "q", [make_task("g0", status="Running", node=None)], 3),
    ]
    result = run([make_node("n1")], [make_queue("q")], jobs)
    assert result.pending_reasons == {
        "lost": "can never run as submitted: queue 'nope' does not exist; resubmit it to an "
        "existing queue"
    }
    assert result.queues["q"].allocated.get("gpu") == 1


# Lending skips what cannot lend ----------------------------------------------------------------
def _every_turn(snapshot):
    """The cycle with every lending turn taken (no request is ever given up on), every heap
    built up front and ordered by the compare functions."""
    with (
        patch.object(_Hopeless, "_fits_some", lambda self, request: True),
        patch.object(Session, "job_key_fn", lambda self: None),
    ):
        return run_cycle(snapshot, default_conf())


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshot=st.one_of(snapshots(), contended_snapshots(), gpu_only_snapshots(guarantees=False)))
def test_lending_skips_only_turns_that_lend_nothing(snapshot):
    assert run_cycle(snapshot, default_conf()) == _every_turn(snapshot)


@pytest.mark.parametrize("seed", range(4))
def test_lending_on_a_full_synthetic_cluster_skips_without_changing_a_decision(seed):
    snapshot = synthetic_snapshot(40, 600, 6, seed, 0.0)
    result = run_cycle(snapshot, default_conf())
    assert result == _every_turn(snapshot)
    assert result.work_conservation.lent  # some jobs got idle capacity before the rest stopped
