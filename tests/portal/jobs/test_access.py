"""portal.jobs.access: which jobs a user sees and what they may do to them."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.jobs import access as job_access
from tests.factories import (
    JobFactory,
    MembershipFactory,
    PreemptionEventFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def test_visible_jobs_scoped_to_tenants_not_submitter(researcher, nlp_queue, vision_queue):
    colleague_job = JobFactory(queue=nlp_queue)
    JobFactory(queue=vision_queue)
    assert list(job_access.visible_jobs(researcher)) == [colleague_job]


def test_can_cancel_job(researcher, lead, staff, outsider, nlp_queue):
    own = JobFactory(queue=nlp_queue, submitter=researcher)
    colleague = UserFactory()
    MembershipFactory(user=colleague, tenant=nlp_queue.tenant)
    others = JobFactory(queue=nlp_queue, submitter=colleague)
    assert job_access.can_cancel_job(researcher, own) is True
    assert job_access.can_cancel_job(researcher, others) is False
    assert job_access.can_cancel_job(lead, others) is True
    assert job_access.can_cancel_job(staff, others) is True
    assert job_access.can_cancel_job(outsider, own) is False
    assert job_access.can_cancel_job(AnonymousUser(), own) is False


def test_can_release_job_only_for_site_admins(researcher, lead, staff, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    assert job_access.can_release_job(staff, job) is True
    assert job_access.can_release_job(lead, job) is False
    assert job_access.can_release_job(researcher, job) is False
    assert job_access.can_release_job(AnonymousUser(), job) is False


def test_readable_preemptions_need_both_jobs_visible(
    researcher, outsider, staff, nlp_queue, vision_queue
):
    mine = JobFactory(queue=nlp_queue)
    theirs = JobFactory(queue=vision_queue)
    by_mine = PreemptionEventFactory(victim_job=mine, preemptor_job=JobFactory(queue=nlp_queue))
    by_theirs = PreemptionEventFactory(victim_job=mine, preemptor_job=theirs)
    by_nobody = PreemptionEventFactory(victim_job=mine, preemptor_job=None)
    of_theirs = PreemptionEventFactory(victim_job=theirs, preemptor_job=None)
    events = [by_mine, by_theirs, by_nobody, of_theirs]
    assert job_access.readable_preemptions(researcher, events) == {by_mine.pk, by_nobody.pk}
    assert job_access.readable_preemptions(outsider, events) == {of_theirs.pk}
    assert job_access.readable_preemptions(staff, events) == {e.pk for e in events}
    assert job_access.readable_preemptions(AnonymousUser(), events) == set()


def test_visible_job_ids_keeps_the_jobs_the_user_sees(researcher, staff, nlp_queue, vision_queue):
    mine = JobFactory(queue=nlp_queue)
    theirs = JobFactory(queue=vision_queue)
    assert job_access.visible_job_ids(researcher, [mine.pk, theirs.pk, None]) == {mine.pk}
    assert job_access.visible_job_ids(staff, [mine.pk, theirs.pk]) == {mine.pk, theirs.pk}
    assert job_access.visible_job_ids(AnonymousUser(), [mine.pk]) == set()
