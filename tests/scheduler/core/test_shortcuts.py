"""Speed shortcuts must decide exactly what the slow paths decide; bench and reasons checks."""

import json

import pytest

from scheduler.__main__ import main
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle, run_cycle_timed
from scheduler.core.session import Session
from scheduler.core.synthetic import synthetic_snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task, run


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("running", [0.0, 0.4, 0.8])
def test_sort_keys_decide_like_compare_functions(monkeypatch, seed, running):
    snapshot = synthetic_snapshot(24, 160, 4, seed, running)
    fast = run_cycle(snapshot, default_conf())
    monkeypatch.setattr(Session, "_key_fn", lambda self, hook, fallback: None)
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
    assert set(out["action_seconds"]) >= {"allocate", "preempt", "reclaim"}


def test_quota_reason_says_what_the_job_needs():
    nodes = [make_node(f"n{i}") for i in range(3)]
    queues = [make_queue("nlp-train", weight=14), make_queue("cv", weight=10)]
    jobs = [
        make_job("big", "nlp-train", [make_task(f"big-{i}", gpu=8) for i in range(4)], 1),
        make_job("other", "cv", [make_task(f"o-{i}", gpu=8) for i in range(2)], 0),
    ]
    reason = run(nodes, queues, jobs).pending_reasons["big"]
    assert reason.startswith("job needs 32 GPUs (4 pods x 8); queue nlp-train deserves ")
    assert "GPUs allocated" in reason
