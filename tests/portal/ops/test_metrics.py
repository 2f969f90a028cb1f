"""/metrics after real cycles: every figure equals what the database says."""

from collections import Counter, defaultdict

import pytest
from django.db.models import Sum
from django.test import override_settings
from prometheus_client.parser import text_string_to_metric_families

from portal.cluster.models import Placement
from portal.jobs.models import Job, JobTask
from portal.queues.models import Queue
from portal.scheduling.models import CycleRun, PreemptionEvent, QueueUsageSample
from tests.portal.ops.scenario import Clock, busy_cluster

pytestmark = pytest.mark.django_db


def scrape(client, **headers) -> dict[str, dict[tuple, float]]:
    response = client.get("/metrics", **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    samples: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def by_queue(samples, name) -> dict[str, float]:
    return {dict(labels)["queue_name"]: value for labels, value in samples[name].items()}


def test_scrape_after_cycles_matches_the_database(client, nlp_queue, vision_queue):
    busy_cluster(nlp_queue, vision_queue, clock=Clock())
    assert PreemptionEvent.objects.exists()  # the scenario did evict
    assert Job.objects.filter(status=Job.Status.PENDING).exists()

    samples = scrape(client)

    active = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
    allocated = dict(active.values_list("job__queue__name").annotate(g=Sum("gpus")).order_by())
    assert by_queue(samples, "gpuportal_queue_allocated_gpus") == {
        "nlp-train": allocated.get("nlp-train", 0),
        "vision-train": allocated.get("vision-train", 0),
    }
    assert sum(allocated.values()) > 0
    for queue in Queue.objects.all():
        newest = QueueUsageSample.objects.filter(queue=queue).order_by("-at").first()
        assert by_queue(samples, "gpuportal_queue_deserved_gpus")[queue.name] == pytest.approx(
            newest.gpus_deserved
        )
        assert by_queue(samples, "gpuportal_queue_guarantee_gpus")[queue.name] == (
            queue.guarantee_gpus
        )
        assert by_queue(samples, "gpuportal_queue_weight")[queue.name] == queue.weight
    assert by_queue(samples, "gpuportal_queue_capability_gpus") == {"nlp-train": 16}
    pending = JobTask.objects.filter(job__status=Job.Status.PENDING, job__queue=vision_queue)
    never = pending.filter(job__pending_kind=Job.PendingKind.NEVER)
    can_run = pending.exclude(job__pending_kind=Job.PendingKind.NEVER)
    assert by_queue(samples, "gpuportal_queue_pending_gpus")["vision-train"] == sum(
        t.replicas * t.gpus for t in can_run
    )
    assert by_queue(samples, "gpuportal_queue_never_runnable_gpus")["vision-train"] == sum(
        t.replicas * t.gpus for t in never
    )
    assert (
        by_queue(samples, "gpuportal_queue_pending_gpus")["vision-train"]
        + by_queue(samples, "gpuportal_queue_never_runnable_gpus")["vision-train"]
        == 32
    )

    tenant_allocated = {
        dict(labels)["tenant"]: value
        for labels, value in samples["gpuportal_tenant_allocated_gpus"].items()
    }
    assert tenant_allocated == {
        "nlp": allocated.get("nlp-train", 0),
        "vision": allocated["vision-train"],
    }

    jobs = Counter(Job.objects.values_list("queue__name", "status"))
    for labels, value in samples["gpuportal_jobs"].items():
        labels = dict(labels)
        assert value == jobs[(labels["queue_name"], labels["status"])], labels
    assert sum(samples["gpuportal_jobs"].values()) == Job.objects.count()

    last = CycleRun.objects.filter(finished_at__isnull=False).order_by("-finished_at").first()
    phases = {
        dict(k)["phase"]: v
        for k, v in samples["gpuportal_cycle_last_phase_duration_seconds"].items()
    }
    assert phases == pytest.approx(
        {p: getattr(last, f"{p}_ms") / 1000 for p in ("snapshot", "core", "persist", "reconcile")}
    )
    figures = {dict(k)["figure"]: v for k, v in samples["gpuportal_cycle_last"].items()}
    assert figures == {
        "binds": last.binds,
        "evictions": last.evictions,
        "pending_jobs": last.pending_jobs,
        "error": 0,
    }
    assert samples["gpuportal_cycle_last_finished_timestamp_seconds"][()] == (
        last.finished_at.timestamp()
    )
    assert samples["gpuportal_node_gpus"][(("schedulable", "true"),)] == 16


def test_request_latency_is_labelled_by_route_not_by_path(client, staff_client, nlp_queue):
    staff_client.get(f"/queues/{nlp_queue.pk}/edit/")
    staff_client.get("/no/such/page/")
    staff_client.get("/static/css/portal.css")
    samples = scrape(client)
    counts = {
        dict(labels)["route"]: value
        for labels, value in samples["gpuportal_http_request_duration_seconds_count"].items()
    }
    assert counts["queues/<int:queue_id>/edit/"] >= 1
    assert counts["<unmatched>"] >= 1
    assert counts["<static>"] >= 1
    assert not any(f"queues/{nlp_queue.pk}/" in route for route in counts)
    assert "/metrics" not in counts  # probes and scrapes are not counted as traffic


@override_settings(METRICS_TOKEN="s3cret", METRICS_OPEN=True)
def test_metrics_with_a_token_need_it(client, db):
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", HTTP_AUTHORIZATION="Basic s3cret").status_code == 401
    assert scrape(client, HTTP_AUTHORIZATION="Bearer s3cret")


@override_settings(METRICS_TOKEN="", METRICS_OPEN=False)
def test_metrics_without_a_token_are_off_unless_opened(client, db):
    assert client.get("/metrics").status_code == 404


def test_backoff_jobs_counts_the_jobs_held_back_or_avoiding_a_node_now(client, nlp_queue):
    from django.utils import timezone

    from portal.jobs.backoff import Attempt, Kind
    from tests.factories import JobFactory

    now = timezone.now()
    pulled = Attempt(now, Kind.IMAGE_PULL, node="gpu-a", pod="p", words="ErrImagePull")
    refused = Attempt(now, Kind.KUBELET_REFUSED, node="gpu-b", pod="q", words="OutOfgpu")
    old = Attempt(now.replace(year=2020), Kind.IMAGE_PULL, node="gpu-a", pod="r")
    JobFactory(queue=nlp_queue, status=Job.Status.PENDING, start_attempts=[pulled.as_json()])
    JobFactory(queue=nlp_queue, status=Job.Status.PREEMPTED, start_attempts=[refused.as_json()])
    JobFactory(queue=nlp_queue, status=Job.Status.PENDING, start_attempts=[old.as_json()])
    JobFactory(queue=nlp_queue, status=Job.Status.FAILED, start_attempts=[pulled.as_json()])
    JobFactory(queue=nlp_queue, status=Job.Status.PENDING)

    assert scrape(client)["gpuportal_backoff_jobs"] == {(): 2}
