"""enqueue: admit Pending pod groups whose queue can hold their min resources.

Source: volcano-sh/volcano pkg/scheduler/actions/enqueue/enqueue.go. Queues are visited in
queue order, one job at a time; a job without min resources is always admitted.
"""

from __future__ import annotations

from scheduler.core.session import Session
from scheduler.core.types import PodGroupPhase


def execute(ssn: Session) -> None:
    pending_by_queue: dict[str, list] = {}
    for job in ssn.jobs.values():
        if job.queue not in ssn.queues:
            continue
        if job.phase is PodGroupPhase.PENDING:
            pending_by_queue.setdefault(job.queue, []).append(job)
    if not pending_by_queue:
        return
    for name in pending_by_queue:
        pending_by_queue[name] = ssn.sorted_jobs(pending_by_queue[name])
    active = [ssn.queues[name] for name in sorted(pending_by_queue)]
    while active:
        queue = min_queue(ssn, active)
        jobs = pending_by_queue[queue.name]
        job = jobs.pop(0)
        if job.info.min_resources is None or ssn.job_enqueueable(job):
            ssn.job_enqueued(job)
            job.phase = PodGroupPhase.INQUEUE
            job.reason = None
        if not jobs:
            active.remove(queue)


def min_queue(ssn: Session, queues: list):
    """The queue a priority queue ordered by QueueOrderFn would pop next."""
    best = queues[0]
    for queue in queues[1:]:
        if ssn.queue_compare(queue, best) < 0:
            best = queue
    return best
