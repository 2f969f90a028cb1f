"""rows_update and rows_insert write what a save() per row would, in a few statements."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.cluster.models import Node, SimulatedPod
from portal.jobs.models import Job
from scheduler.adapters import bulk
from scheduler.adapters.bulk import rows_insert, rows_update
from tests.factories import JobFactory, NodeFactory, QueueFactory

pytestmark = pytest.mark.django_db
AT = datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=UTC)


def test_rows_update_gives_each_row_its_own_values_and_leaves_the_others_alone():
    queue = QueueFactory()
    jobs = [JobFactory(queue=queue, pending_reason="old") for _ in range(4)]
    rows = [
        (jobs[0].id, 'waits for "8" GPUs; it\'s fine', AT),
        (jobs[1].id, "", AT + timedelta(microseconds=1)),
        (jobs[2].id, "ünïcode reason", None),
    ]

    assert rows_update(Job, ["pending_reason", "pending_reason_at"], rows) == 3

    got = dict(Job.objects.values_list("id", "pending_reason"))
    assert [got[job.id] for job in jobs] == [
        'waits for "8" GPUs; it\'s fine',
        "",
        "ünïcode reason",
        "old",
    ]
    at = dict(Job.objects.values_list("id", "pending_reason_at"))
    assert [at[job.id] for job in jobs[:3]] == [AT, AT + timedelta(microseconds=1), None]


def test_rows_update_sets_the_same_values_on_every_row_once():
    queue = QueueFactory()
    jobs = [JobFactory(queue=queue, priority=1) for _ in range(3)]

    with CaptureQueriesContext(connection) as queries:
        rows_update(
            Job,
            ["priority"],
            [(jobs[0].id, 5), (jobs[1].id, 7)],
            same={"pending_reason": "same for all", "pending_reason_at": AT},
        )

    assert len(queries) == 1
    got = {j.id: (j.priority, j.pending_reason, j.pending_reason_at) for j in Job.objects.all()}
    assert [got[job.id] for job in jobs] == [
        (5, "same for all", AT),
        (7, "same for all", AT),
        (1, "", None),
    ]


def test_rows_update_writes_json_and_integer_columns():
    first, second = NodeFactory(name="a"), NodeFactory(name="b")

    rows_update(
        Node,
        ["labels", "gpu_count", "schedulable"],
        [(first.id, {"zone": "z1", "quote": '"'}, 4, False), (second.id, {}, 16, True)],
    )

    assert list(
        Node.objects.order_by("name").values_list("labels", "gpu_count", "schedulable")
    ) == [
        ({"zone": "z1", "quote": '"'}, 4, False),
        ({}, 16, True),
    ]


def test_rows_update_splits_many_rows_into_batches(monkeypatch):
    monkeypatch.setattr(bulk, "BATCH", 2)
    monkeypatch.setattr(bulk, "DOCUMENT_BATCH", 2)
    queue = QueueFactory()
    jobs = [JobFactory(queue=queue) for _ in range(5)]

    with CaptureQueriesContext(connection) as queries:
        rows_update(Job, ["pending_reason"], [(job.id, f"reason {job.id}") for job in jobs])

    assert len([q for q in queries if q["sql"].startswith("UPDATE")]) == 3
    assert {job.id: f"reason {job.id}" for job in jobs} == dict(
        Job.objects.values_list("id", "pending_reason")
    )


def test_rows_update_of_nothing_runs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert rows_update(Job, ["pending_reason"], []) == 0


def test_rows_update_falls_back_to_bulk_update_on_an_old_sqlite(monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite before 3.33 lacks UPDATE ... FROM")
    monkeypatch.setattr(connection.Database, "sqlite_version_info", (3, 31, 1))
    job = JobFactory()

    with CaptureQueriesContext(connection) as queries:
        rows_update(Job, ["pending_reason"], [(job.id, "later")], same={"pending_reason_at": AT})

    assert "CASE WHEN" in queries[-1]["sql"]
    job.refresh_from_db()
    assert (job.pending_reason, job.pending_reason_at) == ("later", AT)


def test_rows_insert_stores_what_bulk_create_stores():
    def pods(prefix):
        return [
            SimulatedPod(
                name=f"{prefix}-{i}",
                node_name="node-1",
                labels={"gpuportal.io/job-id": str(i), "quote": 'a "b" \\ c'},
                annotations={},
                requests={"cpu": 1000, "nvidia.com/gpu": i},
                run_seconds=600 if i else None,
                started_at=AT if i else None,
            )
            for i in range(3)
        ]

    columns = ("namespace", "node_name", "labels", "requests", "phase", "run_seconds")
    SimulatedPod.objects.bulk_create(pods("bulk"))
    assert rows_insert(SimulatedPod, pods("rows")) == 3

    def stored(prefix):
        return [
            (pod.name.split("-", 1)[1], [getattr(pod, c) for c in columns], pod.started_at)
            for pod in SimulatedPod.objects.filter(name__startswith=prefix).order_by("name")
        ]

    assert stored("rows") == stored("bulk")
    assert all(p.created_at is not None for p in SimulatedPod.objects.all())


def test_rows_insert_of_nothing_runs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert rows_insert(SimulatedPod, []) == 0
