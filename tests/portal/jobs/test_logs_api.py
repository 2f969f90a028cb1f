"""GET /api/v1/jobs/{id}/logs/: a pod's log and how it ended, on the simulated cluster (which
writes lines of its own: what the pod would run, with the env its plugins gave it)."""

from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from rest_framework.test import APIClient

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.services import job_submit
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import JobFactory, NodeFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def running_job(researcher, nlp_queue):
    NodeFactory(name="gpu-worker-1")
    tasks = [
        {"name": name, "replicas": 1, "image": "trainer:1", "gpus": 1, "cpu_millis": 1000,
         "command": ["torchrun", "train.py"]}
        for name in ("master", "worker")
    ]  # fmt: skip
    job = job_submit(submitter=researcher, queue=nlp_queue, name="ddp", tasks=tasks,
                     plugins={"pytorch": []})  # fmt: skip
    now = datetime.now(UTC)
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: now)
    for step in range(3):
        scheduling_cycle_run(backend=backend, now=lambda step=step: now + timedelta(seconds=step))
    return job


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


def test_the_latest_pods_log_by_default_with_its_env(api, running_job):
    response = api.get(f"/api/v1/jobs/{running_job.pk}/logs/")
    assert response.status_code == HTTPStatus.OK, response.json()
    body = response.json()
    pods = list(Placement.objects.filter(job=running_job).order_by("-id")
                .values_list("pod_name", flat=True))  # fmt: skip
    assert (body["pod"], body["pods"]) == (pods[0], pods)
    assert body["phase"] in ("Pending", "Running")
    text = "\n".join(body["lines"])
    assert "runs torchrun train.py" in text
    assert "MASTER_ADDR=ddp-master-0.gp-" in text


def test_a_failed_pod_shows_its_exit_code(api, running_job):
    pod = SimulatedPod.objects.order_by("name").first()
    pod.phase, pod.exit_code = "Failed", 137
    pod.save()
    body = api.get(f"/api/v1/jobs/{running_job.pk}/logs/?pod={pod.name}&tail=1").json()
    assert (body["phase"], body["exit_code"]) == ("Failed", 137)
    assert body["lines"] == ["[simulated] failed, exit code 137"]


@pytest.mark.parametrize(("query", "field"), [("?tail=0", "tail"), ("?pod=gp-1-x-0", "pod")])
def test_bad_parameters_are_a_400_naming_them(api, running_job, query, field):
    response = api.get(f"/api/v1/jobs/{running_job.pk}/logs/{query}")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert field in response.json()["errors"]


def test_another_tenants_job_is_not_found(api, vision_queue, outsider):
    job = JobFactory(queue=vision_queue, tenant=vision_queue.tenant, submitter=outsider)
    assert api.get(f"/api/v1/jobs/{job.pk}/logs/").status_code == HTTPStatus.NOT_FOUND


def test_a_job_without_pods_says_so(api, researcher, nlp_queue):
    job = JobFactory(queue=nlp_queue, tenant=nlp_queue.tenant, submitter=researcher)
    response = api.get(f"/api/v1/jobs/{job.pk}/logs/")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response.json()["errors"]["pod"] == ["this job has had no pod yet"]


def test_the_job_page_offers_the_log_of_each_pod(researcher_client, running_job):
    page = researcher_client.get(f"/jobs/{running_job.pk}/").content.decode()
    assert f'action="/api/v1/jobs/{running_job.pk}/logs/"' in page
    for pod in Placement.objects.filter(job=running_job).values_list("pod_name", flat=True):
        assert f'<option value="{pod}">' in page
    assert "js/job_logs.js" in page
