"""The submit form as a page: hints that say what to type, the job limits shown from
portal.jobs.limits (the values in force), and no "remove" box on the only role."""

import pytest
from django.test import override_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_the_hints_say_what_to_type(researcher_client, nlp_queue):
    page = researcher_client.get(reverse("jobs:job_submit")).content.decode()
    assert "e.g. 16 GiB; accepts 16Gi, 512Mi" in page
    assert "Expected duration (seconds)" in page
    assert "e.g. 3600 for an hour" in page


@override_settings(JOB_MAX_TASKS=5, JOB_MAX_GPUS_PER_POD=12, JOB_MAX_REPLICAS_PER_TASK=7)
def test_the_page_shows_the_limits_in_force(researcher_client, nlp_queue):
    page = researcher_client.get(reverse("jobs:job_submit")).content.decode()
    assert "at most 5 roles, 7 replicas per role" in page
    assert "per pod at most 12 GPUs" in page
    assert 'data-max="5"' in page
    assert 'max="12"' in page
    assert "0 to 12. A share of one GPU" in page


def test_the_only_role_has_no_remove_box(researcher_client, nlp_queue):
    from tests.portal.common.pages import job_form_data

    page = researcher_client.get(reverse("jobs:job_submit")).content.decode()
    assert page.count('<div class="role-remove" hidden>') == 1  # the role on the page
    assert page.count('<div class="role-remove">') == 1  # the template for added roles

    data = job_form_data(nlp_queue.pk, name="Bad_Name")
    data |= {"tasks-TOTAL_FORMS": "2", "tasks-1-name": "worker-2", "tasks-1-replicas": "1"}
    data |= {"tasks-1-image": "t:1", "tasks-1-gpus": "1"}
    page = researcher_client.post(reverse("jobs:job_submit"), data).content.decode()
    assert page.count('<div class="role-remove">') == 3  # two roles and the template


@pytest.mark.parametrize("queue", ["theirs", "closed", "999999", "abc"])
def test_a_queue_not_on_the_list_says_why(researcher_client, nlp, nlp_queue, vision_queue, queue):
    """Another tenant's, a closed, an unknown or a malformed queue: not Django's "Select a
    valid choice"."""
    from portal.jobs.forms import QUEUE_NOT_OFFERED
    from portal.queues.models import Queue
    from tests.factories import QueueFactory
    from tests.portal.common.pages import job_form_data

    closed = QueueFactory(tenant=nlp, name="nlp-old", state=Queue.State.CLOSED)
    value = {"theirs": vision_queue.pk, "closed": closed.pk}.get(queue, queue)
    response = researcher_client.post(reverse("jobs:job_submit"), job_form_data(value))
    assert response.context["form"].errors["queue"] == [QUEUE_NOT_OFFERED]
