"""Evaluating one node per NodeIndex class must choose exactly what a full scan chooses, and
the index must follow every change of a node."""

import dataclasses
import random

import pytest

from scheduler.core.actions.allocate import (
    AllocateState,
    _choose_by_class,
    fits_future,
    fits_idle,
    predicate_nodes,
)
from scheduler.core.config import default_conf
from scheduler.core.cycle import open_session
from scheduler.core.node_index import NodeIndex
from scheduler.core.resources import Resources
from scheduler.core.statement import Statement
from scheduler.core.types import GpuDevice, Snapshot, TaskStatus
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
    state = AllocateState(ssn)
    for task in ssn.jobs["p"].tasks.values():
        assert state.class_equivalent(task)
        by_class, class_failures = _choose_by_class(state, task)
        by_scan, scan_failures = _full_scan(ssn, task)
        assert (by_class and by_class.name) == (by_scan and by_scan.name)
        assert class_failures == scan_failures


# The index follows every change of a node ------------------------------------------------------
GI = 1024**3


def _zone(node):
    return node.labels.get("zone")


def _cluster(seed: int):
    """Nodes with and without named cards, running pods (whole and shared cards, some
    releasing) and pending ones; the index's label, label-free and split groupings built."""
    rng = random.Random(seed)
    nodes = []
    for i in range(10):
        cards = tuple(GpuDevice(k, "A100", 80 * GI) for k in range(8)) if rng.random() < 0.5 else ()
        zone = (("zone", rng.choice("ab")),)
        nodes.append(make_node(f"n{i}", labels=zone, gpus=cards))
    jobs = []
    for j in range(12):
        node = f"n{rng.randrange(10)}"
        status = rng.choice(["Running", "Running", "Releasing"])
        gpu = rng.choice([1, 2, 0.5])
        jobs.append(
            make_job(
                f"r{j}",
                "q",
                [make_task(f"r{j}-0", status=status, node=node, requests=_req(gpu))],
                j,
            )
        )
    for j in range(8):
        gpu = rng.choice([1, 2, 4, 0.5])
        jobs.append(
            make_job(
                f"p{j}", "q", [make_task(f"p{j}-{k}", requests=_req(gpu)) for k in range(2)], 20 + j
            )
        )
    ssn = open_session(Snapshot(tuple(nodes), (make_queue("q"),), tuple(jobs)), default_conf())
    ssn.node_index.class_representatives(True)
    ssn.node_index.class_representatives(False, _zone)
    return ssn


def _req(gpu):
    return Resources({"cpu": 1000, "memory": GI, "gpu": gpu})


def _partition(reps):
    return sorted(tuple(node.name for _, node in members) for _, _, members, _ in reps)


def _check_index(ssn):
    """The incrementally kept index answers what one built afresh answers, and the members of
    each class are interchangeable (equal books, labels, taints, cards)."""
    kept, fresh = ssn.node_index, NodeIndex(ssn.node_list)
    # every node under the key of its current state (a stale key in a one-node class would
    # leave the partitions equal)
    kept_keys = {i: key for key, i in kept._loose_ids.items()}
    fresh_keys = {i: key for key, i in fresh._loose_ids.items()}
    for node in ssn.node_list:
        assert kept_keys[kept.loose.key_of[node.name]] == fresh_keys[fresh.loose.key_of[node.name]]
    for use_labels, split in ((True, None), (False, None), (False, _zone)):
        have = kept.class_representatives(use_labels, split)
        assert _partition(have) == _partition(fresh.class_representatives(use_labels, split))
        assert [position for position, *_ in have] == sorted(p for p, *_ in have)
        for position, node, members, _ in have:
            assert (position, node) == members[0]
            for _, other in members:
                assert (other.used, other.releasing, other.pipelined) == (
                    node.used,
                    node.releasing,
                    node.pipelined,
                )
                assert other.device_key() == node.device_key()
                assert other.shape == node.shape
                assert other.info.taints == node.info.taints
                if use_labels:
                    assert other.info.labels == node.info.labels
    for zone in "ab":
        have = kept.part_representatives(_zone, zone)
        want = [rep for rep in fresh.class_representatives(False, _zone) if _zone(rep[1]) == zone]
        assert _partition(have) == _partition(want)


def _watch(ssn):
    seen = []
    ssn.node_index.listeners.append(lambda node: seen.append(node.name))
    return seen


def _pending(ssn, fits):
    return next(
        t
        for t in ssn.tasks.values()
        if t.status is TaskStatus.PENDING
        for n in ssn.node_list
        if fits(t, n)
    )


def test_every_mutation_of_a_node_reaches_the_index():
    ssn = _cluster(0)
    seen = _watch(ssn)
    stmt = Statement(ssn)

    def step(mutate, node):
        before = ssn.node_index.loose.key_of[node.name]
        seen.clear()
        mutate()
        assert node.name in seen
        assert ssn.node_index.loose.key_of[node.name] != before
        _check_index(ssn)

    task = _pending(
        ssn, lambda t, n: n.devices is not None and t.gpu is not None and fits_idle(t, n)
    )
    node = next(n for n in ssn.node_list if n.devices is not None and fits_idle(task, n))
    step(lambda: stmt.allocate(task, node.name), node)
    step(stmt.discard, node)  # undoes the allocation
    step(lambda: stmt.pipeline(task, node.name), node)
    step(stmt.discard, node)
    running = next(t for t in ssn.tasks.values() if t.status is TaskStatus.RUNNING)
    host = ssn.nodes[running.node]
    step(lambda: stmt.evict(running, "preempt", "test", None), host)
    step(stmt.discard, host)
    # the node's own methods, as the session uses them while it is built
    extra = dataclasses.replace(running, status=TaskStatus.RUNNING, gpus=())
    extra.info = dataclasses.replace(running.info, name="extra")
    step(lambda: node.add_existing(extra), node)
    step(lambda: node.book_devices(extra, None), node)
    for mutate in (node.evict, node.unevict, node.unallocate, node.pipeline, node.unpipeline):
        step(lambda mutate=mutate: mutate(extra), node)
    step(lambda: node.allocate(extra), node)


@pytest.mark.parametrize("seed", range(12))
def test_the_index_matches_a_fresh_one_after_random_placements_evictions_and_rollbacks(seed):
    rng = random.Random(seed)
    ssn = _cluster(seed)
    _check_index(ssn)
    stmt = Statement(ssn)
    marks = []
    for _ in range(60):
        move = rng.choice(["allocate", "allocate", "pipeline", "evict", "mark", "back", "commit"])
        pending = [t for t in ssn.tasks.values() if t.status is TaskStatus.PENDING]
        if move in ("allocate", "pipeline") and pending:
            task = rng.choice(pending)
            fits = fits_idle if move == "allocate" else fits_future
            nodes = [n for n in ssn.node_list if fits(task, n)]
            if nodes:
                getattr(stmt, move)(task, rng.choice(nodes).name)
        elif move == "evict":
            running = [t for t in ssn.tasks.values() if t.status is TaskStatus.RUNNING]
            if running:
                stmt.evict(rng.choice(running), "preempt", "random", None)
        elif move == "mark":
            marks.append(stmt.mark())
        elif move == "back":
            stmt.discard(marks.pop() if marks else None)
        else:
            stmt.commit()
            marks.clear()
        _check_index(ssn)
