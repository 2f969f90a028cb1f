"""The queue list shows each queue's use (allocated, deserved, pending, as the CLI's `queues`)
with its name linking to its jobs; the quota forms take CPU in cores and memory in GiB."""

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.factories import QueueUsageSampleFactory
from tests.portal.common.pages import queue_form_data

pytestmark = pytest.mark.django_db

GiB = 1024**3


def _row(body: str, name: str) -> str:
    start = body.index(f">{name}</a>")
    return body[start : body.index("</tr>", start)]


def test_the_queue_list_shows_use_as_the_cli_does(researcher_client, nlp_queue):
    before = researcher_client.get(reverse("queues:queue_list")).content.decode()
    assert "no cycle yet" in _row(before, "nlp-train")

    now = timezone.now()
    QueueUsageSampleFactory(queue=nlp_queue, at=now - timedelta(minutes=2), gpus_deserved=2)
    QueueUsageSampleFactory(queue=nlp_queue, at=now, gpus_deserved=14.5, gpus_pending=8)
    body = researcher_client.get(reverse("queues:queue_list")).content.decode()
    row = _row(body, "nlp-train")
    assert 'data-label="Allocated" class="num">0 GPUs' in row
    assert 'data-label="Deserved" class="num">14.5 GPUs' in row
    assert 'data-label="Pending" class="num">8 GPUs' in row
    assert f'href="{reverse("jobs:job_list")}?queue={nlp_queue.pk}"' in body


def test_the_queue_edit_form_speaks_cores_and_gib(lead_client, nlp_queue):
    nlp_queue.guarantee_cpu_millis = 1500
    nlp_queue.guarantee_memory_bytes = 64 * GiB
    nlp_queue.save()
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    form = lead_client.get(url).context["form"]
    assert form["guarantee_cpu_millis"].value() == "1.5"
    assert form["guarantee_memory_bytes"].value() == "64Gi"
    assert form.fields["guarantee_cpu_millis"].label == "Guarantee (CPU cores)"
    assert form.fields["guarantee_memory_bytes"].label == "Guarantee (memory, GiB)"

    data = queue_form_data(nlp_queue, guarantee_cpu_millis="0.25", capability_memory_bytes="128")
    data |= {"capability_cpu_millis": "500m", "guarantee_memory_bytes": "512Mi"}
    response = lead_client.post(url, data)
    assert response.status_code == HTTPStatus.FOUND, response.context["form"].errors
    nlp_queue.refresh_from_db()
    assert nlp_queue.guarantee_cpu_millis == 250
    assert nlp_queue.capability_cpu_millis == 500
    assert nlp_queue.guarantee_memory_bytes == 512 * 1024**2
    assert nlp_queue.capability_memory_bytes == 128 * GiB


def test_an_unreadable_amount_is_a_field_error(lead_client, nlp_queue):
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    response = lead_client.post(url, queue_form_data(nlp_queue, guarantee_cpu_millis="lots"))
    assert response.status_code == HTTPStatus.OK
    assert "use cores such as" in response.context["form"].errors["guarantee_cpu_millis"][0]


def test_the_change_history_speaks_cores_and_gib(lead_client, nlp_queue):
    nlp_queue.tenant.guarantee_cpu_millis = 1000
    nlp_queue.tenant.save()
    url = reverse("queues:queue_edit", args=[nlp_queue.pk])
    data = queue_form_data(nlp_queue, weight=nlp_queue.weight, guarantee_cpu_millis="0.25")
    data |= {"capability_memory_bytes": "128"}
    response = lead_client.post(url, data)
    assert response.status_code == HTTPStatus.FOUND, response.context["form"].errors
    history = lead_client.get(url).content.decode()
    history = history[history.index('id="queue-changes"') :]
    assert (
        '<td data-label="Field">Guarantee (CPU cores)</td><td data-label="Old">0 cores</td>'
        '<td data-label="New">0.25 cores</td>'
    ) in history
    assert (
        '<td data-label="Field">Capability (memory, GiB)</td><td data-label="Old">unlimited</td>'
        '<td data-label="New">128 GiB</td>'
    ) in history


def test_one_gpu_is_singular(researcher_client, nlp_queue):
    QueueUsageSampleFactory(queue=nlp_queue, at=timezone.now(), gpus_deserved=1.0, gpus_pending=1)
    row = _row(researcher_client.get(reverse("queues:queue_list")).content.decode(), "nlp-train")
    assert 'data-label="Deserved" class="num">1 GPU</td>' in row
    assert 'data-label="Pending" class="num">1 GPU</td>' in row
