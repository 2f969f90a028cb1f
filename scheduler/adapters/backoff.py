"""The backoff of jobs whose pods failed to start, as the cycle's snapshot sees it.

The rules are portal.jobs.backoff's, functions of each job's start attempts; here they are read
for the jobs the cycle schedules, in one query of the jobs that have any (nearly none). A
waiting job in its job backoff is left out of the snapshot (it holds no GPUs, and its reason,
written when its start failed, says when it is tried again); a job avoiding nodes reaches the
core as data on its pending tasks (TaskInfo.avoid_nodes), which the predicates plugin honours.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from scheduler.adapters.portal_port import (
    SCHEDULABLE_STATUSES,
    WAITING,
    Job,
    attempts_of,
    in_backoff,
    nodes_avoided,
    start_backoff,
)
from scheduler.core.types import JobInfo, TaskStatus


@dataclass(frozen=True)
class Backoff:
    held: frozenset[int] = frozenset()  # waiting jobs in their job backoff
    # job id -> (node, until when in seconds since 1970) for each node it avoids
    avoid: dict[int, tuple[tuple[str, float], ...]] = field(default_factory=dict)

    def jobs(self) -> int:
        """How many jobs back off now, held back or avoiding a node (the metric)."""
        return len(self.held) + len(self.avoid)


def backoff_read(*, now: datetime) -> Backoff:
    """Which jobs back off at `now`. Call inside the snapshot's transaction."""
    backoff = start_backoff()
    rows = (
        Job.objects.filter(status__in=SCHEDULABLE_STATUSES)
        .exclude(start_attempts=[])
        .values_list("id", "status", "start_attempts")
    )
    held: set[int] = set()
    avoid: dict[int, tuple[tuple[str, float], ...]] = {}
    for job_id, status, stored in rows:
        attempts = attempts_of(stored)
        if status in WAITING and in_backoff(attempts, backoff, now):
            held.add(job_id)
        elif nodes := nodes_avoided(attempts, backoff, now):
            avoid[job_id] = tuple((node, until.timestamp()) for node, until in nodes.items())
    return Backoff(held=frozenset(held), avoid=avoid)


def avoiding(info: JobInfo, nodes: tuple[tuple[str, float], ...]) -> JobInfo:
    """`info` whose pending tasks avoid `nodes`."""
    tasks = tuple(
        dataclasses.replace(task, avoid_nodes=nodes) if task.status is TaskStatus.PENDING else task
        for task in info.tasks
    )
    return dataclasses.replace(info, tasks=tasks)
