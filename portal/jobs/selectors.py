from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from portal.common.access import visible_jobs

from .models import Job


def job_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    queue_id: int | None = None,
    mine: bool = False,
) -> QuerySet[Job]:
    jobs = visible_jobs(user).select_related("queue", "tenant", "submitter")
    if status:
        jobs = jobs.filter(status=status)
    if queue_id is not None:
        jobs = jobs.filter(queue_id=queue_id)
    if mine:
        jobs = jobs.filter(submitter_id=user.pk)
    return jobs.prefetch_related("tasks").order_by("-submitted_at", "-id")


def job_get(*, user: AbstractBaseUser | AnonymousUser, job_id: int) -> Job:
    """The job if the user may see it; Http404 otherwise (never another tenant's data)."""
    jobs = visible_jobs(user).select_related("queue", "tenant", "submitter")
    return get_object_or_404(jobs.prefetch_related("tasks"), pk=job_id)


# --- pages and dashboards -------------------------------------------------------------------


def pending_demand_per_queue() -> dict[str, int]:
    """GPUs asked by pending jobs, per queue name (one aggregate query)."""
    from django.db.models import F, Sum

    from .models import JobTask

    rows = (
        JobTask.objects.filter(job__status=Job.Status.PENDING)
        .values("job__queue__name")
        .annotate(gpus=Sum(F("replicas") * F("gpus")))
    )
    return {row["job__queue__name"]: int(row["gpus"] or 0) for row in rows}


def pending_submitted_times(*, limit: int = 20000) -> list[tuple[str, object]]:
    """(queue name, submitted_at) of pending jobs, oldest first, at most `limit` rows."""
    rows = (
        Job.objects.filter(status=Job.Status.PENDING)
        .order_by("submitted_at")
        .values_list("queue__name", "submitted_at")[:limit]
    )
    return list(rows)


def job_search(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    queue_id: int | None = None,
    tenant_id: int | None = None,
    mine: bool = False,
    submitted_since: object | None = None,
) -> QuerySet[Job]:
    """`job_list` plus the API's filters: tenant and submitted since."""
    jobs = job_list(user=user, status=status, queue_id=queue_id, mine=mine)
    if tenant_id is not None:
        jobs = jobs.filter(tenant_id=tenant_id)
    if submitted_since is not None:
        jobs = jobs.filter(submitted_at__gte=submitted_since)
    return jobs


def job_queue_position(
    *, user: AbstractBaseUser | AnonymousUser, job: Job
) -> tuple[list[Job], int]:
    """Jobs ahead of a pending `job` in its queue: same queue, pending, and a higher priority
    or the same priority and submitted earlier (ties broken by id, as the scheduler does).

    Returns (the jobs `user` may see, with `gpus_asked` annotated; how many others).
    """
    from django.db.models import F, Q, Sum
    from django.db.models.functions import Coalesce

    if job.status != Job.Status.PENDING:
        return [], 0
    ahead = (
        Job.objects.filter(queue_id=job.queue_id, status=Job.Status.PENDING)
        .exclude(pk=job.pk)
        .filter(
            Q(priority__gt=job.priority)
            | Q(priority=job.priority, submitted_at__lt=job.submitted_at)
            | Q(priority=job.priority, submitted_at=job.submitted_at, pk__lt=job.pk)
        )
    )
    total = ahead.count()
    visible = list(
        ahead.filter(pk__in=visible_jobs(user).values("pk"))
        .annotate(gpus_asked=Coalesce(Sum(F("tasks__replicas") * F("tasks__gpus")), 0))
        .order_by("-priority", "submitted_at", "pk")
    )
    return visible, total - len(visible)
