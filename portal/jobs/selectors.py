from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Q, QuerySet
from django.shortcuts import get_object_or_404

from jobspec.gpushare import gpu_ask, gpus_number, pod_gpu_ask

from .access import visible_jobs
from .backoff import attempts_of, cap_of, clock_text, in_backoff, job_retry_at, nodes_avoided
from .lifecycle import SCHEDULED, WAITING
from .models import Job, JobTask

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


def card_memory_for(tasks: Iterable[JobTask]) -> int:
    """The GPU memory (MiB) the cycle costs a GPU-memory request on, read only when one of
    `tasks` asks for GPU memory (0 otherwise: nothing is costed on it)."""
    if not any(task.gpu_memory_mib for task in tasks):
        return 0
    from portal.scheduling.mapping import capacity_device_memory_mib

    return capacity_device_memory_mib()


def job_gpu_asks(jobs: Iterable[Job]) -> list[Job]:
    """`jobs` (tasks prefetched) with `gpu_ask` set on each and on each of its tasks: what
    they ask of GPUs, with the cluster's GPU memory read once for all of them."""
    jobs = list(jobs)
    device_mib = card_memory_for(task for job in jobs for task in job.tasks.all())
    for job in jobs:
        tasks = list(job.tasks.all())
        for task in tasks:
            task.gpu_ask = pod_gpu_ask(task, device_mib)
        job.gpu_ask = gpu_ask(tasks, device_mib)
    return jobs


def job_get(*, user: AbstractBaseUser | AnonymousUser, job_id: int) -> Job:
    """The job if the user may see it; Http404 otherwise (never another tenant's data)."""
    jobs = visible_jobs(user).select_related("queue", "tenant", "submitter")
    return get_object_or_404(jobs.prefetch_related("tasks"), pk=job_id)


# --- pages and dashboards -------------------------------------------------------------------


def pending_demand_per_queue(*, never_runnable: bool = False) -> dict[str, int | float]:
    """GPUs asked by pending jobs, per queue name, counted as the jobs' pages count them
    (job_gpu_asks: GPU memory at its cost on the cluster's smallest card). One aggregate
    query, a row per queue and GPU shape, grouped by queue id (no join to the queues over
    every task; names attached afterwards). The demand the scheduler can meet by default:
    jobs the last cycle found can never run as submitted are left out, as the quota plugins
    leave them out of a queue's request; ``never_runnable`` gives theirs alone, to list
    apart."""
    from django.db.models import FloatField, Sum
    from django.db.models.functions import Cast

    from portal.queues.models import Queue

    tasks = JobTask.objects.filter(job__status=Job.Status.PENDING)
    never = Q(job__pending_kind=Job.PendingKind.NEVER)
    tasks = tasks.filter(never) if never_runnable else tasks.exclude(never)
    rows = list(
        tasks.values("job__queue_id", "gpus", "gpu_milli", "gpu_memory_mib")
        # In floating point: whatever a stored job holds, the sum cannot overflow the
        # database's integers (SQLite's SUM raises, PostgreSQL's int4 too).
        .annotate(replicas=Sum(Cast("replicas", FloatField())))
        .order_by()
    )
    shapes = [_Shape(**row) for row in rows]
    device_mib = card_memory_for(shapes)
    milli: dict[int, float] = {}
    for shape in shapes:
        cost = pod_gpu_ask(shape, device_mib).milli
        milli[shape.job__queue_id] = milli.get(shape.job__queue_id, 0.0) + shape.replicas * cost
    names = dict(Queue.objects.filter(pk__in=list(milli)).values_list("pk", "name"))
    return {names[pk]: gpus_number(total) for pk, total in milli.items() if pk in names}


@dataclass(frozen=True)
class _Shape:
    """Tasks of one queue asking for the same GPUs, and how many pods they have."""

    job__queue_id: int
    gpus: int
    gpu_milli: int
    gpu_memory_mib: int
    replicas: float


# Statuses whose jobs the scheduler still places pods for (the cycle's snapshot reads the same).
SCHEDULED_STATUSES = tuple(sorted(SCHEDULED))


def tenant_pending_pods(*, tenant_id: int) -> int:
    """Pods of the tenant's jobs waiting for a node, as the cycle counts them: replicas of the
    jobs it still schedules, less those placed (active, or succeeded while the job goes on).
    On PostgreSQL the database keeps it (portal.jobs.pod_count): its cost does not grow with
    the queue; SQLite recounts."""
    from django.db import connection

    from .pod_count import counted_by_database
    from .pod_count import tenant_pending_pods as counted

    if counted_by_database(connection.vendor):
        return counted(tenant_id)
    return tenant_pending_pods_recount(tenant_id=tenant_id)


def tenant_pending_pods_recount(*, tenant_id: int) -> int:
    """The same figure from the rows themselves (two aggregates over the tenant's jobs): what
    SQLite reads, and what PostgreSQL's count is checked against."""
    from django.db.models import FloatField, Sum
    from django.db.models.functions import Cast

    from portal.cluster.models import Placement

    replicas = JobTask.objects.filter(
        job__tenant_id=tenant_id, job__status__in=SCHEDULED_STATUSES
    ).aggregate(n=Sum(Cast("replicas", FloatField())))["n"]
    placed = Placement.objects.filter(
        job__tenant_id=tenant_id,
        job__status__in=SCHEDULED_STATUSES,
        state__in=[*Placement.ACTIVE_STATES, Placement.State.SUCCEEDED],
    ).count()
    return max(0, int(replicas or 0) - placed)


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
    ahead: list[Job]  # the jobs ahead that the user may see, in line order, gpu_ask set
    hidden: int  # how many others are ahead


def queue_position_text(*, position: int, queue: str) -> str:
    """Where a job waits, in the words of the job page, the why endpoint and the CLI:
    "position 3 in queue nlp-train: 2 jobs ahead", "position 1 in queue nlp-train: next in
    line"."""
    ahead = position - 1
    if not ahead:
        return f"position 1 in queue {queue}: next in line"
    return f"position {position} in queue {queue}: {ahead} job{'s' if ahead > 1 else ''} ahead"


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
    """The jobs of `ids` that `user` may see, in the order of `ids`, with `gpu_ask`."""
    from django.db.models import Prefetch

    tasks = Prefetch(
        "tasks",
        queryset=JobTask.objects.only(
            "id", "job_id", "replicas", "gpus", "gpu_milli", "gpu_memory_mib"
        ),
    )
    jobs: list[Job] = []
    for start in range(0, len(ids), _AHEAD_BATCH):
        batch = list(ids[start : start + _AHEAD_BATCH])
        found = visible_jobs(user).filter(pk__in=batch).select_related("tenant")
        jobs += found.prefetch_related(tasks).order_by()
    rank = {job_id: i for i, job_id in enumerate(ids)}
    jobs.sort(key=lambda other: rank[other.pk])
    return job_gpu_asks(jobs)


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


@dataclass(frozen=True)
class StartAttempts:
    """A job's failed starts for its page (portal.jobs.backoff), newest first, and what its
    backoff says now: when it is tried again, which nodes it avoids until when."""

    rows: list[dict[str, str]]
    next_try: str  # "" when it is not held back
    avoided: list[tuple[str, str]]  # (node, until)
    cap: int  # failed starts of one kind that fail the job (its maxRetry, at least one)


def job_start_attempts(*, job: Job, now: datetime) -> StartAttempts:
    from .limits import start_backoff

    attempts = attempts_of(job.start_attempts)
    backoff = start_backoff()
    rows = [
        {"at": _utc(a.at), "kind": str(a.kind), "node": a.node, "pod": a.pod, "cause": a.cause()}
        for a in reversed(attempts)
    ]
    waiting = job.status in WAITING_STATUSES
    retry_at = job_retry_at(attempts, backoff) if waiting else None
    next_try = clock_text(retry_at) if retry_at is not None and retry_at > now else ""
    avoided = [
        (node, clock_text(until))
        for node, until in (
            nodes_avoided(attempts, backoff, now) if not job.is_terminal else {}
        ).items()
    ]
    return StartAttempts(rows=rows, next_try=next_try, avoided=avoided, cap=cap_of(job.max_retry))


def jobs_backing_off(*, now: datetime) -> int:
    """How many jobs wait their start backoff or avoid a node now (gpuportal_backoff_jobs):
    one query of the jobs with failed starts, nearly none."""
    from .limits import start_backoff

    backoff = start_backoff()
    count = 0
    rows = (
        Job.objects.filter(status__in=sorted(SCHEDULED))
        .exclude(start_attempts=[])
        .values_list("status", "start_attempts")
    )
    for status, stored in rows:
        attempts = attempts_of(stored)
        held = status in WAITING and in_backoff(attempts, backoff, now)
        count += bool(held or nodes_avoided(attempts, backoff, now))
    return count


@dataclass(frozen=True)
class PodNotice:
    """The job's live pods told they are deleted at a deadline: by a preemption with notice,
    or by its run-time limit (scheduler.adapters.notice). The job page, `why` in the API and
    the CLI say it, so a researcher learns of it where they look, not only in the history."""

    deadline: datetime
    given_at: datetime
    pods: int
    preempted: bool  # False: the run-time limit's deadline

    @property
    def text(self) -> str:
        from jobspec.notice import DEADLINE_PATH

        pods = "its pod is" if self.pods == 1 else f"{self.pods} of its pods are"
        cause = "preempted" if self.preempted else "at its run-time limit"
        return (
            f"{cause}: {pods} deleted at {clock_text(self.deadline)} (told at "
            f"{clock_text(self.given_at)}); checkpoint and exit before then. Each pod reads the "
            f"deadline in {DEADLINE_PATH}."
        )


def job_pod_notice(*, job: Job) -> PodNotice | None:
    """The earliest deadline among the job's live pods under notice (None without one, or
    once the job has ended: its pods are deleted at once then)."""
    from django.db.models import Count, Min

    from portal.cluster.models import Placement

    if job.is_terminal:
        return None
    under_notice = Placement.objects.filter(
        job_id=job.pk,
        state__in=Placement.ACTIVE_STATES,
        notice_deadline__isnull=False,
        notice_end="",
    )
    told = under_notice.aggregate(
        deadline=Min("notice_deadline"), given=Min("notice_given_at"), pods=Count("id")
    )
    if told["deadline"] is None:
        return None
    return PodNotice(
        deadline=told["deadline"],
        given_at=told["given"] or told["deadline"],
        pods=told["pods"],
        # By its eviction's event, not the job's status: an elastic job keeps running on the
        # pods it has left while the evicted ones wait for their deadline.
        preempted=under_notice.filter(preemptions__isnull=False).exists(),
    )
