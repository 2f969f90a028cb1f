"""Lifecycle policies through the API and the job page: stored from a manifest, a 400 naming
the manifest's path when the portal cannot carry them out, each retry shown."""

from http import HTTPStatus

import pytest
import yaml
from rest_framework.test import APIClient

from portal.jobs.models import Job

MANIFEST = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: ddp}
spec:
  queue: nlp-train
  maxRetry: 5
  policies: [{event: PodEvicted, action: RestartJob}]
  tasks:
  - name: worker
    replicas: 1
    policies: [{event: TaskCompleted, action: CompleteJob}]
    template: {spec: {containers: [{name: t, image: trainer:1}]}}
"""


@pytest.fixture
def api(researcher):
    client = APIClient()
    client.force_authenticate(researcher)
    return client


@pytest.mark.django_db
def test_a_manifests_policies_and_max_retry_are_stored(api, nlp_queue):
    response = api.post("/api/v1/jobs/", MANIFEST, content_type="application/yaml")
    assert response.status_code == HTTPStatus.CREATED, response.json()
    job = Job.objects.get()
    assert (job.policies, job.max_retry) == (
        [{"action": "RestartJob", "events": ["PodEvicted"]}],
        5,
    )
    assert job.tasks.get().policies == [{"action": "CompleteJob", "events": ["TaskCompleted"]}]
    assert "X-Manifest-Ignored-Fields" not in response
    assert (response.json()["max_retry"], response.json()["retries"]) == (5, [])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda m: m["spec"].update(maxRetry=-1), "spec.maxRetry"),
        (lambda m: m["spec"]["policies"][0].update(action="Resume"), "spec.policies[0].action"),
        (
            lambda m: m["spec"]["tasks"][0]["policies"][0].update(event="Bogus"),
            "spec.tasks[0].policies[0].event",
        ),
    ],  # fmt: skip
)
def test_bad_policies_are_a_400_naming_the_manifest_path(api, nlp_queue, change, path):
    manifest = yaml.safe_load(MANIFEST)
    change(manifest)
    response = api.post("/api/v1/jobs/", yaml.safe_dump(manifest), content_type="application/yaml")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert path in response.json()["errors"], response.json()
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_job_page_shows_each_retry(researcher_client, researcher, nlp_queue):
    from tests.factories import JobFactory

    retry = {"at": "2026-12-01T12:00:00+00:00", "pod": "gp-9-worker-1", "event": "PodFailed",
             "action": "RestartJob", "reason": "pod gp-9-worker-1 failed (OOMKilled); ..."}  # fmt: skip
    job = JobFactory(queue=nlp_queue, tenant=nlp_queue.tenant, submitter=researcher,
                     retries=[retry], retry_count=1, max_retry=3,
                     policies=[{"events": ["PodFailed"], "action": "RestartJob"}])  # fmt: skip
    page = researcher_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Restarted 1 of at most 3 times" in page
    assert "gp-9-worker-1 failed (OOMKilled)" in page
    assert "PodFailed &rarr; RestartJob" in page
