"""The submit form keeps its simple shape, plus an advanced YAML pane per role: a pod
template that replaces the simple fields, checked like the API's, errors on the pane."""

from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.jobs.models import Job, JobTask
from tests.portal.common.pages import job_form_data

pytestmark = pytest.mark.django_db

TEMPLATE = """
spec:
  containers:
    - name: trainer
      image: trainer:2
      args: [--epochs, "3"]
      env:
        - {name: HF_TOKEN, valueFrom: {secretKeyRef: {name: nlp-hf, key: token}}}
      resources: {limits: {nvidia.com/gpu: 2, cpu: "8", memory: 32Gi}}
      volumeMounts: [{name: shm, mountPath: /dev/shm}]
    - {name: sidecar, image: exporter:1}
  volumes:
    - {name: shm, emptyDir: {medium: Memory, sizeLimit: 8Gi}}
"""


def test_the_form_shows_the_advanced_pane(researcher_client, nlp_queue):
    page = researcher_client.get(reverse("jobs:job_submit")).content.decode()
    assert "Pod template (advanced, YAML)" in page


def test_a_role_with_a_pod_template_is_stored_from_it(researcher_client, nlp_queue):
    data = job_form_data(nlp_queue.pk, **{"tasks-0-pod_template": TEMPLATE})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.FOUND, (
        response.context and response.context["formset"].errors
    )
    task = JobTask.objects.get()
    assert [c["name"] for c in task.pod_template["spec"]["containers"]] == ["trainer", "sidecar"]
    assert (task.image, task.gpus, task.cpu_millis) == ("trainer:2", 2, 8000)


def test_a_bad_template_is_an_error_on_the_pane_naming_its_path(researcher_client, nlp_queue):
    bad = TEMPLATE.replace("sizeLimit: 8Gi", "sizeLimit: -8Gi")
    data = job_form_data(nlp_queue.pk, **{"tasks-0-pod_template": bad})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.OK
    errors = response.context["formset"].forms[0].errors["pod_template"]
    assert errors == ["spec.volumes[0].emptyDir.sizeLimit: must not be negative"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("text", ["[1, 2]", "a: [", "x: !!python/object:os.system {}"])
def test_yaml_that_is_no_template_is_refused_on_the_pane(researcher_client, nlp_queue, text):
    data = job_form_data(nlp_queue.pk, **{"tasks-0-pod_template": text})
    response = researcher_client.post(reverse("jobs:job_submit"), data)
    assert response.status_code == HTTPStatus.OK
    assert response.context["formset"].forms[0].errors["pod_template"]
    assert not Job.objects.exists()
