from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Protocol

from django.db.models import QuerySet

from jobspec.labels import JOB_ID
from portal.jobs.models import Job

from .models import (
    CycleRun,
    PreemptionEvent,
    QueueUsageRollup,
    QueueUsageSample,
    SchedulerConfig,
)

EVICTED_JOB_CANCELLED = "its job was cancelled"


class EvictedPod(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def node_name(self) -> str | None: ...

    @property
    def labels(self) -> Mapping[str, str]: ...


def eviction_reasons(*, pods: Iterable[EvictedPod]) -> dict[str, str]:
    """pod name -> why the portal deletes it, for the pods' Kubernetes Events: the latest
    preemption of its job on its node (the sentence the preemption history shows), else that
    its job was cancelled."""
    pods = list(pods)
    job_ids = {int(j) for pod in pods if (j := pod.labels.get(JOB_ID, "")).isdigit()}
    if not job_ids:
        return {}
    sentences: dict[tuple[int, str], str] = {}
    for job_id, node, sentence in (
        PreemptionEvent.objects.filter(victim_job_id__in=job_ids)
        .order_by("occurred_at", "id")
        .values_list("victim_job_id", "node_name", "sentence")
    ):
        sentences[(job_id, node)] = sentence
    statuses = dict(Job.objects.filter(id__in=job_ids).values_list("id", "status"))
    reasons = {}
    for pod in pods:
        job_id = int(pod.labels.get(JOB_ID, "0") or 0)
        preempted = sentences.get((job_id, pod.node_name or ""))
        if preempted:
            reasons[pod.name] = preempted
        elif statuses.get(job_id) == Job.Status.CANCELLED:
            reasons[pod.name] = EVICTED_JOB_CANCELLED
    return reasons


def scheduler_config_get_active() -> SchedulerConfig | None:
    return SchedulerConfig.objects.filter(active=True).first()


def scheduler_config_list() -> QuerySet[SchedulerConfig]:
    return SchedulerConfig.objects.select_related("created_by").order_by("-version")


def preemption_event_list(
    *,
    action: str | None = None,
    queue_id: int | None = None,
    tenant_id: int | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[PreemptionEvent]:
    """Every preemption (site admins only: callers check the role)."""
    events = PreemptionEvent.objects.select_related(
        "victim_job",
        "victim_queue",
        "victim_tenant",
        "preemptor_job",
        "preemptor_queue",
        "cycle",
        "placement",
    )
    if action:
        events = events.filter(action=action)
    if queue_id is not None:
        events = events.filter(victim_queue_id=queue_id)
    if tenant_id is not None:
        events = events.filter(victim_tenant_id=tenant_id)
    if since is not None:
        events = events.filter(occurred_at__gte=since)
    if until is not None:
        events = events.filter(occurred_at__lt=until)
    return events.order_by("-occurred_at", "-id")


def cycle_run_list(*, limit: int = 100) -> QuerySet[CycleRun]:
    return CycleRun.objects.order_by("-started_at", "-id")[:limit]


# --- pages and dashboards -------------------------------------------------------------------


def preemption_event_list_for_job(*, job_id: int) -> QuerySet[PreemptionEvent]:
    """Events where the job lost pods or caused others to lose them, newest first."""
    from django.db.models import Q

    return (
        PreemptionEvent.objects.filter(Q(victim_job_id=job_id) | Q(preemptor_job_id=job_id))
        .select_related(
            "victim_job", "victim_queue", "preemptor_job", "preemptor_queue", "placement"
        )
        .order_by("-occurred_at", "-id")
    )


def pods_evicted_count(*, job_id: int) -> int:
    """How many of the job's pods were evicted, in all its runs."""
    return PreemptionEvent.objects.filter(victim_job_id=job_id).count()


def usage_series(*, since: datetime, bucket: str) -> list[dict]:
    """Average GPUs allocated per queue per time bucket (`minute`, `hour`, `day`).

    Minutes are aggregated from the samples (short ranges only); hours and days are read from
    the `QueueUsageRollup` rows (UTC buckets), from the bucket containing `since` on.
    """
    from django.db import connection
    from django.db.models import Avg
    from django.db.models.functions import Trunc

    from portal.queues.models import Queue

    from .rollups import EpochSeconds, bucket_start

    names = dict(Queue.objects.values_list("pk", "name"))
    if bucket in QueueUsageRollup.Resolution.values:
        rows = QueueUsageRollup.objects.filter(
            resolution=bucket, bucket__gte=bucket_start(since, bucket)
        ).order_by("bucket", "queue_id")
        if connection.vendor in EpochSeconds.VENDORS:
            # Thousands of rows share a few hundred buckets: integers instead of parsing a
            # timestamp with time zone per row (most of the request's time otherwise).
            rows = rows.annotate(epoch=EpochSeconds("bucket"))
            rows = rows.values_list("epoch", "queue_id", "gpus_allocated_avg")
            at = {}
            return [
                {
                    "bucket": at.get(epoch) or at.setdefault(epoch, _from_epoch(epoch)),
                    "queue__name": names.get(queue_id, ""),
                    "gpus": gpus,
                }
                for epoch, queue_id, gpus in rows
            ]
        rows = rows.values_list("bucket", "queue_id", "gpus_allocated_avg")
    else:
        # Grouped by the queue id (no join over every sample); names are attached afterwards.
        rows = (
            QueueUsageSample.objects.filter(at__gte=since)
            .annotate(bucket=Trunc("at", bucket))
            .values("bucket", "queue_id")
            .annotate(gpus=Avg("gpus_allocated"))
            .order_by("bucket", "queue_id")
            .values_list("bucket", "queue_id", "gpus")
        )
    return [
        {"bucket": at, "queue__name": names.get(queue_id, ""), "gpus": gpus}
        for at, queue_id, gpus in rows
    ]


def _from_epoch(epoch: int) -> datetime:
    from datetime import UTC

    return datetime.fromtimestamp(int(epoch), UTC)


def usage_latest_deserved() -> dict[int, float]:
    """Queue id -> gpus_deserved of its newest usage sample (one query, index on queue, at)."""
    from django.db.models import OuterRef, Subquery

    from portal.queues.models import Queue

    newest = QueueUsageSample.objects.filter(queue_id=OuterRef("pk")).order_by("-at")
    rows = Queue.objects.annotate(
        deserved=Subquery(newest.values("gpus_deserved")[:1])
    ).values_list("pk", "deserved")
    return {pk: float(deserved) for pk, deserved in rows if deserved is not None}


def preemption_counts(*, since: datetime, bucket: str) -> list[dict]:
    """Evictions and GPUs freed per time bucket and action."""
    from django.db.models import Count, F, FloatField, Sum
    from django.db.models.functions import Cast, Greatest, Trunc

    # Shares of a card count their fraction (events from before shares have gpus_freed only).
    milli = Greatest(F("gpu_milli_freed"), F("gpus_freed") * 1000)
    return list(
        PreemptionEvent.objects.filter(occurred_at__gte=since)
        .annotate(bucket=Trunc("occurred_at", bucket))
        .values("bucket", "action")
        .annotate(events=Count("id"), gpus=Sum(Cast(milli, FloatField())) / 1000)
        .order_by("bucket", "action")
    )


# --- REST API -------------------------------------------------------------------------------


def queue_usage_series(
    *, queue_id: int, since: datetime, until: datetime, resolution: str
) -> list[dict]:
    """One row per `resolution` bucket (`minute`, `hour`, `day`) of a queue's usage samples,
    aggregated in the database: averages, the GPU peak and the number of samples."""
    from django.db.models import Avg, Count, Max
    from django.db.models.functions import Trunc
    from django.utils import timezone

    return list(
        QueueUsageSample.objects.filter(queue_id=queue_id, at__gte=since, at__lt=until)
        .annotate(bucket=Trunc("at", resolution, tzinfo=timezone.get_current_timezone()))
        .values("bucket")
        .annotate(
            gpus_allocated_avg=Avg("gpus_allocated"),
            gpus_allocated_max=Max("gpus_allocated"),
            gpus_deserved_avg=Avg("gpus_deserved"),
            gpus_pending_avg=Avg("gpus_pending"),
            cpu_millis_allocated_avg=Avg("cpu_millis_allocated"),
            memory_bytes_allocated_avg=Avg("memory_bytes_allocated"),
            samples=Count("id"),
        )
        .order_by("bucket")
    )


def queue_usage_latest(*, queue_ids: list[int]) -> dict[int, QueueUsageSample]:
    """The newest usage sample of each of `queue_ids` (one indexed lookup per queue)."""
    latest = {}
    for queue_id in queue_ids:
        sample = QueueUsageSample.objects.filter(queue_id=queue_id).order_by("-at", "-id").first()
        if sample is not None:
            latest[queue_id] = sample
    return latest
