"""Dispatchers combine plugin answers the way framework/session_plugins.go does."""

from dataclasses import fields, replace

import pytest

from scheduler.core.config import parse_conf
from scheduler.core.resources import Resources
from scheduler.core.session import Session, with_allocatable
from scheduler.core.types import GpuDevice, NodeInfo, Snapshot, Taint, Vote
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


def session(tiers) -> Session:
    conf = parse_conf({"actions": "allocate", "tiers": tiers})
    snapshot = Snapshot(
        (make_node("n1"),),
        (make_queue("q"),),
        (
            make_job(
                "victim",
                "q",
                [make_task(f"v{i}", status="Running", node="n1") for i in range(3)],
                1,
            ),
            make_job("pre", "q", [make_task("p0")], 2),
        ),
    )
    return Session(snapshot, conf)


def _tiers(*names_per_tier):
    return [{"plugins": [{"name": n} for n in names]} for names in names_per_tier]


def _victims(ssn, answers):
    """Register fake preemptable fns: plugin name -> (chosen task names, vote)."""
    tasks = [ssn.tasks[f"v{i}"] for i in range(3)]
    for plugin, (names, vote) in answers.items():
        chosen = [t for t in tasks if t.name in names]
        ssn.add_preemptable_fn(plugin, lambda p, c, chosen=chosen, vote=vote: (chosen, vote))
    return sorted(t.name for t in ssn.preemptable(ssn.tasks["p0"], tasks))


@pytest.mark.parametrize(
    ("tiers", "answers", "expected"),
    [
        pytest.param(
            _tiers(["gang", "drf"]),
            {"gang": ({"v0", "v1"}, Vote.PERMIT), "drf": ({"v1", "v2"}, Vote.PERMIT)},
            ["v1"],
            id="intersection-within-a-tier",
        ),
        pytest.param(
            _tiers(["gang"], ["drf"]),
            {"gang": ({"v0"}, Vote.PERMIT), "drf": ({"v1", "v2"}, Vote.PERMIT)},
            ["v0"],
            id="first-tier-with-victims-wins",
        ),
        pytest.param(
            _tiers(["gang"], ["drf"]),
            {"gang": (set(), Vote.PERMIT), "drf": ({"v2"}, Vote.PERMIT)},
            ["v2"],
            id="an-empty-tier-lets-the-next-speak",
        ),
        pytest.param(
            _tiers(["gang"], ["drf"]),
            {"gang": ({"v0"}, Vote.ABSTAIN), "drf": ({"v2"}, Vote.PERMIT)},
            ["v2"],
            id="an-abstaining-tier-lets-the-next-speak",
        ),
        pytest.param(
            _tiers(["gang", "drf"]),
            {"gang": ({"v0"}, Vote.ABSTAIN), "drf": ({"v2"}, Vote.PERMIT)},
            ["v2"],
            id="abstain-is-ignored",
        ),
    ],
)
def test_preemptable_combines_tiers(tiers, answers, expected):
    assert _victims(session(tiers), answers) == expected


def test_disabled_hook_is_skipped():
    tiers = [{"plugins": [{"name": "gang", "enablePreemptable": False}, {"name": "drf"}]}]
    ssn = session(tiers)
    answers = {"gang": ({"v0"}, Vote.PERMIT), "drf": ({"v1"}, Vote.PERMIT)}
    assert _victims(ssn, answers) == ["v1"]


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        pytest.param([[Vote.PERMIT, Vote.ABSTAIN]], True, id="permit"),
        pytest.param([[Vote.PERMIT, Vote.REJECT]], False, id="reject-wins"),
        pytest.param([[Vote.ABSTAIN], [Vote.REJECT]], False, id="abstain-walks-on"),
        pytest.param([[Vote.PERMIT], [Vote.REJECT]], True, id="permit-stops-at-its-tier"),
        pytest.param([], True, id="nobody-answers"),
    ],
)
def test_job_enqueueable_votes(votes, expected):
    names = iter(["drf", "gang", "proportion", "capacity"])
    tiers, fns = [], []
    for tier_votes in votes:
        plugins = []
        for vote in tier_votes:
            name = next(names)
            plugins.append({"name": name})
            fns.append((name, vote))
        tiers.append({"plugins": plugins})
    ssn = session(tiers or _tiers(["gang"]))
    for name, vote in fns:
        ssn.add_job_enqueueable_fn(name, lambda job, vote=vote: vote)
    assert ssn.job_enqueueable(ssn.jobs["pre"]) is expected


def test_job_order_falls_back_to_creation_then_name():
    ssn = session(_tiers(["gang"]))
    jobs = ssn.sorted_jobs([ssn.jobs["pre"], ssn.jobs["victim"]])
    assert [j.name for j in jobs] == ["victim", "pre"]


def test_tasks_order_by_priority_then_natural_name():
    conf = parse_conf({"actions": "allocate", "tiers": _tiers(["gang"])})
    tasks = [make_task(n) for n in ("p-10", "p-2", "p-1")] + [make_task("z", priority=5)]
    ssn = Session(
        Snapshot((make_node("n1"),), (make_queue("q"),), (make_job("j", "q", tasks),)), conf
    )
    order = ssn.sorted_tasks(list(ssn.jobs["j"].tasks.values()))
    assert [t.name for t in order] == ["z", "p-1", "p-2", "p-10"]


def test_cycle_state_makes_an_entry_once_per_key_and_keeps_empty_ones():
    from scheduler.core.session import CycleState

    state, made = CycleState(), []

    def factory():
        made.append(1)
        return {}

    first = state.get("a", factory)
    assert state.get("a", factory) is first
    assert made == [1]  # an empty entry is kept, not made again
    assert state.get("b", factory) is not first


def test_with_allocatable_copies_every_other_field_as_replace_does():
    info = NodeInfo(
        "n1",
        Resources({"gpu": 8}),
        labels=(("zone", "a"),),
        unschedulable=True,
        taints=(Taint("dedicated", "x", "NoSchedule"),),
        gpus=(GpuDevice(0, memory=80, model="A100"),),
        used_by_others=Resources({"gpu": 1}),
        gpus_used_by_others=((0, 500, 40),),
    )
    # a field NodeInfo gains must be copied too: every field above has a non-default value
    assert {f.name for f in fields(NodeInfo)} == {
        "name",
        "allocatable",
        "labels",
        "unschedulable",
        "taints",
        "gpus",
        "used_by_others",
        "gpus_used_by_others",
    }
    pods = Resources({"gpu": 8, "pods": 110})
    assert with_allocatable(info, pods) == replace(info, allocatable=pods)
