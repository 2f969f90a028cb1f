"""Write one cycle's decisions in one transaction: placements for binds, releases and
PreemptionEvents for evictions, job statuses and pending reasons, the queues' lines, usage
samples, counts.

The cost grows with the number of changed rows, in a handful of statements per cycle: rows that
get the same values share one `UPDATE ... WHERE id IN (...)` per batch, rows that get values of
their own share one `rows_update` (scheduler.adapters.bulk), new rows one bulk_create.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Count

from jobspec.gpushare import MILLI_PER_GPU, gpus_sample, milli_cost
from scheduler.adapters.bulk import ids_update, rows_update
from scheduler.adapters.ledger import ledger_book
from scheduler.adapters.notice import notices_give
from scheduler.adapters.portal_port import (
    WAITING,
    CycleRun,
    Event,
    Job,
    JobRow,
    Placement,
    PlacementRow,
    PreemptionEvent,
    QueueUsageSample,
    Transition,
    allows,
    placement_pod_name,
    placing_namespaces,
    queue_orders_record,
    task_requests,
    transition,
    usage_rollups_refresh,
    whole_second,
)
from scheduler.adapters.snapshot import SnapshotBundle
from scheduler.adapters.tenant_usage import tenant_usage_persist
from scheduler.adapters.transitions import CycleTransitions, stamp_columns
from scheduler.core.types import CycleResult, Evict, PendingKind, TaskStatus

GANG_BROKEN = "released with its gang: {job} fell below min_available {min_available}"
BATCH = 1000
# The largest counts a sample's integer columns hold on every database (PostgreSQL's integer
# and bigint; SQLite takes 64 bits).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def decisions_persist(
    *,
    bundle: SnapshotBundle,
    result: CycleResult,
    cycle: CycleRun,
    now: datetime,
    transitions: CycleTransitions | None = None,
) -> None:
    """Job statuses change through `transitions` (portal.jobs.lifecycle); a change it refuses
    is skipped and counted there."""
    transitions = transitions or CycleTransitions()
    with transaction.atomic():
        _persist_binds(bundle, result, now)
        evicted = _persist_evictions(bundle, result, cycle, now, transitions)
        _persist_pending_reasons(bundle, result, now)
        _persist_queue_orders(bundle, result, now)
        _persist_usage(bundle, result, now)
        ledger_book(bundle=bundle, result=result, evicted=evicted, now=now)
        cycle.binds = len(result.binds)
        cycle.evictions = len(result.evictions)
        cycle.pending_jobs = len(result.pending_reasons)
        cycle.rescheduling_ran = result.rescheduling_ran


def _persist_binds(bundle: SnapshotBundle, result: CycleResult, now: datetime) -> None:
    if not result.binds:
        return
    index = bundle.index
    replicas = [index.pending[bind.task] for bind in result.binds]
    # Earlier placements of the same replica (ended by a preemption) keep their pod names
    # in the history, so a re-placement gets the next attempt number.
    attempts = {
        (task_id, replica): n
        for task_id, replica, n in Placement.objects.filter(
            task_id__in={r.task.id for r in replicas}
        )
        .values("task_id", "replica")
        .annotate(n=Count("id"))
        .values_list("task_id", "replica", "n")
        .order_by()
    }
    namespaces = placing_namespaces(
        {int(key): _tenant(index.jobs[key]) for key in {bind.job for bind in result.binds}}
    )
    placements = []
    for bind, replica in zip(result.binds, replicas):
        job = index.jobs[bind.job]
        task = replica.task
        node = index.nodes.get(bind.node)
        attempt = attempts.get((task.id, replica.replica), 0)
        placements.append(
            Placement(
                job_id=job.id,
                task_id=task.id,
                replica=replica.replica,
                node_id=node.id if node is not None else None,
                node_name=bind.node,
                pod_name=placement_pod_name(
                    job=job, task=task, replica=replica.replica, attempt=attempt
                ),
                namespace=namespaces[job.id],
                state=Placement.State.BOUND,
                gpus=task.gpus,
                gpu_milli=milli_cost(
                    gpus=task.gpus,
                    gpu_milli=task.gpu_milli,
                    gpu_memory_mib=task.gpu_memory_mib,
                    device_memory_mib=node.gpu_memory_mib if node is not None else 0,
                ),
                gpu_devices=list(bind.gpus),
                started_at=whole_second(now),
            )
        )
    Placement.objects.bulk_create(placements, batch_size=BATCH)
    admitted: dict[Transition, list[int]] = defaultdict(list)
    for key in sorted({bind.job for bind in result.binds}, key=int):
        job = index.jobs[key]
        # Binds for a job that is admitted or running already add pods to it: no status change.
        if not allows(job.status, Event.ADMIT):
            continue
        change = transition(job.status, Event.ADMIT)
        job.status = change.status
        job.pending_reason = job.pending_kind = ""
        admitted[change].append(job.id)
    for change, ids in admitted.items():
        ids_update(
            Job,
            ids,
            status=change.status,
            **stamp_columns(change, now),
            pending_reason="",
            pending_kind="",
            pending_reason_at=now,
            updated_at=now,
        )


def _tenant(job: JobRow) -> str:
    return job.queue.tenant.name if job.queue is not None else ""


def _persist_evictions(
    bundle: SnapshotBundle,
    result: CycleResult,
    cycle: CycleRun,
    now: datetime,
    transitions: CycleTransitions,
) -> set[int]:
    """Returns the ids of the placements released (evicted, or with their broken gang) and
    deleted at once: not those given a preemption notice, which run until their deadline."""
    if not result.evictions:
        return set()
    index = bundle.index
    released: dict[int, PlacementRow] = {}
    events = []
    first_eviction: dict[str, Evict] = {}
    for evict in result.evictions:
        placement = index.placements[evict.task]
        released[placement.id] = placement
        first_eviction.setdefault(evict.job, evict)
        events.append(_event(bundle, evict, placement, cycle, now, evict.reason))

    # A victim left with fewer running pods than its gang needs is useless: release it whole.
    active_by_job: dict[int, list[PlacementRow]] = defaultdict(list)
    for placement in index.placements.values():
        if placement.state != Placement.State.RELEASING:
            active_by_job[placement.job_id].append(placement)
    preempted: dict[Transition, list[JobRow]] = defaultdict(list)
    for key in sorted(first_eviction, key=int):
        job = index.jobs[key]
        remaining = [p for p in active_by_job[job.id] if p.id not in released]
        if remaining and len(remaining) >= job.min_available:
            continue
        evict = first_eviction[key]
        sentence = GANG_BROKEN.format(job=job.name, min_available=job.min_available)
        for placement in remaining:
            released[placement.id] = placement
            events.append(_event(bundle, evict, placement, cycle, now, sentence))
        if (change := transitions.step(job.id, job.status, Event.PREEMPT)) is not None:
            job.status = change.status
            job.preemption_count += change.preemptions
            job.pending_reason = evict.reason
            job.pending_kind = PendingKind.WAITS
            preempted[change].append(job)

    for placement in released.values():
        placement.state = Placement.State.RELEASING
    ids_update(Placement, released, state=Placement.State.RELEASING, updated_at=now)
    told = notices_give(
        ((p.id, _notice_seconds(index.jobs[str(p.job_id)])) for p in released.values()), now
    )
    PreemptionEvent.objects.bulk_create(events, batch_size=BATCH)
    rows_update(
        Job,
        ["status", "preemption_count", "pending_reason"],
        [
            (job.id, job.status, job.preemption_count, job.pending_reason)
            for jobs in preempted.values()
            for job in jobs
        ],
        same={"pending_kind": PendingKind.WAITS, "pending_reason_at": now, "updated_at": now},
    )
    for change, jobs in preempted.items():
        if stamps := stamp_columns(change, now):  # none today: a preemption stamps no time
            ids_update(Job, [job.id for job in jobs], **stamps)
    return set(released) - told


def _notice_seconds(job: JobRow) -> int:
    """The preemption notice its queue gives the job's pods (0: none, deleted at once)."""
    return job.queue.preemption_notice_seconds if job.queue is not None else 0


def _event(
    bundle: SnapshotBundle,
    evict: Evict,
    placement: PlacementRow,
    cycle: CycleRun,
    now: datetime,
    sentence: str,
) -> PreemptionEvent:
    index = bundle.index
    victim = index.jobs[str(placement.job_id)]
    preemptor = index.jobs.get(evict.preemptor_job) if evict.preemptor_job else None
    task = index.tasks[placement.task_id]
    return PreemptionEvent(
        victim_job_id=victim.id,
        victim_task_name=f"{task.name}-{placement.replica}",
        victim_queue_id=victim.queue_id,
        victim_tenant_id=victim.queue.tenant_id,
        node_name=placement.node_name,
        preemptor_job_id=preemptor.id if preemptor else None,
        preemptor_queue_id=preemptor.queue_id if preemptor else None,
        action=evict.action,
        gpus_freed=placement.gpus,
        gpu_milli_freed=max(placement.gpu_milli, placement.gpus * MILLI_PER_GPU),
        gpu_devices=list(evict.gpus or placement.gpu_devices or ()),
        cycle=cycle,
        occurred_at=now,
        sentence=sentence,
        placement_id=placement.id,
    )


def _persist_pending_reasons(bundle: SnapshotBundle, result: CycleResult, now: datetime) -> None:
    """Only the reasons that changed: rewriting unchanged rows every few seconds would be most
    of the cycle's write load."""
    rows = []
    for key, job in bundle.index.jobs.items():
        if job.status not in WAITING:
            continue
        reason = result.pending_reasons.get(key, "")
        if not reason and job.pending_reason:
            # Keeps what it last heard (the eviction sentence until its pods are gone, a
            # failed start, a decision withdrawn at persist): a waiting job's reason is never
            # blank.
            continue
        # A reason without a kind (a decision withdrawn at persist) waits for the next cycle.
        kind = result.pending_kinds.get(key, PendingKind.WAITS) if reason else ""
        if reason != job.pending_reason or kind != job.pending_kind:
            job.pending_reason, job.pending_kind = reason, kind
            rows.append((job.id, reason, kind))
    rows_update(
        Job, ["pending_reason", "pending_kind"], sorted(rows), same={"pending_reason_at": now}
    )


def _persist_queue_orders(bundle: SnapshotBundle, result: CycleResult, now: datetime) -> None:
    """The line the core put each queue's waiting jobs in, so the position the API and the
    pages show is the one the reasons count (job keys are job ids)."""
    queues = bundle.index.queues
    orders = {
        queues[name].id: [int(key) for key in keys]
        for name, keys in result.queue_orders.items()
        if name in queues
    }
    queue_orders_record(orders=orders, at=now)


def _never_runnable_gpus(bundle: SnapshotBundle, result: CycleResult) -> dict[str, float]:
    """Per queue, the GPUs the pending pods of jobs that can never run as submitted ask for:
    no demand the scheduler can meet, so not in the queue's pending figure (the quota plugins
    leave them out of its request, and the dashboards list them apart)."""
    gpus: dict[str, float] = defaultdict(float)
    for job in bundle.snapshot.jobs:
        if result.pending_kinds.get(job.name) == PendingKind.NEVER:
            for task in job.tasks:
                if task.status is TaskStatus.PENDING:
                    gpus[job.queue] += task.requests.get("gpu")
    return gpus


def _persist_usage(bundle: SnapshotBundle, result: CycleResult, now: datetime) -> None:
    """At most one sample per queue per USAGE_SAMPLE_SECONDS: dashboards plot minutes, and the
    cycle runs every few seconds."""
    since = now - timedelta(seconds=settings.USAGE_SAMPLE_SECONDS)
    if QueueUsageSample.objects.filter(at__gt=since).exists():
        return
    bound_gpus: dict[str, float] = defaultdict(float)
    for bind in result.binds:
        queue = bundle.index.jobs[bind.job].queue.name
        task = bundle.index.pending[bind.task].task
        bound_gpus[queue] += task_requests(task, bundle.index.device_mib).get("gpu")
    never = _never_runnable_gpus(bundle, result)
    samples = []
    for name, queue in sorted(bundle.index.queues.items()):
        share = result.queues.get(name)
        if share is None:
            continue
        deserved = share.deserved.get("gpu")
        samples.append(
            QueueUsageSample(
                queue=queue,
                at=now,
                gpus_allocated=gpus_sample(share.allocated.get("gpu")),
                gpus_deserved=deserved if deserved != float("inf") else 0,
                gpus_pending=gpus_sample(
                    bundle.index.pending_gpus[name] - bound_gpus[name] - never[name]
                ),
                cpu_millis_allocated=_column(share.allocated.get("cpu"), INT64_MAX),
                memory_bytes_allocated=_column(share.allocated.get("memory"), INT64_MAX),
            )
        )
    QueueUsageSample.objects.bulk_create(samples, batch_size=BATCH)
    tenant_usage_persist(bundle=bundle, result=result, now=now)
    # Keep the dashboards' hourly/daily rollups current: the hour and day buckets of `now`
    # for just these queues (one upsert per resolution).
    usage_rollups_refresh(queue_ids=[sample.queue_id for sample in samples], at=now)


def _column(value: float, most: int) -> int:
    """`value` as a count its column can hold: whatever numbers stored jobs carry (a job of
    2**62 GPUs made every cycle's sample overflow), a sample saturates instead of failing."""
    return int(min(max(0, value), most))  # compared before int(): inf and NaN never reach it
