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
