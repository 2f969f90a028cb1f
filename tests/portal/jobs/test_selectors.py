import pytest
from django.http import Http404

from portal.jobs.models import Job
from portal.jobs.selectors import job_get, job_list
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_job_list_scoped_and_filtered(researcher, staff, nlp_queue, vision_queue):
    mine = JobFactory(queue=nlp_queue, submitter=researcher, status=Job.Status.RUNNING)
    colleague = JobFactory(queue=nlp_queue)
    foreign = JobFactory(queue=vision_queue)
    assert set(job_list(user=researcher)) == {mine, colleague}
    assert list(job_list(user=researcher, mine=True)) == [mine]
    assert list(job_list(user=researcher, status=Job.Status.RUNNING)) == [mine]
    assert set(job_list(user=staff)) == {mine, colleague, foreign}
    assert list(job_list(user=staff, queue_id=vision_queue.pk)) == [foreign]


def test_job_get_other_tenant_is_404(researcher, nlp_queue, vision_queue):
    own = JobFactory(queue=nlp_queue)
    foreign = JobFactory(queue=vision_queue)
    assert job_get(user=researcher, job_id=own.pk) == own
    with pytest.raises(Http404):
        job_get(user=researcher, job_id=foreign.pk)
