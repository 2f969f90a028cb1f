"""The upload page: a file or pasted YAML (one of the two), and a sample manifest to download
or start from that the portal accepts as it is."""

from http import HTTPStatus

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from portal.jobs.forms import UPLOAD_BOTH, UPLOAD_NOTHING
from portal.jobs.models import Job
from portal.jobs.samples import SAMPLE_FILENAME, volcano_sample

pytestmark = pytest.mark.django_db

UPLOAD = reverse("jobs:job_upload")


def test_the_sample_names_one_of_the_users_queues_and_downloads_as_a_file(
    researcher_client, nlp_queue, vision_queue
):
    response = researcher_client.get(reverse("jobs:job_sample"))
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"] == "application/yaml"
    assert response["Content-Disposition"] == f'attachment; filename="{SAMPLE_FILENAME}"'
    text = response.content.decode()
    assert text == volcano_sample(queue="nlp-train")
    assert "queue: nlp-train " in text
    assert "vision" not in text


def test_start_from_the_sample_fills_the_paste_box(researcher_client, nlp_queue):
    page = researcher_client.get(UPLOAD, {"sample": "1"}).content.decode()
    assert "queue: nlp-train" in page
    assert 'name="text"' in page
    plain = researcher_client.get(UPLOAD).content.decode()
    assert "queue: nlp-train" not in plain
    assert f'href="{reverse("jobs:job_sample")}" download' in plain


def test_the_sample_pasted_as_it_is_is_submitted(researcher_client, nlp_queue, cluster):
    response = researcher_client.post(UPLOAD, {"text": volcano_sample(queue="nlp-train")})
    job = Job.objects.get(name="sample-train")
    assert response.status_code == HTTPStatus.FOUND
    assert response["Location"] == reverse("jobs:job_detail", args=[job.pk])
    assert job.min_available == 3
    assert sorted((t.name, t.replicas, t.gpus, t.cpu_millis) for t in job.tasks.all()) == [
        ("master", 1, 1, 4000),
        ("worker", 2, 1, 4000),
    ]


def test_pasted_yaml_errors_name_the_paste_box(researcher_client, nlp_queue):
    response = researcher_client.post(UPLOAD, {"text": "a: [unclosed"})
    assert "not valid YAML" in response.context["form"].errors["text"][0]
    response = researcher_client.post(UPLOAD, {"text": "- just\n- a list\n"})
    assert response.context["form"].errors["text"] == [
        "document 1 of the pasted text is not a mapping: each must be a Kubernetes object"
    ]
    upload = SimpleUploadedFile("job.yaml", b"- just\n- a list\n")
    response = researcher_client.post(UPLOAD, {"manifest": upload})
    assert response.context["form"].errors["manifest"] == [
        "document 1 of the file is not a mapping: each must be a Kubernetes object"
    ]
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (b"a: [unclosed", "not valid YAML"),  # the form refuses it
        (b"apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nspec: {}\n", "spec.queue"),
    ],
)
def test_a_failed_upload_keeps_the_files_yaml_in_the_paste_box(
    researcher_client, nlp_queue, content, error
):
    """A browser never refills a file field: the file's text comes back in the paste box, to
    be fixed there, rather than the file chosen again."""
    upload = SimpleUploadedFile("job.yaml", content)
    response = researcher_client.post(UPLOAD, {"manifest": upload})
    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    assert error in page
    assert response.context["form"]["text"].value() == content.decode()
    assert 'id="upload-kept"' in page
    # Sent back as it is, from the paste box, it meets the same check, not "not both".
    response = researcher_client.post(UPLOAD, {"text": content.decode()})
    assert error in response.content.decode()
    assert 'id="upload-kept"' not in response.content.decode()


def test_a_file_or_a_paste_not_none_and_not_both(researcher_client, nlp_queue):
    response = researcher_client.post(UPLOAD, {"text": "  \n"})
    assert response.status_code == HTTPStatus.OK
    assert response.context["form"].non_field_errors() == [UPLOAD_NOTHING]
    upload = SimpleUploadedFile("job.yaml", volcano_sample(queue="nlp-train").encode())
    response = researcher_client.post(UPLOAD, {"manifest": upload, "text": "kind: Job"})
    assert response.context["form"].non_field_errors() == [UPLOAD_BOTH]
    assert not Job.objects.exists()


def test_a_huge_paste_is_refused_by_size(researcher_client, nlp_queue):
    response = researcher_client.post(UPLOAD, {"text": "#" * (300 * 1024)})
    assert response.context["form"].errors["text"] == ["the text is larger than 256 KiB"]
