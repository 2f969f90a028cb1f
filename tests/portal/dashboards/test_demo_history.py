"""The demo's past: finished jobs, a reclaim, per-minute usage, all consistent with each other."""

from collections import defaultdict
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from portal.cluster.models import Node, Placement
from portal.dashboards.demo_history import HISTORY_MINUTES, PAST_JOBS
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.scheduling.models import PreemptionEvent, QueueUsageRollup, QueueUsageSample

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "demo-pass-for-tests")
    out = StringIO()
    call_command("seed_demo", stdout=out)
    return out.getvalue()


def test_the_past_jobs_have_finished_and_one_failed(seeded):
    past = Job.objects.filter(name__in=[job.name for job in PAST_JOBS])
    assert past.count() == len(PAST_JOBS)
    statuses = dict(past.values_list("name", "status"))
    assert statuses.pop("tokenizer-train") == Job.Status.FAILED
    assert set(statuses.values()) == {Job.Status.SUCCEEDED}
    for job in past:
        assert job.submitted_at <= job.started_at < job.finished_at < timezone.now()
    assert "demo history: 8 finished jobs, 2 evictions" in seeded


def test_the_reclaim_names_victim_preemptor_and_the_gang(seeded):
    events = list(PreemptionEvent.objects.order_by("victim_task_name"))
    assert [(e.victim_job.name, e.victim_task_name, e.preemptor_job.name) for e in events] == [
        ("clip-embed", "worker-0", "nccl-bench"),
        ("clip-embed", "worker-1", "nccl-bench"),
    ]
    assert events[0].sentence.startswith("reclaimed for worker-0 of job nccl-bench: queue")
    assert events[1].sentence == "released with its gang: clip-embed fell below min_available 2"
    victim = Job.objects.get(name="clip-embed")
    assert victim.preemption_count == 1
    assert victim.placements.filter(state=Placement.State.DELETED).count() == 2
    assert victim.placements.filter(state=Placement.State.SUCCEEDED).count() == 2


def test_no_node_ever_holds_more_gpus_than_it_has(seeded):
    capacity = dict(Node.objects.values_list("name", "gpu_count"))
    changes = defaultdict(list)
    for placement in Placement.objects.filter(job__name__in=[job.name for job in PAST_JOBS]):
        changes[placement.node_name] += [
            (placement.created_at, placement.gpus),
            (placement.updated_at, -placement.gpus),
        ]
    for node, steps in changes.items():
        held = 0
        for _, gpus in sorted(steps, key=lambda step: (step[0], step[1])):
            held += gpus
            assert held <= capacity[node], node


def test_usage_samples_agree_with_the_placements(seeded):
    queues = list(Queue.objects.all())
    assert QueueUsageSample.objects.count() == HISTORY_MINUTES * len(queues)
    placements = list(
        Placement.objects.filter(job__name__in=[job.name for job in PAST_JOBS]).values_list(
            "job__queue__name", "created_at", "updated_at", "gpus"
        )
    )
    for sample in QueueUsageSample.objects.select_related("queue").order_by("at")[::37]:
        held = sum(
            gpus
            for queue, start, end, gpus in placements
            if queue == sample.queue.name and start <= sample.at < end
        )
        assert sample.gpus_allocated == held, (sample.queue.name, sample.at)
    # Deserved comes from the proportion plugin: while gpt2-sft runs alone in nlp-train, the
    # queue deserves at least what it holds (16 GPUs, within its capability of 24).
    nlp = QueueUsageSample.objects.filter(queue__name="nlp-train", gpus_allocated=16)
    assert nlp.exists()
    assert all(sample.gpus_deserved >= 16 for sample in nlp)
    assert QueueUsageRollup.objects.filter(resolution="hour").exists()


def test_the_ledger_books_the_storys_gpu_hours(seeded):
    from django.db.models import Sum

    from portal.accounting.models import LedgerEntry

    past = Placement.objects.filter(job__name__in=[job.name for job in PAST_JOBS])
    for placement in past:  # the placements hold the story's times, as the job pages show
        assert (placement.started_at, placement.ended_at) == (
            placement.created_at.replace(microsecond=0),
            placement.updated_at.replace(microsecond=0),
        )
    held = sum(p.gpus * 1000 * int((p.ended_at - p.started_at).total_seconds()) for p in past)
    totals = LedgerEntry.objects.aggregate(
        within=Sum("gpu_milli_seconds_within"),
        borrowed=Sum("gpu_milli_seconds_borrowed"),
        lost=Sum("gpu_milli_seconds_lost"),
    )
    assert totals["within"] + totals["borrowed"] == held
    # vision-batch guarantees nothing: all its use is borrowed; the reclaim threw away the
    # first run of clip-embed, 2 pods x 4 GPUs for 89 minutes.
    batch = LedgerEntry.objects.filter(queue__name="vision-batch").aggregate(
        within=Sum("gpu_milli_seconds_within"), lost=Sum("gpu_milli_seconds_lost")
    )
    assert batch["within"] == 0
    assert totals["lost"] == batch["lost"] == 2 * 4 * 1000 * 89 * 60
    # gpt2-sft's 16 GPUs in nlp-train (guarantee 8) for 179 minutes: half of them borrowed;
    # tokenizer-train's 2 GPUs later, alone in the queue: within.
    nlp = LedgerEntry.objects.get(queue__name="nlp-train", user__username="researcher")
    assert nlp.gpu_milli_seconds_borrowed == 8 * 1000 * 179 * 60


def test_the_day_view_of_a_fresh_demo_is_not_empty(seeded, client):
    client.login(username="admin", password="demo-pass-for-tests")
    figure = client.get("/dashboards/data/usage/", {"range": "day"}).json()["figure"]
    assert {trace["name"] for trace in figure["data"]} >= {"nlp-train", "vision-batch"}
    assert len(figure["data"][0]["x"]) >= 6
    evictions = client.get("/dashboards/data/preemptions/", {"range": "day"}).json()["figure"]
    assert sum(sum(trace["y"]) for trace in evictions["data"]) == 2


def test_a_second_seed_adds_no_history(seeded):
    counts = (
        Job.objects.count(),
        PreemptionEvent.objects.count(),
        QueueUsageSample.objects.count(),
    )
    out = StringIO()
    call_command("seed_demo", stdout=out)
    assert "demo history: already there" in out.getvalue()
    assert counts == (
        Job.objects.count(),
        PreemptionEvent.objects.count(),
        QueueUsageSample.objects.count(),
    )
    assert timezone.now() - QueueUsageSample.objects.latest("at").at < timedelta(minutes=2)
