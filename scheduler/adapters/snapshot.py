"""Build the core's Snapshot from the database in one consistent read.

A fixed number of queries, whatever the number of jobs (no N+1): nodes, queues, open jobs, their
tasks and the active placements, each one query. The core names jobs by their id and tasks by
their pod name, so its decisions map straight back to rows through `SnapshotIndex`.

Jobs, tasks and placements are read as plain tuples into slotted rows, not model instances: at
10,000 jobs, building model instances was most of the snapshot's cost, and the cycle only
reads these columns and writes a few of them back by id (`scheduler.adapters.persist`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import defaultdict
from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection, transaction
from django.db.models import F, FloatField, Func, TextField
from django.db.models.fields.json import KT
from django.db.models.functions import Cast

from portal.cluster.models import Node, Placement
from portal.jobs.gpushare import MILLI_PER_GPU
from portal.jobs.lifecycle import SCHEDULED
from portal.jobs.limits import JobLimits, job_limits
from portal.jobs.models import Job, JobTask
from portal.queues.models import Queue
from portal.scheduling.mapping import (
    MIB,
    active_conf,
    capacity_nodes,
    device_memory_mib,
    node_info,
    queue_tree,
    requests_of,
    scheduled_queues,
    task_requests,
    tolerations_of,
    wants_tree,
)
from scheduler.adapters.cluster.labels import JOB_ID
from scheduler.adapters.cluster.labels import pod_name as task_key
from scheduler.adapters.cluster.podspec import affinity_for_job
from scheduler.adapters.feasibility import conf_with_hard_feasibility
from scheduler.adapters.history import snapshot_history
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
from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, Snapshot, TaskInfo, TaskStatus, Toleration

# Jobs the scheduler still has work for; every other status is final or cancelled.
SCHEDULABLE_STATUSES = tuple(sorted(SCHEDULED))
_PLACEMENT_TASK_STATUS = {
    Placement.State.BOUND: TaskStatus.BOUND,
    Placement.State.RUNNING: TaskStatus.RUNNING,
    Placement.State.RELEASING: TaskStatus.RELEASING,
    Placement.State.SUCCEEDED: TaskStatus.SUCCEEDED,
}


class EpochSeconds(Func):
    """Seconds since 1970 of a PostgreSQL timestamp, as a float equal to datetime.timestamp():
    EXTRACT gives the exact decimal, and both sides round it to the nearest double."""

    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)"
    output_field = FloatField()


@dataclasses.dataclass(slots=True)
class JobRow:
    """The Job columns the cycle reads; persist updates `status`, `pending_reason`,
    `pending_kind` and `preemption_count` in place as it writes them, so later steps see the
    new values."""

    id: int
    name: str
    queue_id: int
    priority: int
    min_available: int
    status: str
    created: float  # submitted_at as seconds since 1970 (the core's JobInfo.created)
    pending_reason: str
    pending_kind: str
    preemption_count: int
    queue: Queue | None = None  # joined in memory from the queues read


@dataclasses.dataclass(frozen=True, slots=True)
class TaskRow:
    id: int
    job_id: int
    name: str
    replicas: int
    gpus: int
    gpu_milli: int  # a share of one device (portal.jobs.gpushare)
    gpu_memory_mib: int
    cpu_millis: int
    memory_bytes: int
    node_selector: dict[str, str]
    tolerations: tuple[Toleration, ...]
    # The template's spec.affinity (portal.jobs.affinity) and metadata.labels: None for
    # nearly every task.
    affinity: Any
    template_labels: Any


@dataclasses.dataclass(slots=True)
class PlacementRow:
    id: int
    job_id: int
    task_id: int
    replica: int
    node_name: str
    state: str
    gpus: int
    gpu_milli: int  # what the pod holds on its node (a memory request's cost is the node's)
    gpu_devices: list[int]
    started_at: datetime  # the bind: what cdp measures a pod's minimum run time from


def _read_columns(row: type) -> tuple[str, ...]:
    """The columns a row class is read from: its fields in order, but those with a default
    (filled in memory, like JobRow.queue)."""
    return tuple(f.name for f in dataclasses.fields(row) if f.default is dataclasses.MISSING)


JOB_COLUMNS = _read_columns(JobRow)
TASK_COLUMNS = _read_columns(TaskRow)
PLACEMENT_COLUMNS = _read_columns(PlacementRow)


class PendingReplica(NamedTuple):
    # A tuple: one per pending replica (12,000 at 10,000 jobs), built faster than a dataclass.
    task: TaskRow
    replica: int


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
    # is costed against before it lands on a card (portal.jobs.gpushare.milli_cost).
    device_mib: int = 0


@dataclasses.dataclass
class SnapshotBundle:
    snapshot: Snapshot
    conf: SchedulerConf
    index: SnapshotIndex
    # Jobs whose rows made their JobInfo fail: left out, for the cycle to quarantine.
    faults: list[Fault] = dataclasses.field(default_factory=list)


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
            EpochSeconds("submitted_at") if connection.vendor == "postgresql" else F("submitted_at")
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
        if not isinstance(created, EpochSeconds):
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
    # quarantined jobs. Their active placements' resources are held off their nodes.
    faults = Faults()
    job_infos = []
    left_out: set[int] = set()
    limits = job_limits()
    placed = {placement.job_id for placement in placements}
    for job in jobs:
        if job.status == Job.Status.QUARANTINED:
            left_out.add(job.id)
            continue
        args = (job, tasks_of[job.id], by_replica, index)
        build = _job_info if job.id in placed else functools.partial(_new_job_info, limits)
        if (info := faults.call("snapshot", job.id, build, *args)) is not None:
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
    return SnapshotBundle(snapshot=snapshot, conf=conf, index=index, faults=faults)


def _held(requests: Resources, placement: PlacementRow) -> Resources:
    """A placed pod's requests with the GPUs it holds on its node: a GPU-memory request costs
    that node's device's share, which may be more than the snapshot's lower bound."""
    if not placement.gpu_milli or placement.gpu_milli / MILLI_PER_GPU == requests.get("gpu"):
        return requests
    return requests_of(int(requests.get("cpu")), int(requests.get("memory")), placement.gpu_milli)


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
    return _job_info(job, job_tasks, by_replica, index)


def _job_info(
    job: JobRow,
    job_tasks: list[TaskRow],
    by_replica: dict[tuple[int, int], PlacementRow],
    index: SnapshotIndex,
) -> JobInfo:
    schedulable = job.status in SCHEDULABLE_STATUSES
    queue = job.queue
    tasks = []
    # Pod labels matter only to pod anti-affinity, which the portal confines to the job's own
    # pods (podspec.affinity_for_job): labelled only in the jobs that have some.
    job_label = (JOB_ID, str(job.id))
    labelled = any((task.affinity or {}).get("podAntiAffinity") for task in job_tasks)
    for task in job_tasks:
        requests = task_requests(task, index.device_mib)
        selector = tuple(sorted(task.node_selector.items())) if task.node_selector else ()
        affinity = affinity_for_job(task.affinity, job_label[1]) if task.affinity else None
        labels: tuple[tuple[str, str], ...] = ()
        if labelled:
            labels = tuple(sorted({**(task.template_labels or {}), JOB_ID: job_label[1]}.items()))
        for replica in range(task.replicas):
            name = task_key(job.id, task.name, replica)
            placement = by_replica.get((task.id, replica))
            if placement is None and not schedulable:
                continue
            if placement is None:
                index.pending[name] = PendingReplica(task=task, replica=replica)
                index.pending_gpus[queue.name] += requests.get("gpu")
                status, node = TaskStatus.PENDING, None
            else:
                status, node = _PLACEMENT_TASK_STATUS[placement.state], placement.node_name
                if placement.state in Placement.ACTIVE_STATES:
                    index.placements[name] = placement
            tasks.append(
                TaskInfo(
                    name=name,
                    requests=requests if placement is None else _held(requests, placement),
                    gpu_memory=task.gpu_memory_mib * MIB,
                    gpu_indices=tuple(placement.gpu_devices or ()) if placement else (),
                    started=placement.started_at.timestamp() if placement else None,
                    status=status,
                    node=node,
                    role=task.name,
                    node_selector=selector,
                    tolerations=task.tolerations,
                    affinity=affinity,
                    labels=labels,
                )
            )
    return JobInfo(
        name=str(job.id),
        queue=queue.name,
        tasks=tuple(tasks),
        priority=job.priority,
        min_available=job.min_available,
        created=job.created,
        # The queue's tenant, as the job's own tenant_id is always the queue's (job_submit).
        namespace=queue.tenant.name,
    )
