"""Evaluating one node per NodeIndex class must choose exactly what a full scan chooses."""

import random

import pytest

from scheduler.core.actions.allocate import _choose_by_class, predicate_nodes
from scheduler.core.config import default_conf
from scheduler.core.cycle import open_session
from scheduler.core.types import Snapshot
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


def _full_scan(ssn, task):
    nodes, failures = predicate_nodes(ssn, task)
    if not nodes:
        return None, failures
    idle = [n for n in nodes if task.resreq.less_equal(n.idle)]
    return ssn.best_node(task, idle or nodes), failures


@pytest.mark.parametrize("seed", range(8))
def test_class_choice_matches_full_scan(seed):
    rng = random.Random(seed)
    nodes = tuple(
        make_node(f"n{i}", gpu=rng.choice([4, 8]), labels=(("zone", rng.choice("ab")),))
        for i in range(12)
    )
    running = tuple(
        make_job(
            f"r{i}",
            "q",
            [
                make_task(
                    f"r{i}-0", gpu=rng.randint(1, 4), status="Running", node=f"n{rng.randrange(12)}"
                )
            ],
            i,
        )
        for i in range(10)
    )
    pending = make_job("p", "q", [make_task(f"p-{g}", gpu=g) for g in (1, 2, 3, 4, 6, 8)], 99)
    ssn = open_session(Snapshot(nodes, (make_queue("q"),), running + (pending,)), default_conf())
    for task in ssn.jobs["p"].tasks.values():
        assert ssn.class_equivalent(task)
        by_class, class_failures = _choose_by_class(ssn, task)
        by_scan, scan_failures = _full_scan(ssn, task)
        assert (by_class and by_class.name) == (by_scan and by_scan.name)
        assert class_failures == scan_failures
