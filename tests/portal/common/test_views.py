from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_home_redirects_anonymous_to_login():
    response = Client().get(reverse("home"))
    assert response.status_code == HTTPStatus.FOUND
    assert response.url.startswith(reverse("login"))


def test_login_and_logout(researcher, password):
    client = Client()
    response = client.post(reverse("login"), {"username": "researcher", "password": password})
    assert response.status_code == HTTPStatus.FOUND
    assert response.url == reverse("home")
    assert client.get(reverse("home")).status_code == HTTPStatus.OK

    response = client.post(reverse("logout"))
    assert response.status_code == HTTPStatus.FOUND
    assert client.get(reverse("home")).status_code == HTTPStatus.FOUND


def test_login_page_renders_and_rejects_bad_password(researcher):
    client = Client()
    assert client.get(reverse("login")).status_code == HTTPStatus.OK
    response = client.post(reverse("login"), {"username": "researcher", "password": "wrong"})
    assert response.status_code == HTTPStatus.OK
    assert "_auth_user_id" not in client.session


def test_logout_by_get_is_refused(researcher_client):
    assert researcher_client.get(reverse("logout")).status_code == HTTPStatus.METHOD_NOT_ALLOWED


def test_researcher_home_shows_own_tenant_queues_and_jobs(
    researcher, researcher_client, nlp_queue, vision_queue
):
    JobFactory(queue=nlp_queue, submitter=researcher, name="my-job")
    JobFactory(queue=vision_queue, name="their-job")
    body = researcher_client.get(reverse("home")).content.decode()
    assert "nlp-train" in body
    assert "vision-train" not in body
    assert "my-job" in body
    assert "their-job" not in body
    assert 'id="lead-queues"' not in body
    assert reverse("scheduling:preemption_list") not in body


def test_lead_home_links_to_editable_queues(lead_client, nlp_queue, vision_queue):
    body = lead_client.get(reverse("home")).content.decode()
    assert 'id="lead-queues"' in body
    assert reverse("queues:queue_edit", args=[nlp_queue.pk]) in body
    assert reverse("queues:queue_edit", args=[vision_queue.pk]) not in body


def test_staff_home_lists_all_tenants_and_admin_pages(staff_client, nlp_queue, vision_queue):
    body = staff_client.get(reverse("home")).content.decode()
    assert 'id="admin-overview"' in body
    assert "nlp-train" in body
    assert "vision-train" in body
    assert reverse("scheduling:preemption_list") in body


def test_the_start_page_shows_your_jobs_before_the_queues(researcher_client, nlp_queue):
    page = researcher_client.get(reverse("home")).content.decode()
    assert page.index('id="my-jobs"') < page.index('id="my-queues"')
