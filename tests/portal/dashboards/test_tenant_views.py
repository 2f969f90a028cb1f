"""The dashboard by tenant: use stacked by queue against the tenant's quota, and the
drill-down (?tenant=<id>) to one tenant's queues on the other charts."""

from http import HTTPStatus

import pytest
from django.urls import reverse

from portal.cluster.models import Placement
from portal.common import palette
from portal.tenants.models import TenantUsageSample
from tests.factories import JobTaskFactory, PlacementFactory, QueueFactory

pytestmark = pytest.mark.django_db


def _data(client, chart, **params):
    response = client.get(reverse("dashboards:chart_data", args=[chart]), params)
    assert response.status_code == HTTPStatus.OK
    return response.json()


@pytest.fixture
def running(cluster, nlp, vision, nlp_queue, vision_queue):
    nlp.guarantee_gpus, nlp.capability_gpus = 12, 20
    nlp.save()
    nlp_dev = QueueFactory(tenant=nlp, name="nlp-dev")
    for queue, gpus in ((nlp_queue, 4), (nlp_dev, 2), (vision_queue, 3)):
        task = JobTaskFactory(job__queue=queue, job__status="running", gpus=gpus)
        PlacementFactory(task=task, node=cluster[0], state=Placement.State.RUNNING)
    TenantUsageSample.objects.create(tenant=nlp, gpus_allocated=6, gpus_deserved=14.5)
    return nlp_dev


def test_each_tenant_stacks_its_queues_in_their_colours_against_its_quota(
    staff_client, running, nlp, vision, nlp_queue
):
    figure = _data(staff_client, "tenants")["figure"]

    capability, *queues, guarantee, deserved = figure["data"]
    assert capability["x"] == ["nlp"]
    assert capability["y"] == [20]
    stacked = {trace["name"]: trace for trace in queues}
    assert set(stacked) == {"nlp-dev", "nlp-train", "vision-train"}
    assert stacked["nlp-dev"]["y"] == [2, 0]
    assert stacked["nlp-dev"]["base"] == [0, 0]
    # nlp-train sits on nlp-dev in nlp's column
    assert stacked["nlp-train"]["y"] == [4, 0]
    assert stacked["nlp-train"]["base"] == [2, 0]
    assert stacked["vision-train"]["y"] == [0, 3]
    assert stacked["vision-train"]["base"][1] == 0
    assert stacked["nlp-train"]["marker"]["color"] == palette.queue_colour(nlp_queue.pk)
    assert stacked["nlp-train"]["customdata"] == [nlp.pk, vision.pk]
    assert (guarantee["x"], guarantee["y"]) == (["nlp"], [12])
    assert (deserved["x"], deserved["y"]) == (["nlp"], [14.5])
    # Every mark names its tenant: a click anywhere on its column drills down.
    assert capability["customdata"] == guarantee["customdata"] == deserved["customdata"] == [nlp.pk]


def test_a_researcher_sees_only_their_tenant(researcher_client, running):
    figure = _data(researcher_client, "tenants")["figure"]
    assert {t["name"] for t in figure["data"][1:-2]} == {"nlp-dev", "nlp-train"}
    assert figure["data"][1]["x"] == ["nlp"]


def test_drilling_into_a_tenant_shows_its_queues_alone(staff_client, running, nlp, vision):
    quota = _data(staff_client, "quota", tenant=nlp.pk)["figure"]
    assert quota["data"][1]["x"] == ["nlp-dev", "nlp-train"]
    pending = _data(staff_client, "quota", tenant=vision.pk)["figure"]
    assert pending["data"][1]["x"] == ["vision-train"]
    # The occupancy map still shows the whole cluster by name.
    occupancy = _data(staff_client, "occupancy", tenant=nlp.pk)
    assert "vision-train" in str(occupancy["figure"])

    page = staff_client.get(reverse("dashboards:overview"), {"tenant": nlp.pk})
    assert f'data-tenant="{nlp.pk}"' in page.content.decode()
    assert "Queues of tenant <strong>nlp</strong>" in page.content.decode()


def test_a_tenant_the_user_may_not_see_is_ignored(researcher_client, running, vision):
    quota = _data(researcher_client, "quota", tenant=vision.pk)["figure"]
    assert quota["data"][1]["x"] == ["nlp-dev", "nlp-train"]
    page = researcher_client.get(reverse("dashboards:overview"), {"tenant": vision.pk})
    assert "data-tenant" not in page.content.decode()
    assert _data(researcher_client, "quota", tenant="x")["figure"]["data"][1]["x"] == [
        "nlp-dev",
        "nlp-train",
    ]
