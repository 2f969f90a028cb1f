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


@pytest.mark.parametrize(
    ("path", "subject"),
    [("/jobs/999999/", "job"), ("/queues/999999/edit/", "queue"), ("/no-such-page/", "page")],
)
def test_a_missing_page_says_what_is_missing_or_not_yours(researcher_client, path, subject):
    response = researcher_client.get(path)
    assert response.status_code == HTTPStatus.NOT_FOUND
    body = response.content.decode()
    assert f"No such {subject}, or not yours to see" in body
    assert "URLconf" not in body  # never Django's debug page


def test_another_tenants_job_is_the_same_404_as_no_job(researcher_client, vision_queue):
    theirs = JobFactory(queue=vision_queue)
    response = researcher_client.get(reverse("jobs:job_detail", args=[theirs.pk]))
    assert response.status_code == HTTPStatus.NOT_FOUND
    assert "No such job, or not yours to see" in response.content.decode()


def test_the_embedded_demo_runs_without_debug_pages():
    """portal.settings.local: DEBUG off unless DJANGO_DEBUG says otherwise."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_DEBUG", "DATABASE_URL")}
    env["DJANGO_SETTINGS_MODULE"] = "portal.settings.local"
    code = "from django.conf import settings; print(settings.DEBUG)"
    answer = subprocess.run(  # noqa: S603
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert answer.stdout.strip() == "False"
