from scheduler.core.config import parse_conf
from scheduler.core.session import Session
from scheduler.core.statement import Statement
from scheduler.core.types import Snapshot, TaskStatus
from tests.scheduler.core.builders import make_job, make_node, make_queue, make_task


def _session() -> Session:
    conf = parse_conf({"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}]}]})
    return Session(
        Snapshot(
            (make_node("n1", gpu=4),),
            (make_queue("q"),),
            (
                make_job("old", "q", [make_task("o0", gpu=2, status="Running", node="n1")], 1),
                make_job("new", "q", [make_task("t0", gpu=2), make_task("t1", gpu=2)], 2),
            ),
        ),
        conf,
    )


def test_discard_restores_everything_in_reverse():
    ssn = _session()
    node = ssn.nodes["n1"]
    before = (node.idle, node.releasing, node.pipelined)
    stmt = Statement(ssn)
    stmt.allocate(ssn.tasks["t0"], "n1")
    stmt.evict(ssn.tasks["o0"], "preempt", "test", ssn.tasks["t1"])
    stmt.pipeline(ssn.tasks["t1"], "n1")
    stmt.discard()
    assert (node.idle, node.releasing, node.pipelined) == before
    assert [ssn.tasks[n].status for n in ("o0", "t0", "t1")] == [
        TaskStatus.RUNNING,
        TaskStatus.PENDING,
        TaskStatus.PENDING,
    ]
    assert ssn.binds == ssn.evictions == ssn.pipelines == []


def test_commit_turns_operations_into_decisions():
    ssn = _session()
    stmt = Statement(ssn)
    stmt.evict(ssn.tasks["o0"], "preempt", "because", ssn.tasks["t1"])
    stmt.pipeline(ssn.tasks["t1"], "n1")
    stmt.allocate(ssn.tasks["t0"], "n1")
    stmt.commit()
    assert [(b.task, b.node) for b in ssn.binds] == [("t0", "n1")]
    assert [(e.task, e.preemptor_task, e.action) for e in ssn.evictions] == [
        ("o0", "t1", "preempt")
    ]
    assert [(p.task, p.node) for p in ssn.pipelines] == [("t1", "n1")]


def test_partial_discard_keeps_earlier_operations():
    ssn = _session()
    stmt = Statement(ssn)
    stmt.allocate(ssn.tasks["t0"], "n1")
    mark = stmt.mark()
    stmt.evict(ssn.tasks["o0"], "reclaim", "r", ssn.tasks["t1"])
    stmt.discard(mark)
    assert ssn.tasks["o0"].status is TaskStatus.RUNNING
    assert ssn.tasks["t0"].status is TaskStatus.ALLOCATED
