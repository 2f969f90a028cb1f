"""enqueue: admit Pending pod groups whose queue can hold their min resources.

Source: volcano-sh/volcano pkg/scheduler/actions/enqueue/enqueue.go. Queues are visited in
queue order, one job at a time; a job without min resources is always admitted.
"""

from __future__ import annotations

from collections import deque

from scheduler.core.actions._queue import PriorityQueue
from scheduler.core.session import Session
from scheduler.core.state import Job, Queue
from scheduler.core.types import PodGroupPhase


def execute(ssn: Session) -> None:
    pending_by_queue: dict[str, list[Job]] = {}
    for job in ssn.jobs.values():
        if job.queue not in ssn.queues:
            continue
        if job.phase is PodGroupPhase.PENDING:
            pending_by_queue.setdefault(job.queue, []).append(job)
    if not pending_by_queue:
        return
    queued = {name: deque(ssn.sorted_jobs(jobs)) for name, jobs in pending_by_queue.items()}
    key = ssn.queue_key_fn()
    if key is not None:
        # Admitting a job changes no queue's order (shares move only when pods are placed), so
        # a heap of keys pops the same queue as scanning for the minimum every time.
        heap = PriorityQueue(ssn.queue_compare, [ssn.queues[n] for n in sorted(queued)], key)
        while heap:
            queue = heap.pop()
            _admit(ssn, queued[queue.name].popleft())
            if queued[queue.name]:
                heap.push(queue)
        return
    active = [ssn.queues[name] for name in sorted(queued)]
    while active:
        queue = min_queue(ssn, active)
        jobs = queued[queue.name]
        _admit(ssn, jobs.popleft())
        if not jobs:
            active.remove(queue)


def _admit(ssn: Session, job: Job) -> None:
    if job.info.min_resources is None or ssn.job_enqueueable(job):
        ssn.job_enqueued(job)
        job.phase = PodGroupPhase.INQUEUE
        job.reason = None


def min_queue(ssn: Session, queues: list[Queue]) -> Queue:
    """The queue a priority queue ordered by QueueOrderFn would pop next."""
    best = queues[0]
    for queue in queues[1:]:
        if ssn.queue_compare(queue, best) < 0:
            best = queue
    return best
