from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from .access import visible_jobs
from .gpushare import MILLI_PER_GPU, gpus_number
from .lifecycle import SCHEDULED, WAITING
from .models import Job

# A job waits for a cycle in these statuses (a preempted one until its pods are gone).
WAITING_STATUSES = tuple(sorted(WAITING))


def job_list(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    queue_id: int | None = None,
    mine: bool = False,
    never_runnable: bool = False,
) -> QuerySet[Job]:
    jobs = visible_jobs(user).select_related("queue", "tenant", "submitter")
    if status:
        jobs = jobs.filter(status=status)
    if never_runnable:
        jobs = jobs.filter(pending_kind=Job.PendingKind.NEVER, status__in=WAITING_STATUSES)
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


def pending_demand_per_queue(*, never_runnable: bool = False) -> dict[str, int | float]:
    """GPUs asked by pending jobs, per queue name, fractions counted exactly (one aggregate
    query, grouped by queue id: no join to the queues over every task; names attached
    afterwards). The demand the scheduler can meet by default: jobs the last cycle found can
    never run as submitted are left out, as the quota plugins leave them out of a queue's
    request; ``never_runnable`` gives theirs alone, to list apart."""
    from django.db.models import F, FloatField, Sum
    from django.db.models.functions import Cast

    from portal.queues.models import Queue

    from .models import JobTask

    tasks = JobTask.objects.filter(job__status=Job.Status.PENDING)
    never = Q(job__pending_kind=Job.PendingKind.NEVER)
    tasks = tasks.filter(never) if never_runnable else tasks.exclude(never)
    rows = (
        tasks.values("job__queue_id")
        # In floating point: whatever a stored job holds, the product and the sum cannot
        # overflow the database's integers (SQLite's SUM raises, PostgreSQL's int4 too).
        .annotate(
            milli=Sum(
                Cast("replicas", FloatField())
                * (Cast("gpus", FloatField()) * MILLI_PER_GPU + F("gpu_milli"))
            )
        )
        .order_by()
        .values_list("job__queue_id", "milli")
    )
    rows = list(rows)
    names = dict(Queue.objects.filter(pk__in=[pk for pk, _ in rows]).values_list("pk", "name"))
    return {names[pk]: gpus_number(milli or 0) for pk, milli in rows if pk in names}


# Statuses whose jobs the scheduler still places pods for (the cycle's snapshot reads the same).
SCHEDULED_STATUSES = tuple(sorted(SCHEDULED))


def tenant_scheduled_replicas(*, tenant_id: int) -> int:
    """Replicas of the tenant's jobs the cycle still schedules, placed or not: a bound on its
    pending pods (`tenant_pending_pods` never exceeds it). One aggregate query."""
    from django.db.models import FloatField, Sum
    from django.db.models.functions import Cast

    from .models import JobTask

    replicas = JobTask.objects.filter(
        job__tenant_id=tenant_id, job__status__in=SCHEDULED_STATUSES
    ).aggregate(n=Sum(Cast("replicas", FloatField())))["n"]
    return int(replicas or 0)


def tenant_pending_pods(*, tenant_id: int, replicas: int | None = None) -> int:
    """Pods of the tenant's jobs waiting for a node, as the cycle counts them: replicas of the
    jobs it still schedules, less those placed (active, or succeeded while the job goes on).
    Two aggregate queries, whatever the number of jobs; one if the caller already read
    `tenant_scheduled_replicas` (`replicas`) in the same transaction."""
    from portal.cluster.models import Placement

    if replicas is None:
        replicas = tenant_scheduled_replicas(tenant_id=tenant_id)
    placed = Placement.objects.filter(
        job__tenant_id=tenant_id,
        job__status__in=SCHEDULED_STATUSES,
        state__in=[*Placement.ACTIVE_STATES, Placement.State.SUCCEEDED],
    ).count()
    return max(0, replicas - placed)


def job_search(
    *,
    user: AbstractBaseUser | AnonymousUser,
    status: str | None = None,
    queue_id: int | None = None,
    tenant_id: int | None = None,
    mine: bool = False,
    submitted_since: object | None = None,
    never_runnable: bool = False,
) -> QuerySet[Job]:
    """`job_list` plus the API's filters: tenant and submitted since."""
    jobs = job_list(
        user=user, status=status, queue_id=queue_id, mine=mine, never_runnable=never_runnable
    )
    if tenant_id is not None:
        jobs = jobs.filter(tenant_id=tenant_id)
    if submitted_since is not None:
        jobs = jobs.filter(submitted_at__gte=submitted_since)
    return jobs


@dataclass(frozen=True)
class QueuePosition:
    """Where a job waits in its queue's line."""

    position: int  # 1 = next in line
    ahead: list[Job]  # the jobs ahead that the user may see, in line order, gpus_asked set
    hidden: int  # how many others are ahead


# Ids per query when reading the jobs ahead (below every database's bound-parameter limit).
_AHEAD_BATCH = 500


def job_queue_position(*, user: AbstractBaseUser | AnonymousUser, job: Job) -> QueuePosition | None:
    """Where the last cycle put a waiting `job` in its queue's line: the configured job order
    the scheduler's reasons count in ("N jobs of queue X come first"), as stored by the cycle
    (portal.queues.models.QueueOrder). None when it is not in that line: it does not wait, it
    can never run as submitted, or no cycle has seen it yet."""
    line, rank = _line_and_rank(job)
    if rank is None:
        return None
    ahead = _visible_jobs_among(user, line[:rank])
    return QueuePosition(rank + 1, ahead, rank - len(ahead))


def job_queue_rank(*, job: Job) -> int | None:
    """`job_queue_position`'s position alone (1 = next in line), without reading the jobs
    ahead."""
    _, rank = _line_and_rank(job)
    return None if rank is None else rank + 1


def _line_and_rank(job: Job) -> tuple[Sequence[int], int | None]:
    from portal.queues.selectors import queue_order_job_ids

    if job.status not in WAITING:
        return (), None
    line = queue_order_job_ids(queue_id=job.queue_id)
    try:
        return line, line.index(job.pk)
    except ValueError:
        return line, None


def _visible_jobs_among(user: AbstractBaseUser | AnonymousUser, ids: Sequence[int]) -> list[Job]:
    """The jobs of `ids` that `user` may see, in the order of `ids`, with `gpus_asked`."""
    from django.db.models import F, Sum
    from django.db.models.functions import Coalesce

    milli_asked = Coalesce(
        Sum(F("tasks__replicas") * (F("tasks__gpus") * MILLI_PER_GPU + F("tasks__gpu_milli"))),
        0,
    )
    jobs: list[Job] = []
    for start in range(0, len(ids), _AHEAD_BATCH):
        batch = list(ids[start : start + _AHEAD_BATCH])
        found = visible_jobs(user).filter(pk__in=batch).select_related("tenant")
        jobs += found.annotate(milli_asked=milli_asked).order_by()
    rank = {job_id: i for i, job_id in enumerate(ids)}
    jobs.sort(key=lambda other: rank[other.pk])
    for other in jobs:
        other.gpus_asked = gpus_number(other.milli_asked)
    return jobs


def pending_wait_stats(*, now: object) -> dict[str, dict[str, float]]:
    """Per queue name: wait-time (seconds since submission, at `now`) quartiles, min, max and
    count of pending jobs.

    PostgreSQL computes them in one grouped query (percentile_cont, the linear interpolation
    of `statistics.quantiles(method="inclusive")`); elsewhere the submission times are read,
    one column per pending job, and the same quartiles computed in Python.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        return _pending_wait_stats_pg(now)
    waits: dict[str, list[float]] = {}
    rows = Job.objects.filter(status=Job.Status.PENDING).values_list("queue__name", "submitted_at")
    for queue, submitted_at in rows:
        waits.setdefault(queue, []).append(max((now - submitted_at).total_seconds(), 0.0))
    return {queue: wait_stats(values) for queue, values in waits.items()}


def wait_stats(waits: list[float]) -> dict[str, float]:
    import statistics

    values = sorted(waits)
    if len(values) == 1:
        q1 = median = q3 = values[0]
    else:
        cuts = statistics.quantiles(values, n=4, method="inclusive")
        q1, median, q3 = cuts
    return {
        "q1": q1,
        "median": median,
        "q3": q3,
        "min": values[0],
        "max": values[-1],
        "count": len(values),
    }


def _pending_wait_stats_pg(now: object) -> dict[str, dict[str, float]]:
    from django.db import connection

    from portal.queues.models import Queue

    # Waits are `now - submitted_at`: quantile q of the waits is quantile 1 - q of the
    # submission times; negative waits (clock skew) count as 0 like in the Python path.
    sql = f"""
        SELECT j.queue_id,
               percentile_cont(ARRAY[0.25, 0.5, 0.75]) WITHIN GROUP (
                   ORDER BY GREATEST(EXTRACT(EPOCH FROM (%s - j.submitted_at)), 0)
               ),
               GREATEST(EXTRACT(EPOCH FROM (%s - MAX(j.submitted_at))), 0),
               GREATEST(EXTRACT(EPOCH FROM (%s - MIN(j.submitted_at))), 0),
               COUNT(*)
        FROM {Job._meta.db_table} j
        WHERE j.status = %s
        GROUP BY j.queue_id
    """  # noqa: S608 - quoted model names; values are bound parameters
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, now, now, Job.Status.PENDING])
        rows = cursor.fetchall()
    names = dict(Queue.objects.filter(pk__in=[row[0] for row in rows]).values_list("pk", "name"))
    return {
        names[queue_id]: {
            "q1": float(quartiles[0]),
            "median": float(quartiles[1]),
            "q3": float(quartiles[2]),
            "min": float(low),
            "max": float(high),
            "count": int(count),
        }
        for queue_id, quartiles, low, high, count in rows
        if queue_id in names
    }


@dataclass(frozen=True)
class JobState:
    """The one state a job's page, the why endpoint and the CLI show.

    A job that waits again after a preemption is "Waiting" with a note on its preemptions,
    not "Preempted": the earlier run is history (the page's preemption table), what counts
    now is why it waits.
    """

    label: str  # "Waiting", "Running", "Succeeded", ...
    css: str  # the status-* class of the badge
    note: str  # "preempted 2 times, last by llama-finetune at 2026-12-01 12:00 UTC", or ""
    waiting: bool
    never: bool  # the last cycle found it can never run as submitted
    reason: str
    reason_title: str

    @property
    def headline(self) -> str:
        return f"{self.label} ({self.note})" if self.note else self.label


# What the stored reason of a job that does not wait says.
_REASON_TITLES = {
    Job.Status.QUARANTINED: "Why the scheduler stopped",
    Job.Status.FAILED: "Why it failed",
}


def job_state(*, user: AbstractBaseUser | AnonymousUser, job: Job) -> JobState:
    waiting = job.status in WAITING_STATUSES
    if not waiting:
        title = _REASON_TITLES.get(job.status, "Note")
        return JobState(
            job.get_status_display(), job.status, "", False, False, job.pending_reason, title
        )
    note = ""
    if job.preemption_count:
        note = _preemption_note(user=user, job=job)
    never = job.pending_kind == Job.PendingKind.NEVER
    label = "Never runnable as submitted" if never else "Waiting"
    title = "Why it cannot run" if never else "Why it is waiting"
    return JobState(label, "pending", note, True, never, job.pending_reason, title)


def _preemption_note(*, user: AbstractBaseUser | AnonymousUser, job: Job) -> str:
    """``preempted 2 times, last by <job> at <time>``; a preemptor of a tenant the user may
    not see stays unnamed (tenant scoping)."""
    from portal.scheduling.models import PreemptionEvent

    count = job.preemption_count
    times = "once" if count == 1 else f"{count} times"
    last = (
        PreemptionEvent.objects.filter(victim_job_id=job.pk)
        .select_related("preemptor_job")
        .order_by("-occurred_at", "-id")
        .first()
    )
    if last is None:
        return f"preempted {times}"
    if last.action == PreemptionEvent.Action.RESCHEDULING:
        by = "by rescheduling"
    elif last.preemptor_job_id is None:
        by = f"by {last.get_action_display().lower()}"
    elif visible_jobs(user).filter(pk=last.preemptor_job_id).exists():
        by = f"by {last.preemptor_job.name}"
    else:
        by = "by a job of another tenant"
    return f"preempted {times}, last {by} at {_utc(last.occurred_at)}"


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def job_pod_names(*, job: Job) -> list[str]:
    """The pods the job has had (every placement, latest first): the ones its logs can be
    asked of (a pod's log lasts as long as the cluster keeps the pod)."""
    from portal.cluster.models import Placement

    return list(
        Placement.objects.filter(job_id=job.pk).order_by("-id").values_list("pod_name", flat=True)
    )
