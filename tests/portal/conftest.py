"""Portal fixtures: an API token client per role, and one job in each tenant."""

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from tests.factories import JobFactory, JobTaskFactory, api_token_secret

ROLES = ("researcher", "lead", "outsider", "staff", "anonymous")


@pytest.fixture(autouse=True)
def _clear_throttle_cache():
    cache.clear()
    yield
    cache.clear()


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_secret(user)}")
    return client


@pytest.fixture
def users(researcher, lead, outsider, staff):
    return {"researcher": researcher, "lead": lead, "outsider": outsider, "staff": staff}


@pytest.fixture
def api_for(users):
    """`api_for(role)`: an APIClient authenticated with that role's real token."""

    def make(role: str) -> APIClient:
        if role == "anonymous":
            return APIClient()
        return token_client(users[role])

    return make


@pytest.fixture
def nlp_job(nlp_queue, researcher):
    job = JobFactory(queue=nlp_queue, submitter=researcher, name="nlp-job", min_available=2)
    JobTaskFactory(job=job, name="worker", replicas=2, gpus=4)
    return job


@pytest.fixture
def vision_job(vision_queue, outsider):
    job = JobFactory(queue=vision_queue, submitter=outsider, name="vision-job")
    JobTaskFactory(job=job, name="worker", replicas=1, gpus=8)
    return job


@pytest.fixture
def world(cluster, nlp_queue, vision_queue, nlp_job, vision_job, users):
    return {
        "nlp_queue": nlp_queue,
        "vision_queue": vision_queue,
        "nlp_job": nlp_job,
        "vision_job": vision_job,
        **users,
    }


def job_body(queue, name="api-job", **extra):
    return {
        "queue": queue.name,
        "name": name,
        "tasks": [{"name": "worker", "replicas": 2, "image": "busybox", "gpus": 1}],
        **extra,
    }
