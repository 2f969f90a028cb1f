"""Build the core's Snapshot from the database in one consistent read.

A fixed number of queries, whatever the number of jobs (no N+1): nodes, queues, open jobs, their
tasks and the active placements, each one query. The rows become the core's types through the
one ORM -> core mapping (portal.scheduling.mapping). The core names jobs by their id and tasks
by their pod name, so its decisions map straight back to rows through `SnapshotIndex`.

Jobs, tasks and placements are read as plain tuples into the mapping's slotted rows: the cycle
only reads these columns and writes a few of them back by id (`scheduler.adapters.persist`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F, FloatField, Func, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from jobspec.limits import JobLimits
from scheduler.adapters.backoff import Backoff, avoiding, backoff_read
from scheduler.adapters.feasibility import conf_with_hard_feasibility
from scheduler.adapters.history import snapshot_history
from scheduler.adapters.portal_port import (
    JOB_COLUMNS,
    PLACEMENT_COLUMNS,
    SCHEDULABLE_STATUSES,
    TASK_COLUMNS,
    Job,
    JobRow,
    JobTask,
    Node,
    PendingReplica,
    Placement,
    PlacementRow,
    Queue,
    TaskRow,
    active_conf,
    capacity_nodes,
    device_memory_mib,
    held_pods,
    job_info,
    job_limits,
    node_info,
    queue_tree,
    run_of,
    scheduled_queues,
    tolerations_of,
    wants_tree,
)
from scheduler.adapters.quarantine import (
    Fault,
    Faults,
    index_forget,
    nodes_held_off,
    placements_held,
    within_limits,
)
from scheduler.adapters.usage_history import queue_usage_history
from scheduler.core.config import SchedulerConf
from scheduler.core.types import JobInfo, Snapshot


class EpochFloat(Func):
    """Seconds since 1970 of a PostgreSQL timestamp, as a float equal to datetime.timestamp():
    EXTRACT gives the exact decimal, and both sides round it to the nearest double."""

    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)"
    output_field = FloatField()


@dataclasses.dataclass
class SnapshotIndex:
    """The rows behind the snapshot's names, for turning decisions back into writes."""

    jobs: dict[str, JobRow]
    tasks: dict[int, TaskRow]
    queues: dict[str, Queue]
    nodes: dict[str, Node]
    # Keyed by the core's task name: stable per (job, task, replica), unlike pod names, which
    # change when a replica is placed again after a preemption.
    placements: dict[str, PlacementRow]  # active placements
    pending: dict[str, PendingReplica]  # replicas without a placement
    pending_gpus: dict[str, float]  # queue name -> GPUs asked by pending replicas (0.25 ...)
    # The smallest GPU memory (MiB) any node reports for its cards: what a GPU-memory request
    # is costed against before it lands on a card (jobspec.gpushare.milli_cost).
    device_mib: int = 0


@dataclasses.dataclass
class SnapshotBundle:
    snapshot: Snapshot
    conf: SchedulerConf
    index: SnapshotIndex
    # Jobs whose rows made their JobInfo fail: left out, for the cycle to quarantine.
    faults: list[Fault] = dataclasses.field(default_factory=list)
    # Jobs whose pods failed to start, backing off (held back ones are left out).
    backoff: Backoff = dataclasses.field(default_factory=Backoff)


def snapshot_build(*, now: datetime) -> SnapshotBundle:
    # REPEATABLE READ on PostgreSQL would be stricter; one transaction is what SQLite offers
    # and, with the cycle lock, nothing else writes placements while this runs.
    with transaction.atomic():
        # NotReady and deleted nodes are no capacity (a pod there counts for its queue only),
        # as in Volcano's cache Snapshot (pkg/scheduler/cache/cache.go skips a node whose
        # NodeInfo is not Ready).
        nodes = capacity_nodes()
        queues = scheduled_queues()
        # Each set below is the UNION ALL of two index-friendly halves (each unordered:
        # SQLite refuses ORDER BY inside a compound query) rather than one `a OR b`, which
        # PostgreSQL answers across a join or a subquery by scanning the whole table, and
        # finished jobs pile up there (with 300,000 of them, this read took 3x as long).
        # Active placements of every job hold GPUs, whatever the job's status: a cancelled
        # job's pods keep running until their deletion completes.
        active = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
        succeeded = Placement.objects.filter(
            state=Placement.State.SUCCEEDED, job__status__in=SCHEDULABLE_STATUSES
        )
        placements = [
            PlacementRow(*row)
            for row in active.values_list(*PLACEMENT_COLUMNS)
            .order_by()
            .union(succeeded.values_list(*PLACEMENT_COLUMNS).order_by(), all=True)
            .order_by("id")
        ]
        # Parsing 10,000 timestamps only to take .timestamp() of them was a fifth of this
        # function's time; PostgreSQL hands over the same float (SQLite's own arithmetic would
        # round it to the millisecond, so its timestamps are still parsed here).
        created = (
            EpochFloat("submitted_at") if connection.vendor == "postgresql" else F("submitted_at")
        )
        # Jobs with work left, and jobs in any other status that still hold GPUs.
        schedulable = Job.objects.filter(status__in=SCHEDULABLE_STATUSES)
        holding = Job.objects.filter(id__in=active.values("job_id")).exclude(
            status__in=SCHEDULABLE_STATUSES
        )
        job_columns = [created if c == "created" else c for c in JOB_COLUMNS]
        jobs = [
            JobRow(*row)
            for row in schedulable.values_list(*job_columns)
            .order_by()
            .union(holding.values_list(*job_columns).order_by(), all=True)
            .order_by("id")
        ]
        if not isinstance(created, EpochFloat):
            for job in jobs:
                job.created = job.created.timestamp()
        # node_selector and tolerations as JSON text: nearly every task has none, and "{}" or
        # "[]" needs no decoding (the JSON field's converter decoded it for each of 10,000
        # tasks).
        task_columns = (
            *TASK_COLUMNS[:-4],
            Cast("node_selector", TextField()),
            Cast("tolerations", TextField()),
            Cast(KT("pod_template__spec__affinity"), TextField()),
            Cast(KT("pod_template__metadata__labels"), TextField()),
        )
        tasks = [
            TaskRow(
                *row[:-4],
                json.loads(row[-4]) if row[-4] != "{}" else {},
                tolerations_of(row[-3]),
                json.loads(row[-2]) if row[-2] else None,
                json.loads(row[-1]) if row[-1] else None,
            )
            for row in JobTask.objects.filter(job__status__in=SCHEDULABLE_STATUSES)
            .values_list(*task_columns)
            .order_by()
            .union(
                JobTask.objects.filter(job__in=holding.values("id"))
                .values_list(*task_columns)
                .order_by(),
                all=True,
            )
            .order_by("job_id", "name")
        ]
        conf = conf_with_hard_feasibility(active_conf())
        usage = queue_usage_history(conf=conf, queue_ids=[q.id for q in queues], now=now)
        history = snapshot_history(conf=conf, now=now)
        backoff = backoff_read(now=now)

        placements += _held_failures()

    by_replica = {(p.task_id, p.replica): p for p in placements}
    tasks_of: dict[int, list[TaskRow]] = defaultdict(list)
    for task in tasks:
        tasks_of[task.job_id].append(task)
    queue_by_id = {queue.id: queue for queue in queues}
    for job in jobs:
        job.queue = queue_by_id[job.queue_id]

    index = SnapshotIndex(
        jobs={str(job.id): job for job in jobs},
        tasks={task.id: task for task in tasks},
        queues={queue.name: queue for queue in queues},
        nodes={node.name: node for node in nodes},
        placements={},
        pending={},
        pending_gpus=defaultdict(float),
        device_mib=device_memory_mib(nodes),
    )
    # A job whose rows break its JobInfo is left out and reported, the others go on; so are
    # quarantined jobs, and waiting jobs in their start backoff (which leave the index too:
    # their reason is the backoff's, not the core's). Their active placements' resources are
    # held off their nodes.
    faults = Faults()
    job_infos = []
    left_out: set[int] = set()
    limits = job_limits()
    placed = {placement.job_id for placement in placements}
    for job in jobs:
        if job.status == Job.Status.QUARANTINED or job.id in backoff.held:
            left_out.add(job.id)
            if job.id in backoff.held:
                del index.jobs[str(job.id)]
            continue
        args = (job, tasks_of[job.id], by_replica, index)
        build = job_info if job.id in placed else functools.partial(_new_job_info, limits)
        if (info := faults.call("snapshot", job.id, build, *args)) is not None:
            if job.id in backoff.avoid:
                info = avoiding(info, backoff.avoid[job.id])
            job_infos.append(info)
        else:
            index_forget(index, job.id)  # what it registered before failing
            left_out.add(job.id)
    held = placements_held((p for p in placements if p.job_id in left_out), index.tasks)
    snapshot = Snapshot(
        nodes=nodes_held_off((node_info(node) for node in nodes), held),
        queues=queue_tree(queues, tree=wants_tree(conf), usage=usage),
        jobs=tuple(job_infos),
        now=now.timestamp(),
        **history,
    )
    return SnapshotBundle(snapshot=snapshot, conf=conf, index=index, faults=faults, backoff=backoff)


def _held_failures() -> list[PlacementRow]:
    """The failed pods that wait for a delayed policy action of their job's run
    (portal.jobs.delays): their replicas are not placed again meanwhile, as upstream keeps a
    failed pod until its delayed action runs. Two small reads, of the few jobs with a delay."""
    delayed = Job.objects.filter(
        policy_due_at__isnull=False, status__in=[Job.Status.ADMITTED, Job.Status.RUNNING]
    ).values_list("id", "admitted_at", "policy_delays")
    pods = {
        job_id: held_pods(delays, run=run_of(admitted_at))
        for job_id, admitted_at, delays in delayed
    }
    names = set().union(*pods.values()) if pods else set()
    if not names:
        return []
    return [
        PlacementRow(*row)
        for row in Placement.objects.filter(
            job_id__in=list(pods), state=Placement.State.FAILED, pod_name__in=sorted(names)
        ).values_list(*PLACEMENT_COLUMNS)
    ]


def _new_job_info(
    limits: JobLimits,
    job: JobRow,
    job_tasks: list[TaskRow],
    by_replica: dict[tuple[int, int], PlacementRow],
    index: SnapshotIndex,
) -> JobInfo:
    """A job with nothing placed yet must be within the limits in force: one stored before
    them (200,000 replicas took a cycle from 0.013 s to 16.9 s) would cost every cycle.
    Placed jobs keep running whatever an operator lowers."""
    within_limits(job, job_tasks, limits)
    return job_info(job, job_tasks, by_replica, index)
