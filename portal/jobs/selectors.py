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
