"""Behaviour of each endpoint beyond permissions: bodies, filters, pagination, side effects."""

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone

from portal.jobs.models import Job
from portal.queues.models import QueueChange
from portal.queues.services import queue_orders_record
from portal.scheduling import services
from portal.scheduling.models import SchedulerConfig
from tests.factories import (
    JobFactory,
    JobTaskFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueUsageSampleFactory,
    SchedulerConfigFactory,
)
from tests.portal.conftest import job_body

pytestmark = pytest.mark.django_db

VOLCANO_YAML = """\
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata:
  name: from-yaml
  annotations: {priority: "5"}
spec:
  queue: nlp-train
  minAvailable: 2
  priorityClassName: high
  tasks:
    - name: worker
      replicas: 2
      template:
        spec:
          nodeSelector: {gpu-model: H100}
          containers:
            - image: trainer:1
              command: [python, train.py]
              resources:
                limits: {nvidia.com/gpu: "2", cpu: "4", memory: 16Gi}
"""


def test_create_json_returns_the_job_with_location(world, api_for):
    response = api_for("researcher").post(
        "/api/v1/jobs/", job_body(world["nlp_queue"], priority=3), format="json"
    )
    assert response.status_code == HTTPStatus.CREATED
    body = response.json()
    assert response["Location"] == f"/api/v1/jobs/{body['id']}/"
    assert (body["status"], body["priority"], body["gpus"], body["min_available"]) == (
        "pending",
        3,
        2,
        2,
    )
    assert body["submitter"] == "researcher"


def test_create_accepts_a_queue_id(world, api_for):
    body = job_body(world["nlp_queue"])
    body["queue"] = world["nlp_queue"].pk
    response = api_for("researcher").post("/api/v1/jobs/", body, format="json")
    assert response.status_code == HTTPStatus.CREATED


@pytest.mark.parametrize("content_type", ["application/yaml", "text/yaml", "application/x-yaml"])
def test_create_from_volcano_yaml(world, api_for, content_type):
    response = api_for("researcher").post(
        "/api/v1/jobs/", VOLCANO_YAML.encode(), content_type=content_type
    )
    assert response.status_code == HTTPStatus.CREATED, response.content
    body = response.json()
    assert (body["name"], body["queue"], body["priority"], body["min_available"]) == (
        "from-yaml",
        "nlp-train",
        5,
        2,
    )
    task = body["tasks"][0]
    assert (task["gpus"], task["cpu_millis"], task["memory_bytes"]) == (2, 4000, 16 * 2**30)
    assert task["node_selector"] == {"gpu-model": "H100"}
    # The job's priorityClassName goes to its task, whose template has none (createJobPod).
    assert "X-Manifest-Ignored-Fields" not in response
    assert body["warnings"] == []


def test_create_from_volcano_json(world, api_for):
    import yaml

    manifest = yaml.safe_load(VOLCANO_YAML)
    response = api_for("researcher").post("/api/v1/jobs/", manifest, format="json")
    assert response.status_code == HTTPStatus.CREATED


def test_volcano_errors_name_manifest_paths_including_service_errors(world, api_for):
    bad = VOLCANO_YAML.replace('nvidia.com/gpu: "2"', 'nvidia.com/gpu: "1.5"')
    response = api_for("researcher").post("/api/v1/jobs/", bad, content_type="application/yaml")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert list(response.json()["errors"]) == [
        "spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu"
    ]
    bad_name = VOLCANO_YAML.replace("name: from-yaml", "name: From_YAML")
    response = api_for("researcher").post(
        "/api/v1/jobs/", bad_name, content_type="application/yaml"
    )
    assert list(response.json()["errors"]) == ["metadata.name"]
    foreign = VOLCANO_YAML.replace("queue: nlp-train", "queue: vision-train")
    response = api_for("researcher").post("/api/v1/jobs/", foreign, content_type="application/yaml")
    assert list(response.json()["errors"]) == ["spec.queue"]
    both = bad.replace("queue: nlp-train", "queue: no-such-queue")
    response = api_for("researcher").post("/api/v1/jobs/", both, content_type="application/yaml")
    assert set(response.json()["errors"]) == {
        "spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu",
        "spec.queue",
    }


def test_create_is_rate_limited(world, api_for, settings):
    settings.API_THROTTLE_RATES = {"job_create": "2/min"}
    client = api_for("researcher")
    statuses = [
        client.post(
            "/api/v1/jobs/", job_body(world["nlp_queue"], name=f"j{i}"), format="json"
        ).status_code
        for i in range(3)
    ]
    assert statuses == [HTTPStatus.CREATED, HTTPStatus.CREATED, HTTPStatus.TOO_MANY_REQUESTS]
    assert api_for("researcher").get("/api/v1/jobs/").status_code == HTTPStatus.OK


def test_list_filters(world, api_for, researcher, lead):
    old = JobFactory(queue=world["nlp_queue"], submitter=lead, name="old", status="running")
    Job.objects.filter(pk=old.pk).update(submitted_at=timezone.now() - timedelta(days=3))
    client = api_for("lead")

    def names(query):
        response = client.get(f"/api/v1/jobs/?{query}")
        assert response.status_code == HTTPStatus.OK, response.content
        return {job["name"] for job in response.json()["results"]}

    assert names("") == {"nlp-job", "vision-job", "old"}
    assert names("queue=nlp-train") == {"nlp-job", "old"}
    assert names(f"queue={world['vision_queue'].pk}") == {"vision-job"}
    assert names("tenant=vision") == {"vision-job"}
    assert names("status=running") == {"old"}
    assert names("mine=true") == {"old"}
    since = (timezone.now() - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert names(f"since={since}") == {"nlp-job", "vision-job"}


def test_list_paginates(world, api_for, researcher):
    for i in range(5):
        JobFactory(queue=world["nlp_queue"], submitter=researcher, name=f"p{i}")
    body = api_for("researcher").get("/api/v1/jobs/?limit=2&offset=1").json()
    assert body["count"] == 6
    assert len(body["results"]) == 2
    assert "offset=3" in body["next"]


def test_detail_includes_tasks_placements_and_reason(world, api_for):
    job = world["nlp_job"]
    job.pending_reason = "gang needs 2 pods of 4 GPUs"
    job.save()
    PlacementFactory(task=job.tasks.get(), replica=0, gpus=4)
    body = api_for("researcher").get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["pending_reason"] == "gang needs 2 pods of 4 GPUs"
    assert body["tasks"][0]["name"] == "worker"
    assert body["placements"][0]["gpus"] == 4
    assert body["links"]["why"] == f"/api/v1/jobs/{job.pk}/why/"


def test_cancel_then_cancel_again(world, api_for):
    client = api_for("researcher")
    url = f"/api/v1/jobs/{world['nlp_job'].pk}/cancel/"
    first = client.post(url)
    assert first.status_code == HTTPStatus.OK
    assert first.json()["status"] == "cancelled"
    again = client.post(url)
    assert again.status_code == HTTPStatus.BAD_REQUEST
    assert "status" in again.json()["errors"]


def test_why_lists_visible_jobs_ahead_and_counts_hidden_ones(world, api_for, lead, outsider):
    queue = world["nlp_queue"]
    target = world["nlp_job"]
    now = timezone.now()
    Job.objects.filter(pk=target.pk).update(submitted_at=now, priority=5)
    higher = JobFactory(queue=queue, submitter=lead, name="higher", priority=9)
    JobTaskFactory(job=higher, replicas=2, gpus=4)
    earlier = JobFactory(queue=queue, submitter=lead, name="earlier", priority=5)
    Job.objects.filter(pk=earlier.pk).update(submitted_at=now - timedelta(minutes=1))
    later = JobFactory(queue=queue, submitter=lead, name="later", priority=5)
    lower = JobFactory(queue=queue, submitter=lead, name="lower", priority=1)
    JobFactory(queue=queue, submitter=lead, name="running", priority=99, status="running")
    hidden = JobFactory(
        queue=queue, tenant=world["vision_queue"].tenant, name="secret-job", priority=50
    )
    assert hidden.tenant != target.tenant  # a row another tenant owns in this queue
    line = [higher, hidden, earlier, target, later, lower]  # as the last cycle ordered them
    queue_orders_record(orders={queue.pk: [job.pk for job in line]}, at=now)

    body = api_for("researcher").get(f"/api/v1/jobs/{target.pk}/why/").json()
    assert [j["name"] for j in body["jobs_ahead"]] == ["higher", "earlier"]
    assert body["jobs_ahead"][0]["gpus"] == 8
    assert body["hidden_jobs_ahead"] == 1
    assert body["position"] == 4
    assert "secret-job" not in str(body)


def test_why_for_a_running_job_has_no_position(world, api_for):
    Job.objects.filter(pk=world["nlp_job"].pk).update(status="running")
    body = api_for("researcher").get(f"/api/v1/jobs/{world['nlp_job'].pk}/why/").json()
    assert (body["position"], body["jobs_ahead"]) == (None, [])


def test_queue_shows_live_allocation_latest_sample_and_patch_is_audited(world, api_for):
    queue = world["nlp_queue"]
    QueueUsageSampleFactory(queue=queue, at=timezone.now() - timedelta(minutes=5))
    QueueUsageSampleFactory(queue=queue, gpus_allocated=6, gpus_deserved=12.5)
    task = world["nlp_job"].tasks.get()
    PlacementFactory(task=task, replica=0, gpus=4)  # placed after the newest sample
    PlacementFactory(task=task, replica=1, gpus=4, state="succeeded")  # no longer holds GPUs
    client = api_for("lead")
    body = client.get(f"/api/v1/queues/{queue.pk}/").json()
    # allocated counts the placements now; deserved is the scheduler's at usage_at
    assert (body["gpus_allocated"], body["gpus_deserved"], body["can_edit"]) == (4, 12.5, True)
    listed = {q["id"]: q for q in api_for("staff").get("/api/v1/queues/").json()["results"]}
    assert listed[queue.pk]["gpus_allocated"] == 4
    assert listed[world["vision_queue"].pk]["gpus_allocated"] == 0

    response = client.patch(
        f"/api/v1/queues/{queue.pk}/", {"weight": 9, "capability_gpus": 16}, format="json"
    )
    assert response.status_code == HTTPStatus.OK
    assert (response.json()["weight"], response.json()["capability_gpus"]) == (9, 16)
    changes_url = response.json()["links"]["changes"]
    changes = client.get(changes_url).json()["results"]
    assert {(c["field"], c["old_value"], c["new_value"], c["changed_by"]) for c in changes} == {
        ("weight", "2", "9", "lead"),
        ("capability_gpus", "", "16", "lead"),
    }
    assert QueueChange.objects.filter(queue=queue).count() == 2


def test_usage_series_is_bucketed_in_the_database(world, api_for):
    queue = world["nlp_queue"]
    base = timezone.now().replace(minute=0, second=0, microsecond=0) - timedelta(hours=3)
    for minutes, gpus in [(1, 2), (2, 4), (61, 8)]:
        QueueUsageSampleFactory(
            queue=queue, at=base + timedelta(minutes=minutes), gpus_allocated=gpus
        )
    QueueUsageSampleFactory(queue=world["vision_queue"], at=base + timedelta(minutes=1))
    since = base.isoformat().replace("+00:00", "Z")
    body = (
        api_for("researcher")
        .get(f"/api/v1/queues/{queue.pk}/usage/", {"since": since, "resolution": "hour"})
        .json()
    )
    points = body["points"]
    assert [(p["gpus_allocated_avg"], p["gpus_allocated_max"], p["samples"]) for p in points] == [
        (3.0, 4, 2),
        (8.0, 8, 1),
    ]
    minute = (
        api_for("researcher")
        .get(f"/api/v1/queues/{queue.pk}/usage/", {"since": since, "resolution": "minute"})
        .json()
    )
    assert len(minute["points"]) == 3


def test_preemption_filters(world, api_for):
    now = timezone.now()
    a = PreemptionEventFactory(victim_job=world["nlp_job"], action="reclaim")
    b = PreemptionEventFactory(victim_job=world["vision_job"], action="preempt")
    from portal.scheduling.models import PreemptionEvent

    PreemptionEvent.objects.filter(pk=b.pk).update(occurred_at=now - timedelta(days=2))
    client = api_for("staff")

    def ids(query):
        return {e["id"] for e in client.get(f"/api/v1/preemptions/?{query}").json()["results"]}

    assert ids("") == {a.pk, b.pk}
    assert ids("action=preempt") == {b.pk}
    assert ids(f"queue={world['nlp_queue'].pk}") == {a.pk}
    assert ids(f"tenant={world['vision_queue'].tenant_id}") == {b.pk}
    day = (now - timedelta(days=1)).isoformat().replace("+00:00", "Z")
    assert ids(f"since={day}") == {a.pk}
    assert ids(f"until={day}") == {b.pk}


def test_scheduler_config_create_activate(world, api_for):
    client = api_for("staff")
    first = SchedulerConfigFactory(active=True)
    text = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    response = client.post(
        "/api/v1/scheduler-configs/", {"text": text, "activate": False}, format="json"
    )
    assert response.status_code == HTTPStatus.CREATED
    created = response.json()
    assert created["active"] is False
    assert created["notes"] == [services.CONF_ADDS_PREDICATES]  # a conf without predicates
    response = client.post(f"/api/v1/scheduler-configs/{created['id']}/activate/")
    assert response.json()["active"] is True
    first.refresh_from_db()
    assert first.active is False
    listing = client.get("/api/v1/scheduler-configs/").json()
    assert [c["version"] for c in listing["results"]] == sorted(
        SchedulerConfig.objects.values_list("version", flat=True), reverse=True
    )


def test_scheduler_config_error_names_the_path(world, api_for):
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n'
    response = api_for("staff").post("/api/v1/scheduler-configs/", {"text": text}, format="json")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "tiers[0]" in response.json()["errors"]["text"][0]


def test_token_endpoint(world, researcher, password):
    from rest_framework.test import APIClient

    client = APIClient()
    response = client.post(
        "/api/v1/auth/token/", {"username": "researcher", "password": password}, format="json"
    )
    assert response.status_code == HTTPStatus.CREATED
    token = response.json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK
    wrong = APIClient().post(
        "/api/v1/auth/token/", {"username": "researcher", "password": "nope"}, format="json"
    )
    assert wrong.status_code == HTTPStatus.BAD_REQUEST
    assert "non_field_errors" in wrong.json()["errors"]


def test_method_not_allowed_is_json(world, api_for):
    response = api_for("staff").delete("/api/v1/jobs/")
    assert response.status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert response.json()["code"] == "method_not_allowed"


def test_why_says_never_and_takes_the_job_out_of_line(world, api_for):
    reason = "can never run as submitted: its gang needs 8 GPUs at once"
    Job.objects.filter(pk=world["nlp_job"].pk).update(pending_kind="never", pending_reason=reason)
    body = api_for("researcher").get(f"/api/v1/jobs/{world['nlp_job'].pk}/why/").json()
    assert (body["state"], body["pending_kind"], body["pending_reason"]) == (
        "Never runnable as submitted",
        "never",
        reason,
    )
    assert (body["position"], body["jobs_ahead"], body["hidden_jobs_ahead"]) == (None, [], 0)


def test_why_of_a_waiting_job_says_it_waits(world, api_for):
    Job.objects.filter(pk=world["nlp_job"].pk).update(pending_kind="waits")
    queue_orders_record(orders={world["nlp_queue"].pk: [world["nlp_job"].pk]}, at=timezone.now())
    body = api_for("researcher").get(f"/api/v1/jobs/{world['nlp_job'].pk}/why/").json()
    assert (body["state"], body["pending_kind"], body["position"]) == ("Waiting", "waits", 1)


def test_job_list_filters_never_runnable_jobs(world, api_for):
    Job.objects.filter(pk=world["nlp_job"].pk).update(pending_kind="never")
    JobFactory(queue=world["nlp_queue"], name="waits", pending_kind="waits")
    body = api_for("researcher").get("/api/v1/jobs/", {"never_runnable": "true"}).json()
    assert [job["name"] for job in body["results"]] == ["nlp-job"]
