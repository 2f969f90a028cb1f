"""The job lifecycle table: every (status, event) pair, legal and illegal, against a table
written out here independently; what each transition stamps; random walks of events."""

import ast
from datetime import UTC, datetime
from itertools import product
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from portal.jobs.lifecycle import (
    SCHEDULED,
    TERMINAL,
    WAITING,
    Event,
    IllegalTransition,
    Status,
    allows,
    transition,
)
from portal.jobs.models import Job

AT = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
EARLIER = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)

# (status, event) -> new status; every pair not here is illegal.
EXPECTED = {
    ("pending", "admit"): "admitted",
    ("pending", "fail"): "failed",
    ("pending", "cancel"): "cancelled",
    ("pending", "quarantine"): "quarantined",
    ("admitted", "start"): "running",
    ("admitted", "succeed"): "succeeded",
    ("admitted", "fail"): "failed",
    ("admitted", "preempt"): "preempted",
    ("admitted", "restart"): "preempted",
    ("admitted", "cancel"): "cancelled",
    ("admitted", "quarantine"): "quarantined",
    ("running", "succeed"): "succeeded",
    ("running", "fail"): "failed",
    ("running", "preempt"): "preempted",
    ("running", "restart"): "preempted",
    ("running", "cancel"): "cancelled",
    ("running", "quarantine"): "quarantined",
    ("preempted", "admit"): "admitted",
    ("preempted", "fail"): "failed",
    ("preempted", "requeue"): "pending",
    ("preempted", "cancel"): "cancelled",
    ("preempted", "quarantine"): "quarantined",
    ("quarantined", "cancel"): "cancelled",
    ("quarantined", "release"): "pending",
}
# event -> (fields set to the event's time, fields set unless already set, preemptions)
STAMPS = {
    "admit": (("admitted_at",), (), 0),
    "start": (("started_at",), (), 0),
    "succeed": (("finished_at",), ("started_at",), 0),
    "fail": (("finished_at",), (), 0),
    "preempt": ((), (), 1),
    "restart": ((), (), 0),
    "requeue": ((), (), 0),
    "cancel": (("cancelled_at", "finished_at"), (), 0),
    "quarantine": ((), (), 0),
    "release": ((), (), 0),
}
PAIRS = list(product([s.value for s in Status], [e.value for e in Event]))


@pytest.mark.parametrize(("status", "event"), PAIRS)
def test_every_status_and_event_pair(status, event):
    expected = EXPECTED.get((status, event))
    assert allows(status, Event(event)) is (expected is not None)
    if expected is None:
        with pytest.raises(IllegalTransition) as info:
            transition(status, Event(event))
        assert str(info.value).startswith(f"a {status} job cannot ")
        assert (info.value.status, info.value.event) == (status, event)
        return
    change = transition(status, Event(event))
    assert change.status == expected
    assert (change.stamps, change.kept_stamps, change.preemptions) == STAMPS[event]


def test_the_statuses_are_the_models():
    assert {s.value for s in Status} == set(Job.Status.values)
    assert Job.TERMINAL_STATUSES == TERMINAL == {"succeeded", "failed", "cancelled"}
    assert {"pending", "preempted"} == WAITING
    assert {"pending", "admitted", "running", "preempted"} == SCHEDULED


@pytest.mark.parametrize("status", ["", "archived", "PENDING"])
def test_an_unknown_status_allows_nothing(status):
    assert not any(allows(status, event) for event in Event)
    with pytest.raises(IllegalTransition):
        transition(status, Event.CANCEL)


def _job(**fields):
    values = dict.fromkeys(("admitted_at", "started_at", "finished_at", "cancelled_at"))
    return SimpleNamespace(**{"status": "pending", "preemption_count": 0, **values, **fields})


def test_apply_sets_status_stamps_and_preemptions_and_names_the_fields():
    job = _job(status="running", started_at=EARLIER)
    assert transition("running", Event.PREEMPT).apply(job, AT) == ["status", "preemption_count"]
    assert (job.status, job.preemption_count) == ("preempted", 1)

    job = _job(status="running", started_at=EARLIER)
    assert transition("running", Event.SUCCEED).apply(job, AT) == ["status", "finished_at"]
    assert (job.started_at, job.finished_at) == (EARLIER, AT)  # its start is kept


def test_a_job_that_succeeds_unseen_running_gets_a_start():
    job = _job(status="admitted")
    assert transition("admitted", Event.SUCCEED).apply(job, AT) == [
        "status",
        "finished_at",
        "started_at",
    ]
    assert (job.started_at, job.finished_at) == (AT, AT)


@given(st.lists(st.sampled_from(list(Event)), max_size=30))
def test_random_walks_end_only_in_final_statuses_that_nothing_leaves(events):
    job = _job()
    for event in events:
        if not allows(job.status, event):
            continue
        transition(job.status, event).apply(job, AT)
        # A finished job has its end time, and nothing else moves it.
        assert (job.finished_at is not None) is (job.status in TERMINAL)
        if job.status in TERMINAL:
            assert not any(allows(job.status, e) for e in Event)
        if job.status == "succeeded":
            assert job.started_at is not None
    assert job.status in {s.value for s in Status}


# Every statement in portal/ and scheduler/adapters/ that sets a `status` attribute or writes a
# `status` column in an UPDATE, by file and function: the lifecycle's own, the cycle's
# writers of its transitions' results, and three that are not about jobs.
STATUS_WRITERS = {
    ("portal/jobs/lifecycle.py", "Transition.apply", "job.status = self.status"),
    ("portal/jobs/lifecycle.py", "IllegalTransition.__init__", "self.status = status"),
    ("scheduler/adapters/persist.py", "_persist_binds", "job.status = change.status"),
    ("scheduler/adapters/persist.py", "_persist_binds", "ids_update(status=change.status)"),
    ("scheduler/adapters/persist.py", "_persist_evictions", "job.status = change.status"),
    ("scheduler/adapters/persist.py", "_persist_evictions", "rows_update(... 'status' ...)"),
    (
        "scheduler/adapters/quarantine.py",
        "Isolation.quarantine",
        "row.status = transition(row.status, Event.QUARANTINE).status",
    ),
    # Not jobs: an HTTP status on errors, and a page's filter in a template context.
    ("portal/cli/client.py", "ApiError.__init__", "self.status = status"),
    ("scheduler/adapters/cluster/base.py", "RefusedClusterError.__init__", "self.status = status"),
    ("portal/jobs/views.py", "JobListView.get_context_data", "update(status=status)"),
}
_UPDATERS = {"update", "bulk_update", "ids_update", "rows_update"}


def _status_writes(path: Path, root: Path) -> list[tuple[str, str, str]]:
    found = []

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            where = (str(path.relative_to(root)), inner)
            if isinstance(child, ast.Assign | ast.AugAssign | ast.AnnAssign):
                targets = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in targets:
                    for one in target.elts if isinstance(target, ast.Tuple) else [target]:
                        if isinstance(one, ast.Attribute) and one.attr == "status":
                            found.append((*where, ast.unparse(child)))
            if isinstance(child, ast.Call):
                func = child.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in _UPDATERS:
                    for keyword in child.keywords:
                        if keyword.arg == "status":
                            found.append((*where, f"{name}(status={ast.unparse(keyword.value)})"))
                    columns = [c for a in child.args for c in ast.walk(a)]
                    if any(isinstance(c, ast.Constant) and c.value == "status" for c in columns):
                        found.append((*where, f"{name}(... 'status' ...)"))
            visit(child, inner)

    visit(ast.parse(path.read_text()), "")
    return found


def test_job_statuses_are_written_only_with_the_lifecycles_answer():
    root = Path(__file__).resolve().parents[3]
    found = {
        write
        for package in ("portal", "scheduler/adapters")
        for path in sorted((root / package).rglob("*.py"))
        if "migrations" not in path.parts
        for write in _status_writes(path, root)
    }
    assert found == STATUS_WRITERS
