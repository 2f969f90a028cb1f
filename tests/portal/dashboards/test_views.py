from datetime import timedelta
from http import HTTPStatus

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.cluster.models import Placement
from portal.common import palette
from portal.jobs.models import Job
from portal.scheduling.rollups import usage_rollups_rebuild
from tests.factories import (
    JobFactory,
    JobTaskFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueUsageSampleFactory,
    held_by_others,
    largest_gpu_count,
)

pytestmark = pytest.mark.django_db


def _data(client, chart, **params):
    response = client.get(reverse("dashboards:chart_data", args=[chart]), params)
    assert response.status_code == HTTPStatus.OK
    return response.json()


@pytest.fixture
def busy(cluster, nlp_queue, vision_queue):
    now = timezone.now()
    for minutes in (5, 65):
        QueueUsageSampleFactory(
            queue=nlp_queue, at=now - timedelta(minutes=minutes), gpus_allocated=4
        )
        QueueUsageSampleFactory(
            queue=vision_queue, at=now - timedelta(minutes=minutes), gpus_allocated=2
        )
    running = JobTaskFactory(job__queue=nlp_queue, job__status="running", gpus=4)
    PlacementFactory(task=running, node=cluster[0], state=Placement.State.RUNNING)
    foreign = JobTaskFactory(job__queue=vision_queue, job__status="running", gpus=2)
    PlacementFactory(task=foreign, node=cluster[0], state=Placement.State.RUNNING)
    JobTaskFactory(job=JobFactory(queue=nlp_queue), replicas=2, gpus=8)
    PreemptionEventFactory(victim_job=JobFactory(queue=vision_queue), occurred_at=now)
    usage_rollups_rebuild()  # the scheduler maintains them; factories write samples directly
    return now


def test_dashboard_page_serves_local_plotly(researcher_client):
    response = researcher_client.get(reverse("dashboards:overview"))
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    assert "/static/vendor/plotly.min.js" in body
    assert "cdn" not in body.lower()


def test_plotly_js_is_the_plotly_packages_own(client):
    from portal.dashboards.staticfiles import plotly_js

    response = client.get("/static/vendor/plotly.min.js")
    assert response.status_code == HTTPStatus.OK
    assert b"".join(response.streaming_content) == plotly_js().read_bytes()


def test_collectstatic_copies_plotly_js(settings, tmp_path):
    from django.core.management import call_command

    settings.STATIC_ROOT = tmp_path
    call_command("collectstatic", "--noinput", verbosity=0)
    assert (tmp_path / "vendor" / "plotly.min.js").stat().st_size > 1_000_000


def test_usage_chart_aggregates_by_bucket_and_range(staff_client, busy):
    payload = _data(staff_client, "usage", range="hour")
    names = {trace["name"] for trace in payload["figure"]["data"]}
    assert names == {"nlp-train", "vision-train"}
    assert sum(len(t["x"]) for t in payload["figure"]["data"]) == 2  # one sample each in range
    payload = _data(staff_client, "usage", range="day")
    assert all(sum(t["y"]) > 0 for t in payload["figure"]["data"])
    assert _data(staff_client, "usage", range="bogus")["range"] == "day"


def test_usage_chart_scoped_to_visible_queues(researcher_client, busy):
    payload = _data(researcher_client, "usage", range="day")
    assert {trace["name"] for trace in payload["figure"]["data"]} == {"nlp-train"}


def test_quota_chart(staff_client, busy, nlp_queue):
    payload = _data(staff_client, "quota")
    _, allocated, _, deserved = payload["figure"]["data"]
    assert allocated["x"] == ["nlp-train", "vision-train"]
    assert allocated["y"] == [4, 2]
    assert deserved["y"] == [8.0, 8.0]
    assert deserved["text"][0] == "deserves 8 GPUs (25% of 32)"


def test_a_queue_has_one_colour_on_every_chart_for_every_viewer(
    staff_client, researcher_client, busy, nlp_queue
):
    colour = palette.queue_colour(nlp_queue.pk)
    for client in (staff_client, researcher_client):
        usage = _data(client, "usage", range="day")["figure"]["data"]
        assert next(t for t in usage if t["name"] == "nlp-train")["line"]["color"] == colour
        quota = _data(client, "quota")["figure"]["data"][1]
        assert quota["marker"]["color"][quota["x"].index("nlp-train")] == colour
        pending = _data(client, "pending")["figure"]["data"][0]
        assert pending["marker"]["color"][pending["x"].index("nlp-train")] == colour
        heatmap = _data(client, "occupancy")["figure"]["data"][0]
        code = heatmap["colorbar"]["ticktext"].index("nlp-train")
        assert heatmap["colorscale"][2 * code][1] == colour
        assert _data(client, "colours")["colours"]["nlp-train"] == colour
    assert "vision-train" not in _data(researcher_client, "colours")["colours"]


def test_free_block_labels_follow_the_node_size(staff_client, busy):
    payload = _data(staff_client, "occupancy")
    assert payload["free_block_labels"]["8"] == "nodes entirely free (8 GPUs)"
    page = staff_client.get(reverse("dashboards:overview")).content.decode()
    assert "nodes entirely free (8 GPUs)" in page


def test_charts_without_data_say_so(staff_client, cluster, nlp_queue):
    usage = _data(staff_client, "usage", range="day")["figure"]
    assert usage["layout"]["annotations"][0]["text"] == "No GPUs were allocated in this range."
    evictions = _data(staff_client, "preemptions", range="week")["figure"]
    assert evictions["layout"]["annotations"][0]["text"] == "No evictions in this range."
    waits = _data(staff_client, "pending")["waits"]
    assert waits["layout"]["annotations"][0]["text"] == "No job is waiting."


def test_evictions_chart_only_on_the_admins_dashboard(staff_client, researcher_client, busy):
    assert (
        'id="chart-preemptions"'
        in staff_client.get(reverse("dashboards:overview")).content.decode()
    )
    page = researcher_client.get(reverse("dashboards:overview")).content.decode()
    assert 'id="chart-preemptions"' not in page


def test_occupancy_chart_hides_other_tenants(researcher_client, staff_client, busy):
    payload = _data(researcher_client, "occupancy")
    trace = payload["figure"]["data"][0]
    assert trace["colorbar"]["ticktext"] == ["free", "nlp-train", "other tenants"]
    assert payload["free_blocks"] == {"8": 3, "4": 0, "2": 1, "1": 0}
    payload = _data(staff_client, "occupancy")
    assert "vision-train" in payload["figure"]["data"][0]["colorbar"]["ticktext"]


def test_occupancy_shows_what_other_workloads_hold_and_counts_it_not_free(
    staff_client, busy, cluster
):
    """gpu-worker-2: another scheduler's half of its registered card 7 and another team's two
    whole GPUs of unnamed cards; the nodes' free blocks count them as held."""
    held_by_others(cluster[1], whole=2, card=7, cores=50, memory_mib=40960)
    payload = _data(staff_client, "occupancy")
    trace = payload["figure"]["data"][0]
    assert "other workloads" in trace["colorbar"]["ticktext"]
    row = trace["y"].index("gpu-worker-2")
    cells = trace["text"][row]
    assert [i for i, text in enumerate(cells) if text.startswith("other workloads")] == [0, 1, 7]
    # gpu-worker-1: 2 cards free (the portal holds 6); gpu-worker-2: cards 2-6, 5 free
    assert payload["free_blocks"] == {"8": 2, "4": 1, "2": 1, "1": 0}


def test_pending_chart(staff_client, busy):
    payload = _data(staff_client, "pending")
    assert (
        payload["figure"]["data"][0]["y"][payload["figure"]["data"][0]["x"].index("nlp-train")]
        == 16
    )
    assert payload["waits"]["data"][0]["x"]


def test_pending_chart_lists_jobs_that_can_never_run_apart(staff_client, nlp_queue):
    JobTaskFactory(job=JobFactory(queue=nlp_queue, name="fits"), gpus=2, replicas=1)
    never = JobFactory(queue=nlp_queue, name="huge", pending_kind=Job.PendingKind.NEVER)
    JobTaskFactory(job=never, gpus=8, replicas=4)
    waiting, apart = _data(staff_client, "pending")["figure"]["data"]
    assert (waiting["x"], waiting["y"]) == (["nlp-train"], [2])
    assert (apart["name"], apart["y"]) == ("can never run as submitted", [32])


def test_pending_chart_survives_jobs_stored_with_huge_numbers(staff_client, nlp_queue):
    """Two stored jobs of 2**62 GPUs once made this chart answer 500 (SQLite's SUM overflowed;
    PostgreSQL's int4 product would too). Each job holds the largest count its column takes."""
    huge = largest_gpu_count()
    for name in ("huge-1", "huge-2"):
        JobTaskFactory(job=JobFactory(queue=nlp_queue, name=name), gpus=huge, replicas=huge)
    data = _data(staff_client, "pending")
    # Summed in floating point: exact to the float nearest the true total.
    assert data["figure"]["data"][0]["y"] == [pytest.approx(2 * huge * huge, rel=1e-15)]


def test_preemptions_chart_only_for_staff(staff_client, researcher_client, busy):
    assert _data(staff_client, "preemptions", range="day")["figure"]["data"]
    assert _data(researcher_client, "preemptions", range="day")["figure"]["data"] == []


def test_unknown_chart_404_and_anonymous_redirected(client, staff_client):
    response = staff_client.get(reverse("dashboards:chart_data", args=["nope"]))
    assert response.status_code == HTTPStatus.NOT_FOUND
    response = client.get(reverse("dashboards:chart_data", args=["usage"]))
    assert response.status_code == HTTPStatus.FOUND


def test_pending_wait_quartiles_match_python(
    staff_client, researcher_client, nlp_queue, vision_queue
):
    now = timezone.now()
    minutes = [10, 20, 40, 80, 160]
    for wait in minutes:
        JobFactory(queue=nlp_queue, submitted_at=now - timedelta(minutes=wait))
    JobFactory(queue=vision_queue, submitted_at=now - timedelta(minutes=30))
    JobFactory(queue=nlp_queue, status="running", submitted_at=now - timedelta(days=3))
    bars = _data(staff_client, "pending")["waits"]["data"][0]
    assert bars["x"] == ["nlp-train", "vision-train"]
    # statistics.quantiles(method="inclusive") of 10, 20, 40, 80, 160 minutes: 20, 40, 80
    shortest, q1, q3, longest = bars["customdata"][0]
    assert q1 == pytest.approx(20, abs=0.2)
    assert bars["y"][0] == pytest.approx(40, abs=0.2)
    assert q3 == pytest.approx(80, abs=0.2)
    assert shortest == pytest.approx(10, abs=0.2)
    assert longest == pytest.approx(160, abs=0.2)
    assert bars["y"][1] == pytest.approx(30, abs=0.2)  # one job: every quartile is it
    assert bars["text"] == ["5 jobs", "1 job"]
    bars = _data(researcher_client, "pending")["waits"]["data"][0]
    assert bars["x"] == ["nlp-train"]


def test_chart_query_counts_are_bounded(staff_client, busy, django_assert_max_num_queries):
    for chart, params in (
        ("usage", {"range": "month"}),
        ("usage", {"range": "hour"}),
        ("pending", {}),
        ("quota", {}),
    ):
        with django_assert_max_num_queries(10):
            _data(staff_client, chart, **params)


def test_a_user_in_no_tenant_sees_no_nodes_queues_or_jobs_on_the_charts(client, user, busy):
    client.force_login(user)
    occupancy = _data(client, "occupancy")
    assert occupancy["figure"]["data"] == []  # no node rows: the empty state
    assert occupancy["figure"]["layout"]["annotations"][0]["text"] == "No nodes to show."
    assert occupancy["free_blocks"] == {"8": 0, "4": 0, "2": 0, "1": 0}
    for chart in ("usage", "quota", "pending"):
        figure = _data(client, chart)["figure"]
        assert all(not trace.get("x") for trace in figure["data"]), chart
