"""The job-creation path stays lean and exact: what POST answers is what is stored, read
with the fewest statements; the detail shows every list field of the same job."""

from http import HTTPStatus

import pytest
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from portal.jobs.models import Job, JobTask
from portal.jobs.services import job_submit

pytestmark = pytest.mark.django_db

BODY = {
    "queue": "nlp-train",
    "name": "bert",
    "priority": 3,
    "tasks": [
        {"name": "master", "replicas": 1, "image": "img:1", "gpus": 2, "env": {"A": "1"}},
        {"name": "worker", "replicas": 3, "image": "img:1", "gpus": 4, "command": ["run"]},
    ],
}


def test_create_answer_is_the_stored_job(api_for, nlp_queue):
    client = api_for("researcher")
    created = client.post("/api/v1/jobs/", BODY, format="json")
    assert created.status_code == HTTPStatus.CREATED
    stored = client.get(created["Location"])
    assert stored.status_code == HTTPStatus.OK
    answer = created.json()
    assert answer.pop("warnings") == []  # what a manifest's reading says; a JSON job: nothing
    assert answer == stored.json()
    assert [task["name"] for task in answer["tasks"]] == ["master", "worker"]


def test_create_reads_nothing_back_and_adds_no_savepoint(api_for, nlp_queue):
    client = api_for("researcher")
    with CaptureQueriesContext(connection) as queries:
        response = client.post("/api/v1/jobs/", BODY, format="json")
    assert response.status_code == HTTPStatus.CREATED
    statements = [query["sql"] for query in queries.captured_queries]
    # The request's own transaction is a savepoint inside the test's; job_submit adds none.
    assert sum(sql.startswith("SAVEPOINT") for sql in statements) == 1
    reads = [sql for sql in statements if sql.startswith("SELECT")]
    # The tenant's pending pods are counted (the cap: PostgreSQL's kept count, or SQLite's
    # recount of the tasks); the job itself is never read back.
    counts = [
        sql
        for sql in reads
        if "SUM(" in sql and ('"jobs_jobtask"."replicas"' in sql or "jobs_tenantpoddelta" in sql)
    ]
    assert len(counts) == 1
    assert not [sql for sql in reads if 'FROM "jobs_job' in sql and sql not in counts]
    inserts = [sql.split("(")[0].strip() for sql in statements if sql.startswith("INSERT")]
    assert inserts == ['INSERT INTO "jobs_job"', 'INSERT INTO "jobs_jobtask"']


def test_submit_returns_the_tasks_loaded_in_stored_order(researcher, nlp_queue):
    job = job_submit(
        submitter=researcher,
        queue=nlp_queue,
        name="x",
        tasks=[{"name": name, "image": "img"} for name in ("c", "a", "b")],
    )
    with CaptureQueriesContext(connection) as queries:
        loaded = [(task.pk, task.name, task.job_id) for task in job.tasks.all()]
    assert len(queries) == 0
    stored = list(JobTask.objects.filter(job=job).values_list("pk", "name", "job_id"))
    assert loaded == stored
    assert [name for _, name, _ in loaded] == ["c", "a", "b"]


def test_refused_submission_leaves_the_callers_transaction_usable(researcher, nlp_queue):
    """The submit form catches job_submit's errors and goes on querying to re-render."""
    with transaction.atomic():
        with pytest.raises(ValidationError):
            job_submit(submitter=researcher, queue=nlp_queue, name="x", tasks=[])
        assert Job.objects.count() == 0  # would raise TransactionManagementError if broken


@pytest.mark.django_db(transaction=True)  # job_submit's own transaction, not the test's
def test_failed_write_rolls_back_the_whole_job(researcher, nlp_queue, monkeypatch):
    def broken_bulk_create(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(JobTask.objects, "bulk_create", broken_bulk_create)
    with pytest.raises(RuntimeError):
        job_submit(
            submitter=researcher, queue=nlp_queue, name="x", tasks=[{"name": "a", "image": "i"}]
        )
    assert not Job.objects.filter(name="x").exists()


def test_detail_shows_every_list_field_of_the_job(api_for, nlp_job):
    client = api_for("researcher")
    listed = next(
        job for job in client.get("/api/v1/jobs/").json()["results"] if job["id"] == nlp_job.pk
    )
    detail = client.get(listed["url"]).json()
    assert {key: detail[key] for key in listed if key != "url"} == {
        key: value for key, value in listed.items() if key != "url"
    }
    assert detail["links"]["self"] == listed["url"]
    assert "url" not in detail
