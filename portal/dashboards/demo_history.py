"""A few hours of past work for the embedded demo, so a fresh demo's dashboards are not empty.

The story, on the demo cluster (gpu-worker-1..4, 8 GPUs each): a 16-GPU fine-tune of
nlp-train and a sweep of vision-train fill three nodes while vision-batch borrows the fourth;
when platform-infra submits a 4-GPU benchmark into the full cluster, the scheduler's reclaim
takes a pod of vision-batch's clip-embed back (platform-infra is below its deserved share,
vision-batch above its own) and the second pod goes with its gang; clip-embed waits, runs again
once the fine-tune ends, and succeeds. One job fails. Everything has finished by the time the
demo's own jobs are submitted.

Written through the real services and models: jobs by `job_submit`, their statuses moved on
by the lifecycle table (`portal.jobs.lifecycle`, stamped at the story's times, as the cycle's
writers move them), placements by `placement_create`, evictions as
PreemptionEvents with the sentences the scheduler writes, per-minute usage samples whose
allocated and pending GPUs are the story's and whose deserved shares come from the core's
proportion plugin (`portal.queues.preview.deserved_gpus`), then the hourly and daily rollups,
and the usage ledger's months as the cycles would have booked them (the booking rules of
portal.accounting.booking, interval by interval), so the usage report tells the same story as
the dashboards. This seed is the only writer of the ledger besides the cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from portal.accounting.booking import (
    MILLI,
    Amounts,
    Line,
    OpenPlacement,
    book,
    epoch_seconds,
    from_epoch_seconds,
    month_of,
)
from portal.accounting.models import LedgerEntry
from portal.cluster.models import Node, Placement, whole_second
from portal.cluster.services import placement_create
from portal.jobs import services as jobs
from portal.jobs.lifecycle import Event, Status, transition
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.queues.preview import deserved_gpus
from portal.scheduling.mapping import active_conf, node_info, queue_tree, wants_tree
from portal.scheduling.models import PreemptionEvent, QueueUsageSample
from portal.scheduling.rollups import usage_rollups_rebuild
from scheduler.core.resources import Resources

GiB = 1024**3
IMAGE = "ghcr.io/example/trainer:latest"
HISTORY_MINUTES = 360
RECLAIM_SENTENCE = (
    "reclaimed for {task} of job {job}: queue {queue} is below its deserved share and queue "
    "{victim_queue} is above its own"
)
GANG_SENTENCE = "released with its gang: {job} fell below min_available {min_available}"


@dataclass(frozen=True)
class Run:
    """One attempt: minutes before now it started and ended, and the node of each pod (in
    task order, replica by replica)."""

    start: int
    end: int
    nodes: tuple[str, ...]
    reclaimed_by: str | None = None


@dataclass(frozen=True)
class PastJob:
    name: str
    queue: str
    submitter: str
    roles: tuple[tuple[str, int, int], ...]  # (role, replicas, GPUs per replica)
    submitted: int  # minutes before now
    runs: tuple[Run, ...]
    failed: bool = False
    priority: int = 0

    @property
    def gpus_per_pod(self) -> list[int]:
        return [gpus for _, replicas, gpus in self.roles for _ in range(replicas)]


W1, W2, W3, W4 = (f"gpu-worker-{index}" for index in range(1, 5))
PAST_JOBS = (
    PastJob(
        "gpt2-sft",
        "nlp-train",
        "researcher",
        (("master", 1, 8), ("worker", 1, 8)),
        360,
        (Run(359, 180, (W1, W2)),),
    ),
    PastJob(
        "resnet-sweep",
        "vision-train",
        "lead",
        (("worker", 4, 2),),
        346,
        (Run(345, 200, (W3,) * 4),),
    ),
    PastJob(
        "clip-embed",
        "vision-batch",
        "lead",
        (("worker", 2, 4),),
        330,
        (Run(329, 240, (W4, W4), reclaimed_by="nccl-bench"), Run(175, 60, (W1, W1))),
    ),
    PastJob(
        "nccl-bench",
        "platform-infra",
        "admin",
        (("worker", 2, 2),),
        241,
        (Run(240, 225, (W4, W4)),),
    ),
    PastJob(
        "frame-dedup", "vision-batch", "lead", (("worker", 1, 8),), 222, (Run(220, 15, (W4,)),)
    ),
    PastJob(
        "vit-finetune",
        "vision-train",
        "lead",
        (("master", 1, 4), ("worker", 1, 4)),
        196,
        (Run(195, 90, (W3, W3)),),
    ),
    PastJob(
        "llama-chat-eval",
        "nlp-interactive",
        "lead",
        (("master", 1, 4),),
        171,
        (Run(170, 120, (W2,)),),
        priority=10,
    ),
    PastJob(
        "tokenizer-train",
        "nlp-train",
        "researcher",
        (("worker", 1, 2),),
        150,
        (Run(149, 100, (W2,)),),
        failed=True,
    ),
)


@transaction.atomic
def demo_history_seed(*, users: dict[str, Any], now: datetime | None = None) -> str:
    """Write the story once (a database that has usage samples or any of its jobs is left
    alone). Returns a line for the seed command's output."""
    names = [job.name for job in PAST_JOBS]
    if QueueUsageSample.objects.exists() or Job.objects.filter(name__in=names).exists():
        return "demo history: already there"
    nodes = {node.name: node for node in Node.objects.filter(name__in=[W1, W2, W3, W4])}
    if len(nodes) < 4:
        return "demo history: skipped (the demo cluster's nodes are not all there)"
    now = now or timezone.now()
    queues = {queue.name: queue for queue in Queue.objects.select_related("tenant")}
    created = {spec.name: _job(spec, users, queues, nodes, now) for spec in PAST_JOBS}
    events = _reclaims(created, now)
    samples = _usage_samples(queues, now)
    usage_rollups_rebuild()
    _ledger(created, queues)
    return (
        f"demo history: {len(created)} finished jobs, {events} evictions and {samples} usage "
        f"samples over the last {HISTORY_MINUTES // 60} hours"
    )


def _at(now: datetime, minutes_ago: int) -> datetime:
    return now - timedelta(minutes=minutes_ago)


def _job(spec: PastJob, users, queues, nodes, now: datetime) -> Job:
    tasks = [
        {
            "name": role,
            "replicas": replicas,
            "image": IMAGE,
            "command": ["python", "train.py"],
            "gpus": gpus,
            "cpu_millis": 8000 * gpus,
            "memory_bytes": 64 * GiB * gpus,
        }
        for role, replicas, gpus in spec.roles
    ]
    job = jobs.job_submit(
        submitter=users[spec.submitter],
        queue=queues[spec.queue],
        name=spec.name,
        tasks=tasks,
        priority=spec.priority,
        expected_duration_seconds=60 * (spec.runs[-1].start - spec.runs[-1].end),
    )
    job.submitted_at = _at(now, spec.submitted)
    changed = {"submitted_at"}
    pods = [(task, replica) for task in job.tasks.all() for replica in range(task.replicas)]
    for number, run in enumerate(spec.runs):
        start, end = _at(now, run.start), _at(now, run.end)
        changed |= _step(job, Event.ADMIT, start)
        changed |= _step(job, Event.START, start)
        last = number == len(spec.runs) - 1
        if run.reclaimed_by:
            state = Placement.State.DELETED
        elif spec.failed and last:
            state = Placement.State.FAILED
        else:
            state = Placement.State.SUCCEEDED
        for (task, replica), node in zip(pods, run.nodes, strict=True):
            placement = placement_create(task=task, replica=replica, node=nodes[node], state=state)
            Placement.objects.filter(pk=placement.pk).update(
                created_at=start,
                updated_at=end,
                started_at=whole_second(start),
                ended_at=whole_second(end),
            )
        if run.reclaimed_by:
            changed |= _step(job, Event.PREEMPT, end)
            # As the cycle does: the eviction's sentence stays the reason until it reschedules.
            changed |= _step(job, Event.REQUEUE, end, reason=_reclaim_sentence(spec, run))
        elif last:
            changed |= _step(job, Event.FAIL if spec.failed else Event.SUCCEED, end)
    job.full_clean()
    job.save(update_fields=sorted(changed))
    return job


def _step(job: Job, event: Event, at: datetime, reason: str = "") -> set[str]:
    """Move the job on by the lifecycle table, in memory; returns the fields it set. A job
    requeued waits with `reason`; a job that leaves pending has none."""
    fields = set(transition(job.status, event).apply(job, at))
    if job.status == Status.PENDING:
        job.pending_reason, job.pending_reason_at = reason, at
        return fields | {"pending_reason", "pending_reason_at"}
    job.pending_reason = ""
    return fields | {"pending_reason"}


def _reclaim_sentence(victim: PastJob, run: Run) -> str:
    preemptor = next(spec for spec in PAST_JOBS if spec.name == run.reclaimed_by)
    return RECLAIM_SENTENCE.format(
        task=f"{preemptor.roles[0][0]}-0",
        job=preemptor.name,
        queue=preemptor.queue,
        victim_queue=victim.queue,
    )


def _reclaims(created: dict[str, Job], now: datetime) -> int:
    """One PreemptionEvent per pod the story's reclaims evicted: the first pod for the
    preemptor, the rest of the gang with it."""
    events = []
    for spec in PAST_JOBS:
        for run in spec.runs:
            if not run.reclaimed_by:
                continue
            victim, preemptor = created[spec.name], created[run.reclaimed_by]
            pods = [
                (f"{task.name}-{replica}", task.gpus)
                for task in victim.tasks.order_by("id")
                for replica in range(task.replicas)
            ]
            for index, ((pod, gpus), node) in enumerate(zip(pods, run.nodes, strict=True)):
                if index == 0:
                    sentence = _reclaim_sentence(spec, run)
                else:
                    sentence = GANG_SENTENCE.format(
                        job=victim.name, min_available=victim.min_available
                    )
                events.append(
                    PreemptionEvent(
                        victim_job=victim,
                        victim_task_name=pod,
                        victim_queue=victim.queue,
                        victim_tenant=victim.tenant,
                        node_name=node,
                        preemptor_job=preemptor,
                        preemptor_queue=preemptor.queue,
                        action=PreemptionEvent.Action.RECLAIM,
                        gpus_freed=gpus,
                        occurred_at=_at(now, run.end),
                        sentence=sentence,
                    )
                )
    PreemptionEvent.objects.bulk_create(events)
    return len(events)


def _ledger(created: dict[str, Job], queues: dict[str, Queue]) -> None:
    """Book the story's placements as the cycles would have: between each two moments a pod
    started or ended, each queue's line is its guarantee (the cycle's min(guarantee,
    deserved) is the same here: a queue's deserved share is below its guarantee only when its
    demand is), oldest pods first; a reclaimed pod's work is lost when it is evicted. A
    ledger that already has rows is left alone."""
    if LedgerEntry.objects.exists():
        return
    rows = Placement.objects.filter(job__in=created.values()).select_related("job", "task")
    placements = [
        OpenPlacement(
            id=row.pk,
            tenant_id=row.job.tenant_id,
            queue_id=row.job.queue_id,
            user_id=row.job.submitter_id,
            started_at=epoch_seconds(row.started_at),
            ended_at=epoch_seconds(row.ended_at),
            gpu_milli=max(row.gpu_milli, row.gpus * MILLI),
            cpu_milli=row.task.cpu_millis,
        )
        for row in rows
    ]
    reclaimed = {
        row.pk: epoch_seconds(row.ended_at) for row in rows if row.state == Placement.State.DELETED
    }
    lines = {
        queue.pk: Line(queue.guarantee_gpus * MILLI, queue.guarantee_cpu_millis)
        for queue in queues.values()
    }
    moments = sorted({p.started_at for p in placements} | {p.ended_at for p in placements})
    totals: dict[tuple, Amounts] = {}
    for since, until in zip(moments, moments[1:], strict=False):
        lost = {pk: at for pk, at in reclaimed.items() if at == until}
        month = month_of(from_epoch_seconds(until))
        booked = book(placements, lines=lines, lost=lost, since=since, until=until)
        for key, amounts in booked.items():
            totals[(month, *key)] = totals.get((month, *key), Amounts()).add(amounts)
    LedgerEntry.objects.bulk_create(
        LedgerEntry(
            month=month,
            tenant_id=tenant_id,
            queue_id=queue_id,
            user_id=user_id,
            **dict(zip(LedgerEntry.AMOUNTS, amounts.values(), strict=True)),
        )
        for (month, tenant_id, queue_id, user_id), amounts in sorted(totals.items())
    )


def _usage_samples(queues: dict[str, Queue], now: datetime) -> int:
    """One sample per queue per minute, as the cycle writes them: allocated and pending GPUs
    from the story, deserved from the proportion plugin for that minute's demand."""
    node_infos = [node_info(node) for node in Node.objects.order_by("name")]
    tree = wants_tree(active_conf())
    queue_infos = queue_tree([queues[name] for name in sorted(queues)], tree=tree)
    shares: dict[tuple, dict[str, float]] = {}
    samples = []
    for minutes_ago in range(HISTORY_MINUTES, 0, -1):
        allocated, pending = _gpus_at(minutes_ago)
        demand = {
            name: allocated.get(name, 0) + pending.get(name, 0)
            for name in queues
            if allocated.get(name, 0) + pending.get(name, 0)
        }
        key = tuple(sorted(demand.items()))
        if key not in shares:
            shares[key] = deserved_gpus(
                nodes=node_infos,
                queues=queue_infos,
                demand={name: Resources.of(gpu=gpus) for name, gpus in demand.items()},
                tree=tree,
            )
        for name, queue in queues.items():
            gpus = allocated.get(name, 0)
            samples.append(
                QueueUsageSample(
                    queue=queue,
                    at=_at(now, minutes_ago),
                    gpus_allocated=gpus,
                    gpus_deserved=round(shares[key].get(name, 0.0), 2),
                    gpus_pending=pending.get(name, 0),
                    cpu_millis_allocated=8000 * gpus,
                    memory_bytes_allocated=64 * GiB * gpus,
                )
            )
    QueueUsageSample.objects.bulk_create(samples, batch_size=1000)
    return len(samples)


def _gpus_at(minutes_ago: int) -> tuple[dict[str, int], dict[str, int]]:
    """GPUs allocated and GPUs pending per queue name at that minute of the story."""
    allocated: dict[str, int] = {}
    pending: dict[str, int] = {}
    for spec in PAST_JOBS:
        total = sum(spec.gpus_per_pod)
        running = any(run.end < minutes_ago <= run.start for run in spec.runs)
        finished = minutes_ago <= spec.runs[-1].end
        submitted = minutes_ago <= spec.submitted
        if running:
            allocated[spec.queue] = allocated.get(spec.queue, 0) + total
        elif submitted and not finished:
            pending[spec.queue] = pending.get(spec.queue, 0) + total
    return allocated, pending
