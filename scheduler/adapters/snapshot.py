"""Build the core's Snapshot from the database in one consistent read.

A fixed number of queries, whatever the number of jobs (no N+1): nodes, queues, open jobs with
their tasks, and the active placements, each one query. The core names jobs by their id and
tasks by their pod name, so its decisions map straight back to rows through `SnapshotIndex`.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Q

from portal.cluster.models import Node, Placement
from portal.jobs.models import Job, JobTask
from portal.queues.models import Queue
from portal.scheduling.models import SchedulerConfig
from scheduler.adapters.cluster.labels import pod_name as task_key
from scheduler.core.config import SchedulerConf, default_conf, parse_conf_text
from scheduler.core.resources import Resources
from scheduler.core.types import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo, TaskStatus

# Jobs the scheduler still has work for; every other status is final or cancelled.
SCHEDULABLE_STATUSES = (
    Job.Status.PENDING,
    Job.Status.ADMITTED,
    Job.Status.RUNNING,
    Job.Status.PREEMPTED,
)
_PLACEMENT_TASK_STATUS = {
    Placement.State.BOUND: TaskStatus.BOUND,
    Placement.State.RUNNING: TaskStatus.RUNNING,
    Placement.State.RELEASING: TaskStatus.RELEASING,
    Placement.State.SUCCEEDED: TaskStatus.SUCCEEDED,
}
GPU_MODEL_LABEL = "gpu-model"
TASK_COLUMNS = (
    "id",
    "job_id",
    "name",
    "replicas",
    "gpus",
    "cpu_millis",
    "memory_bytes",
    "node_selector",
)
JOB_COLUMNS = (
    "id",
    "name",
    "queue_id",
    "tenant_id",
    "priority",
    "min_available",
    "status",
    "submitted_at",
    "pending_reason",
    "preemption_count",
    "expected_duration_seconds",
)


@dataclass(frozen=True)
class PendingReplica:
    task: JobTask
    replica: int


@dataclass
class SnapshotIndex:
    """The rows behind the snapshot's names, for turning decisions back into writes."""

    jobs: dict[str, Job]
    tasks: dict[int, JobTask]
    queues: dict[str, Queue]
    nodes: dict[str, Node]
    # Keyed by the core's task name: stable per (job, task, replica), unlike pod names, which
    # change when a replica is placed again after a preemption.
    placements: dict[str, Placement]  # active placements
    pending: dict[str, PendingReplica]  # replicas without a placement
    pending_gpus: dict[str, int]  # queue name -> GPUs asked by pending replicas


@dataclass
class SnapshotBundle:
    snapshot: Snapshot
    conf: SchedulerConf
    index: SnapshotIndex


def snapshot_build(*, now: datetime) -> SnapshotBundle:
    # REPEATABLE READ on PostgreSQL would be stricter; one transaction is what SQLite offers
    # and, with the cycle lock, nothing else writes placements while this runs.
    with transaction.atomic():
        nodes = list(Node.objects.order_by("name"))
        queues = list(Queue.objects.select_related("tenant").order_by("name"))
        # Active placements of every job hold GPUs, whatever the job's status: a cancelled
        # job's pods keep running until their deletion completes.
        placements = list(
            Placement.objects.filter(
                Q(state__in=Placement.ACTIVE_STATES)
                | Q(state=Placement.State.SUCCEEDED, job__status__in=SCHEDULABLE_STATUSES)
            ).order_by("id")
        )
        holding = Placement.objects.filter(state__in=Placement.ACTIVE_STATES).values("job_id")
        # Only the columns the cycle reads or writes: at 10,000 jobs, building model instances
        # (and parsing their timestamps) is most of the snapshot's cost.
        wanted = Q(status__in=SCHEDULABLE_STATUSES) | Q(id__in=holding)
        jobs = list(Job.objects.filter(wanted).only(*JOB_COLUMNS).order_by("id"))
        tasks = list(
            JobTask.objects.filter(job__in=Job.objects.filter(wanted).values("id"))
            .only(*TASK_COLUMNS)
            .order_by("job_id", "name")
        )
        conf = active_conf()

    by_replica: dict[tuple[int, int], Placement] = {}
    for placement in placements:
        by_replica[(placement.task_id, placement.replica)] = placement
    tasks_of: dict[int, list[JobTask]] = defaultdict(list)
    for task in tasks:
        tasks_of[task.job_id].append(task)
    queue_by_id = {queue.id: queue for queue in queues}
    for job in jobs:
        # Joined in memory from the rows already read, instead of select_related per job.
        job.queue = queue_by_id[job.queue_id]
        job.tenant = job.queue.tenant

    index = SnapshotIndex(
        jobs={str(job.id): job for job in jobs},
        tasks={task.id: task for task in tasks},
        queues={queue.name: queue for queue in queues},
        nodes={node.name: node for node in nodes},
        placements={},
        pending={},
        pending_gpus=defaultdict(int),
    )
    job_infos = [_job_info(job, tasks_of[job.id], by_replica, index) for job in jobs]
    snapshot = Snapshot(
        nodes=tuple(node_info(node) for node in nodes),
        queues=tuple(queue_info(queue) for queue in queues),
        jobs=tuple(job_infos),
        now=now.timestamp(),
    )
    return SnapshotBundle(snapshot=snapshot, conf=conf, index=index)


def active_conf() -> SchedulerConf:
    """The active SchedulerConfig, or the seed conf if an admin never saved one. Saved configs
    were validated by the same parser, so a parse error here means the parser got stricter:
    fall back rather than stop scheduling the whole cluster."""
    config = SchedulerConfig.objects.filter(active=True).only("text").first()
    if config is None:
        return default_conf()
    try:
        return parse_conf_text(config.text)
    except ValueError:
        return default_conf()


def node_info(node: Node) -> NodeInfo:
    labels = {**node.labels, **node.topology_labels}
    if node.gpu_model:
        labels.setdefault(GPU_MODEL_LABEL, node.gpu_model)
    return NodeInfo(
        name=node.name,
        allocatable=Resources.of(
            {
                "cpu": node.cpu_millis,
                "memory": node.memory_bytes,
                node.gpu_resource_name: node.gpu_count,
                "pods": node.pods_capacity,
            }
        ),
        labels=tuple(sorted(labels.items())),
        unschedulable=not node.schedulable,
    )


def queue_info(queue: Queue) -> QueueInfo:
    def limit(gpus: int | None, cpu: int | None, memory: int | None) -> Resources:
        given = {"gpu": gpus, "cpu": cpu, "memory": memory}
        return Resources.unlimited({k: v for k, v in given.items() if v is not None})

    return QueueInfo(
        name=queue.name,
        weight=queue.weight,
        guarantee=Resources.of(
            gpu=queue.guarantee_gpus,
            cpu=queue.guarantee_cpu_millis,
            memory=queue.guarantee_memory_bytes,
        ),
        capability=limit(
            queue.capability_gpus, queue.capability_cpu_millis, queue.capability_memory_bytes
        ),
        borrowing_limit=limit(
            queue.borrowing_limit_gpus,
            queue.borrowing_limit_cpu_millis,
            queue.borrowing_limit_memory_bytes,
        ),
        reclaimable=queue.reclaimable,
        priority=queue.priority,
        state="Open" if queue.state == Queue.State.OPEN else "Closed",
    )


@functools.lru_cache(maxsize=4096)
def _requests(cpu_millis: int, memory_bytes: int, gpus: int) -> Resources:
    # Resources is immutable, and most tasks share a handful of shapes.
    return Resources.of(cpu=cpu_millis, memory=memory_bytes, gpu=gpus)


def task_requests(task: JobTask) -> Resources:
    return _requests(task.cpu_millis, task.memory_bytes, task.gpus)


def _job_info(
    job: Job,
    job_tasks: list[JobTask],
    by_replica: dict[tuple[int, int], Placement],
    index: SnapshotIndex,
) -> JobInfo:
    schedulable = job.status in SCHEDULABLE_STATUSES
    tasks = []
    for task in job_tasks:
        requests = task_requests(task)
        selector = tuple(sorted(task.node_selector.items()))
        for replica in range(task.replicas):
            name = task_key(job.id, task.name, replica)
            placement = by_replica.get((task.id, replica))
            if placement is None and not schedulable:
                continue
            if placement is None:
                index.pending[name] = PendingReplica(task=task, replica=replica)
                index.pending_gpus[job.queue.name] += task.gpus
                status, node = TaskStatus.PENDING, None
            else:
                status, node = _PLACEMENT_TASK_STATUS[placement.state], placement.node_name
                if placement.state in Placement.ACTIVE_STATES:
                    index.placements[name] = placement
            tasks.append(
                TaskInfo(
                    name=name,
                    requests=requests,
                    status=status,
                    node=node,
                    role=task.name,
                    node_selector=selector,
                )
            )
    return JobInfo(
        name=str(job.id),
        queue=job.queue.name,
        tasks=tuple(tasks),
        priority=job.priority,
        min_available=job.min_available,
        created=job.submitted_at.timestamp(),
        namespace=job.tenant.name,
    )
