"""The preview's demand query: fractions exact, and no database integer overflow on jobs stored
with the largest counts their columns take (PostgreSQL multiplies int4 columns in int4)."""

import pytest

from portal.jobs.models import Job
from portal.queues.preview import current_demand
from tests.factories import JobFactory, JobTaskFactory, largest_gpu_count

pytestmark = pytest.mark.django_db


def test_demand_counts_shares_exactly(nlp_queue):
    job = JobFactory(queue=nlp_queue, status=Job.Status.PENDING)
    JobTaskFactory(job=job, name="a", gpus=2, replicas=3)
    JobTaskFactory(job=job, name="b", gpus=0, gpu_milli=250, replicas=2)
    assert current_demand()[nlp_queue.name].get("gpu") == 6.5


def test_demand_of_huge_stored_jobs_does_not_overflow(nlp_queue):
    huge = largest_gpu_count()
    JobTaskFactory(job=JobFactory(queue=nlp_queue), gpus=huge, replicas=huge)
    assert current_demand()[nlp_queue.name].get("gpu") == pytest.approx(huge * huge, rel=1e-12)
