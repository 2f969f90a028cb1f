"""The plan-ahead task: stores estimates; one plan at a time."""

import pytest
from django.core.cache import cache

from portal.jobs.models import StartEstimate
from scheduler import tasks
from tests.factories import JobFactory, JobTaskFactory, NodeFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_claim():
    cache.delete(tasks.PLAN_AHEAD_KEY)
    yield
    cache.delete(tasks.PLAN_AHEAD_KEY)


def test_plan_ahead_estimates_every_pending_job_and_lets_the_next_plan_run(nlp_queue):
    NodeFactory()
    job = JobFactory(queue=nlp_queue, expected_duration_seconds=600)
    JobTaskFactory(job=job, gpus=4)

    assert tasks.plan_ahead_run.delay().get() == 1

    assert StartEstimate.objects.get().job_id == job.id
    assert cache.get(tasks.PLAN_AHEAD_KEY) is None


def test_plan_ahead_is_skipped_while_another_plan_runs(nlp_queue):
    JobTaskFactory(job=JobFactory(queue=nlp_queue))
    cache.add(tasks.PLAN_AHEAD_KEY, 1)

    assert tasks.plan_ahead_run.delay().get() is None

    assert not StartEstimate.objects.exists()
