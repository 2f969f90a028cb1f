import pytest

from scheduler.core.config import ConfigError
from scheduler.core.plugins import rescheduling
from tests.scheduler.core.builders import GI, make_job, make_node, make_queue, make_task, res, run

TIERS = [
    {
        "plugins": [
            {"name": "priority"},
            {"name": "gang"},
            {"name": "rescheduling", "arguments": {"interval": "5m"}},
        ]
    }
]


def _cluster():
    nodes = [
        make_node("n1", gpu=0, cpu=8000, memory=64 * GI),
        make_node("n2", gpu=0, cpu=8000, memory=64 * GI),
    ]
    jobs = [
        make_job(
            f"w{i}",
            "q",
            [make_task(f"w{i}-0", requests=res(cpu=2000), status="Running", node="n1")],
            i,
            priority=i,
        )
        for i in range(3)
    ]
    return nodes, [make_queue("q")], jobs


@pytest.mark.parametrize(
    ("now", "expected"),
    [pytest.param(1000.0, ["w0-0"], id="interval-elapsed"), pytest.param(100.0, [], id="too-soon")],
)
def test_runs_only_when_the_interval_has_passed(now, expected):
    from scheduler.core.config import parse_conf
    from scheduler.core.cycle import run_cycle
    from scheduler.core.types import Snapshot

    nodes, queues, jobs = _cluster()
    conf = parse_conf({"actions": "allocate, preempt", "tiers": TIERS})
    snapshot = Snapshot(tuple(nodes), tuple(queues), tuple(jobs), now=now, last_rescheduling=0.0)
    result = run_cycle(snapshot, conf)
    assert [e.task for e in result.evictions] == expected
    assert all(e.action == "rescheduling" for e in result.evictions)


@pytest.mark.parametrize(
    ("interval", "seconds"),
    [
        pytest.param("5m", 300, id="minutes"),
        pytest.param("30s", 30, id="seconds"),
        pytest.param(12, 12, id="number"),
    ],
)
def test_interval_parsing(interval, seconds):
    assert rescheduling.build({"interval": interval}).interval == seconds


def test_bad_interval_names_the_field():
    with pytest.raises(ConfigError) as info:
        rescheduling.build({"interval": "soon"})
    assert info.value.field == "interval"


def test_victims_leave_only_through_the_preempt_action():
    nodes, queues, jobs = _cluster()
    assert run(nodes, queues, jobs, actions="allocate", tiers=TIERS).evictions == ()


# loop guards ----------------------------------------------------------------------------------
def _guarded_tiers(guards: bool, **arguments):
    return [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {
            "plugins": [
                {"name": "predicates"},
                {"name": "proportion"},
                {"name": "binpack", "arguments": {"binpack.cpu": 1}},
                {
                    "name": "rescheduling",
                    "arguments": {"interval": "5m", "loopGuards": guards, **arguments},
                },
            ]
        },
    ]


def _hot_warm_cold(warm_pods: int = 2, queue_kw=None):
    """n1 runs 3 pods of 2 cpu (75%: above the 50% target), n2 runs ``warm_pods``, n3 is
    empty (below the 20% low threshold)."""
    from scheduler.core.resources import Resources

    nodes = [make_node(f"n{i}", gpu=0, cpu=8000, memory=64 * GI) for i in (1, 2, 3)]
    pod = Resources({"cpu": 2000, "memory": GI})
    placed = [("n1", 3), ("n2", warm_pods)]
    jobs = []
    for node, count in placed:
        for i in range(count):
            name = f"{node}-job{i}"
            jobs.append(
                make_job(
                    name,
                    "q",
                    [make_task(f"{name}-0", requests=pod, status="Running", node=node)],
                    created=len(jobs),
                )
            )
    return nodes, [make_queue("q", **(queue_kw or {}))], jobs


def _cycle(nodes, queues, jobs, tiers, now=1000.0, rescheduled=()):
    from scheduler.core.config import parse_conf
    from scheduler.core.cycle import run_cycle
    from scheduler.core.types import Snapshot

    conf = parse_conf({"actions": "allocate, preempt", "tiers": tiers})
    snapshot = Snapshot(
        tuple(nodes), tuple(queues), tuple(jobs), now=now, rescheduled=tuple(rescheduled)
    )
    return run_cycle(snapshot, conf)


def _requeued(jobs, task_name):
    """The jobs after an eviction's pod is gone: that pod pending again."""
    from dataclasses import replace

    from scheduler.core.types import TaskStatus

    out = []
    for job in jobs:
        tasks = tuple(
            replace(t, status=TaskStatus.PENDING, node=None) if t.name == task_name else t
            for t in job.tasks
        )
        out.append(replace(job, tasks=tasks))
    return out


def test_without_guards_binpack_puts_the_moved_pod_straight_back():
    """The loop upstream's plugin makes with binpack: evicted off n1, placed back on n1."""
    nodes, queues, jobs = _hot_warm_cold()
    first = _cycle(nodes, queues, jobs, _guarded_tiers(False))
    assert [(e.task, e.node, e.action) for e in first.evictions] == [
        ("n1-job2-0", "n1", "rescheduling")
    ]
    second = _cycle(nodes, queues, _requeued(jobs, "n1-job2-0"), _guarded_tiers(False))
    assert [(b.task, b.node) for b in second.binds] == [("n1-job2-0", "n1")]


def test_guards_evict_nothing_when_the_dry_run_lands_on_a_busy_node():
    nodes, queues, jobs = _hot_warm_cold()
    result = _cycle(nodes, queues, jobs, _guarded_tiers(True))
    assert result.evictions == ()
    assert result.rescheduling_ran


def test_guards_move_a_pod_that_lands_on_a_cold_node_and_keep_it_off_its_old_node():
    from scheduler.core.types import Rescheduled

    nodes, queues, jobs = _hot_warm_cold(warm_pods=4)  # n2 full: the dry run lands on n3
    first = _cycle(nodes, queues, jobs, _guarded_tiers(True))
    assert [(e.task, e.node) for e in first.evictions] == [("n1-job2-0", "n1")]
    history = [Rescheduled("n1-job2", "n1-job2-0", "n1", 1000.0)]
    second = _cycle(
        nodes, queues, _requeued(jobs, "n1-job2-0"), _guarded_tiers(True), 1030.0, history
    )
    assert [(b.task, b.node) for b in second.binds] == [("n1-job2-0", "n3")]


@pytest.mark.parametrize(
    ("minutes_ago", "evicted"),
    [
        # n1-job2 moved 30 minutes ago: the next pod in victim order goes instead
        pytest.param(30, ["n1-job1-0"], id="within-the-window"),
        pytest.param(61, ["n1-job2-0"], id="after"),
    ],
)
def test_guards_spend_one_eviction_per_job_per_window(minutes_ago, evicted):
    from scheduler.core.types import Rescheduled

    nodes, queues, jobs = _hot_warm_cold(warm_pods=4)
    history = [Rescheduled("n1-job2", "n1-job2-0", "n2", 1000.0 - minutes_ago * 60)]
    result = _cycle(nodes, queues, jobs, _guarded_tiers(True), 1000.0, history)
    assert [e.task for e in result.evictions] == evicted


def test_guards_spare_queues_that_are_not_reclaimable():
    nodes, queues, jobs = _hot_warm_cold(warm_pods=4, queue_kw={"reclaimable": False})
    assert _cycle(nodes, queues, jobs, _guarded_tiers(True)).evictions == ()


def test_guards_spare_a_queue_that_could_not_take_the_pod_back():
    # Capability 10 cpu, 14 allocated: once out, the pod would wait for quota, not move.
    nodes, queues, jobs = _hot_warm_cold(warm_pods=4, queue_kw={"capability": {"cpu": 10000}})
    assert _cycle(nodes, queues, jobs, _guarded_tiers(True)).evictions == ()


def test_budget_window_is_an_argument():
    plugin = rescheduling.build({"loopGuards": True, "evictionBudgetWindow": "2h"})
    assert (plugin.guards, plugin.budget_window) == (True, 7200)
    with pytest.raises(ConfigError) as info:
        rescheduling.build({"loopGuards": "yes"})
    assert info.value.field == "loopGuards"


def test_guards_do_not_move_a_pod_that_would_make_its_new_node_as_hot():
    """One 6-cpu pod makes either 8-cpu node 75% busy: moving it only swaps which node is hot,
    and next interval it would move back (a ping-pong the soak found)."""
    from scheduler.core.resources import Resources

    nodes = [make_node(f"n{i}", gpu=0, cpu=8000, memory=64 * GI) for i in (1, 2)]
    big = Resources({"cpu": 6000, "memory": GI})
    job = make_job("big", "q", [make_task("big-0", requests=big, status="Running", node="n1")])
    tiers = _guarded_tiers(True)
    assert _cycle(nodes, [make_queue("q")], [job], tiers).evictions == ()
    # without the guards upstream's plugin moves it (and would move it back)
    assert [
        e.task for e in _cycle(nodes, [make_queue("q")], [job], _guarded_tiers(False)).evictions
    ] == ["big-0"]
