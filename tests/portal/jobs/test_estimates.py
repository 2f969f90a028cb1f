"""Estimated starts: stored per waiting job, said as a range ("likely to start 14:10-15:30
UTC"), "not within 7 days" or "never", on the job page, the job list, the API, the CLI and the
queue page."""

from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from portal.jobs.estimates import (
    EstimateRow,
    estimate_text,
    job_start_estimate,
    queue_next_start,
    start_estimates_record,
)
from portal.jobs.models import Job, StartEstimate
from tests.factories import JobFactory, JobTaskFactory

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
WEEK = NOW + timedelta(days=7)


@pytest.fixture
def api_client_for():
    def client_for(user):
        client = APIClient()
        client.force_authenticate(user)
        return client

    return client_for


def _at(hour: int, minute: int = 0, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, tzinfo=UTC)


def _estimate(job, outlook="starts", earliest=None, likely=None, latest=None, until=WEEK):
    return StartEstimate.objects.create(
        job=job,
        outlook=outlook,
        earliest=earliest,
        likely=likely,
        latest=latest,
        until=until,
        computed_at=NOW,
    )


def _text(**fields) -> str:
    return estimate_text(StartEstimate(outlook="starts", until=WEEK, computed_at=NOW, **fields))


def test_a_likely_start_is_said_as_its_range():
    text = _text(earliest=_at(14, 10), likely=_at(14, 40), latest=_at(15, 30))
    assert text == "likely to start 14:10-15:30 UTC"


def test_one_without_a_likely_time_gets_a_range_never_a_precise_time():
    text = _text(earliest=_at(14, 10), likely=None, latest=_at(15, 30))
    assert text == "may start 14:10-15:30 UTC"
    assert _text(earliest=_at(14, 10), likely=None, latest=None) == (
        "may start 14:10 UTC or later (not bounded within the horizon)"
    )


def test_a_start_on_another_day_carries_its_date():
    text = _text(earliest=_at(23, 50), likely=_at(23, 55), latest=_at(1, 5, day=2))
    assert text == "likely to start 23:50-2026-12-02 01:05 UTC"


def test_one_time_is_said_once():
    assert _text(earliest=_at(14), likely=_at(14), latest=_at(14)) == "likely to start 14:00 UTC"


def test_later_and_never_are_said_as_such():
    later = StartEstimate(outlook="later", until=WEEK, computed_at=NOW)
    assert estimate_text(later) == "not within 7 days"
    cut = StartEstimate(outlook="later", until=NOW + timedelta(hours=5), computed_at=NOW)
    assert estimate_text(cut) == "not within 5 hours"
    never = StartEstimate(outlook="never", until=WEEK, computed_at=NOW)
    assert estimate_text(never).startswith("never")
    assert estimate_text(None) == ""


def test_recording_replaces_every_estimate_and_skips_jobs_gone_since(nlp_queue):
    old, kept = JobFactory(queue=nlp_queue), JobFactory(queue=nlp_queue)
    _estimate(old, earliest=NOW)
    gone = JobFactory(queue=nlp_queue)
    gone_id = gone.id
    gone.delete()

    stored = start_estimates_record(
        rows=[
            EstimateRow(kept.id, "starts", _at(13), _at(13), _at(14)),
            EstimateRow(gone_id, "later", None, None, None),
        ],
        until=WEEK,
        computed_at=NOW,
    )

    assert stored == 1
    row = StartEstimate.objects.get()
    assert (row.job_id, row.likely, row.until, row.computed_at) == (kept.id, _at(13), WEEK, NOW)


def test_an_estimate_is_shown_only_while_the_job_waits(nlp_queue):
    job = JobFactory(queue=nlp_queue)
    _estimate(job, earliest=NOW, likely=NOW, latest=NOW)
    assert job_start_estimate(job) is not None
    job.status = Job.Status.RUNNING
    assert job_start_estimate(job) is None


def test_a_queues_next_start_is_the_soonest_likely_one_then_the_soonest_range(
    nlp_queue, vision_queue
):
    ranged = JobFactory(queue=nlp_queue)
    _estimate(ranged, earliest=_at(12, 30), latest=_at(18))
    late = JobFactory(queue=nlp_queue)
    _estimate(late, earliest=_at(15), likely=_at(16), latest=_at(17))
    soon = JobFactory(queue=nlp_queue)
    _estimate(soon, earliest=_at(13), likely=_at(14), latest=_at(15))
    started = JobFactory(queue=nlp_queue, status=Job.Status.RUNNING)
    _estimate(started, earliest=_at(12), likely=_at(12), latest=_at(12))
    _estimate(JobFactory(queue=nlp_queue), "never")
    assert queue_next_start(nlp_queue.id).job_id == soon.id
    StartEstimate.objects.filter(job__in=[soon, late]).delete()
    assert queue_next_start(nlp_queue.id).job_id == ranged.id
    assert queue_next_start(vision_queue.id) is None


def _waiting(queue, researcher, **estimate):
    job = JobFactory(queue=queue, submitter=researcher, name="waits-for-gpus")
    JobTaskFactory(job=job)
    _estimate(job, **estimate)
    return job


RANGE = {"earliest": _at(14, 10), "likely": _at(14, 40), "latest": _at(15, 30)}


def test_the_job_page_and_its_live_part_say_the_estimate(researcher_client, nlp_queue, researcher):
    job = _waiting(nlp_queue, researcher, **RANGE)
    for name in ("jobs:job_detail", "jobs:job_live"):
        response = researcher_client.get(reverse(name, args=[job.pk]))
        assert response.status_code == HTTPStatus.OK
        assert "likely to start 14:10-15:30 UTC" in response.content.decode()


def test_the_job_list_says_each_waiting_jobs_estimate(researcher_client, nlp_queue, researcher):
    _waiting(nlp_queue, researcher, outlook="later")
    body = researcher_client.get(reverse("jobs:job_list")).content.decode()
    assert "not within 7 days" in body


def test_the_job_list_leaves_never_to_the_reason_that_says_it(
    researcher_client, nlp_queue, researcher
):
    job = _waiting(nlp_queue, researcher, outlook="never")
    Job.objects.filter(pk=job.pk).update(
        pending_kind=Job.PendingKind.NEVER, pending_reason="can never run as submitted: too big"
    )
    body = researcher_client.get(reverse("jobs:job_list")).content.decode()
    assert "can never run as submitted: too big" in body
    assert "never: it can never run as submitted" not in body


def test_the_queue_page_says_the_next_start(researcher_client, nlp_queue, researcher):
    _waiting(nlp_queue, researcher, **RANGE)
    body = researcher_client.get(reverse("queues:queue_list")).content.decode()
    assert "Next start" in body
    assert "likely to start 14:10-15:30 UTC" in body


def test_the_api_detail_and_why_carry_the_estimate(api_client_for, nlp_queue, researcher):
    job = _waiting(nlp_queue, researcher, **RANGE)
    client = api_client_for(researcher)
    for path in (f"/api/v1/jobs/{job.pk}/", f"/api/v1/jobs/{job.pk}/why/"):
        data = client.get(path).json()
        assert data["estimated_start"] == "2026-12-01T14:40:00Z"
        assert data["estimated_start_range"] == {
            "outlook": "starts",
            "earliest": "2026-12-01T14:10:00Z",
            "latest": "2026-12-01T15:30:00Z",
            "until": "2026-12-08T12:00:00Z",
            "computed_at": "2026-12-01T12:00:00Z",
            "text": "likely to start 14:10-15:30 UTC",
        }


def test_the_api_says_null_without_an_estimate(api_client_for, nlp_queue, researcher):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    data = api_client_for(researcher).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (data["estimated_start"], data["estimated_start_range"]) == (None, None)
