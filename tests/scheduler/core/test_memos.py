"""Every memo decides exactly what the plain path decides, and is actually used.

Each test runs a cycle with the memo, then with it defeated (the answer recomputed on every
call), and compares the whole results: placements, evictions, reasons. It also counts the work
the memo saves, so a memo that is never hit (for example because equal keys hash differently)
fails the test instead of passing it vacuously.
"""

from __future__ import annotations

import dataclasses
import random

import pytest

from scheduler.core.actions import allocate, preempt, reclaim
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.plugins import proportion
from scheduler.core.resources import Resources
from scheduler.core.session import Session
from scheduler.core.synthetic import synthetic_snapshot
from tests.scheduler.core.strategies import _confs

# A scalar nobody asks for: a request stating it at 0 equals one leaving it out, and both
# spellings must share one memo entry.
ZERO_SCALAR = "example.com/fpga"


def _memo_snapshot(seed: int, running: float, tenants: int = 0):
    """The synthetic cluster with the running jobs crowded into two queues, so the other queues
    starve and reclaim has work, and a third of the pods re-spelled with an explicit zero."""
    rng = random.Random(seed)
    snapshot = synthetic_snapshot(32, 200, 5, seed, running, tenants)
    crowded = [snapshot.queues[0].name, snapshot.queues[1].name]
    jobs = []
    for job in snapshot.jobs:
        tasks = []
        for task in job.tasks:
            if rng.random() < 0.33:
                spelled = Resources({**task.requests.explicit(), ZERO_SCALAR: 0})
                task = dataclasses.replace(task, requests=spelled)
            tasks.append(task)
        if any(t.node for t in tasks):
            job = dataclasses.replace(job, queue=crowded[len(jobs) % 2])
        jobs.append(dataclasses.replace(job, tasks=tuple(tasks)))
    return dataclasses.replace(snapshot, jobs=tuple(jobs))


# (seed, running fraction, tenants)
CASES = [
    (seed, running, tenants)
    for seed in range(3)
    for running, tenants in ((0.5, 0), (0.8, 0), (0.8, 2))
]


class _Forgetful(dict):
    """A memo table that stores but never answers: every lookup takes the plain path."""

    def get(self, key, default=None):
        return default


def _forget(monkeypatch, attribute: str, owner=Session) -> None:
    init = owner.__init__

    def forgetful_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        setattr(self, attribute, _Forgetful())

    monkeypatch.setattr(owner, "__init__", forgetful_init)


def _counting(monkeypatch, owner, name: str) -> list[int]:
    """Count the calls of ``owner.name`` (the work a memo saves)."""
    calls = [0]
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _fresh_key(*args, **kwargs):
    return (object(),)  # equal to no earlier key: the failure memo never answers


def test_requests_equal_by_value_share_a_hash():
    spelled = Resources({"cpu": 1000, "gpu": 0})
    assert spelled == Resources({"cpu": 1000})
    assert hash(spelled) == hash(Resources({"cpu": 1000}))
    assert {spelled: 1}.get(Resources({"cpu": 1000})) == 1
    cap = Resources.unlimited({"gpu": 4, "cpu": float("inf")})
    assert hash(cap) == hash(Resources.unlimited({"gpu": 4}))
    assert hash(Resources({"gpu": 1})) != hash(Resources({"gpu": 2}))


@pytest.mark.parametrize("seed", range(10))
def test_equal_vectors_hash_alike(seed):
    rng = random.Random(seed)

    def vector():
        names = rng.sample(["cpu", "memory", "gpu", "pods", "x/y"], rng.randint(0, 5))
        default = rng.choice([0.0, float("inf")])
        return Resources({n: rng.choice([0, 0.0, 1, default]) for n in names}, default)

    pairs = [(vector(), vector()) for _ in range(300)]
    assert any(a == b and a.explicit() != b.explicit() for a, b in pairs)
    for left, right in pairs:
        if left == right:
            assert hash(left) == hash(right), (left, right)


def _compare(monkeypatch, conf, counted, defeat) -> int:
    """Run every case with the memo and with ``defeat`` applied; the results must be equal.
    Returns how many calls of ``counted`` (owner, name) the memo saved over all cases: a memo
    may have nothing to do in one cluster, but over all of them it must save work."""
    saved = 0
    for seed, running, tenants in CASES:
        snapshot = _memo_snapshot(seed, running, tenants)
        with monkeypatch.context() as patch:
            calls = _counting(patch, *counted)
            fast = run_cycle(snapshot, conf)
        with monkeypatch.context() as patch:
            defeat(patch)
            plain_calls = _counting(patch, *counted)
            assert run_cycle(snapshot, conf) == fast, (seed, running, tenants)
        assert plain_calls[0] >= calls[0]
        saved += plain_calls[0] - calls[0]
    return saved


def test_infeasible_cache_decides_like_trying_every_node(monkeypatch):
    saved = _compare(
        monkeypatch,
        default_conf(),
        (allocate, "choose_node"),
        lambda patch: _forget(patch, "infeasible", allocate.AllocateState),
    )
    assert saved > 0


def test_explain_memo_says_what_the_plugins_say(monkeypatch):
    saved = _compare(
        monkeypatch,
        default_conf(),
        (Session, "_explain_quota"),
        lambda patch: _forget(patch, "_explain_memo"),
    )
    assert saved > 0


def test_reclaim_failure_memo_decides_like_retrying(monkeypatch):
    saved = _compare(
        monkeypatch,
        default_conf(),
        (Session, "predicate_for_preempt"),
        lambda patch: patch.setattr(reclaim, "_shape_key", _fresh_key),
    )
    assert saved > 0


@pytest.mark.parametrize("conf", ["default", "drf"])
def test_preempt_failure_memo_decides_like_retrying(monkeypatch, conf):
    # drf judges by the preemptor's own job (a declared capability): its failures are per job
    saved = _compare(
        monkeypatch,
        default_conf() if conf == "default" else _confs()[conf],
        (preempt, "preempt"),
        lambda patch: patch.setattr(preempt, "_shape_key", _fresh_key),
    )
    assert saved > 0


def _give_each_time(self, attr):
    return proportion._gives(attr.allocated, attr.deserved)


def test_proportion_give_memo_decides_like_asking_each_time(monkeypatch):
    # The flat proportion plugin (the hierarchical one keeps no such memo).
    saved = _compare(
        monkeypatch,
        _confs()["plain"],
        (proportion, "_gives"),
        lambda patch: patch.setattr(proportion.ProportionPlugin, "_may_give", _give_each_time),
    )
    assert saved > 0


def test_the_memo_clusters_have_reclaim_work():
    results = [run_cycle(_memo_snapshot(*case), default_conf()) for case in CASES]
    assert all(any(e.action == "reclaim" for e in r.evictions) for r in results[:2])
    assert sum(len(r.binds) for r in results) > 0
