"""Victims grouped into eviction units so no victim gang is cut below its min_available.

DESIGN.md: "a victim job is never cut below its own min_available unless it is evicted whole".
Upstream evicts victims one by one and stops as soon as the preemptor fits, which can stop in
the middle of a gang. Here a job that would drop below min_available if all its victims went
is a single unit (all of it or none), and only when the unit holds every pod the job still
has; otherwise that job's victims are dropped. Jobs that can spare their victims stay one pod
per unit, so single-pod and elastic victims are evicted exactly as before.
"""

from __future__ import annotations

from scheduler.core.session import Session
from scheduler.core.state import Task
from scheduler.core.types import ALLOCATED_STATUSES


def eviction_units(ssn: Session, victims: list[Task]) -> list[list[Task]]:
    """``victims`` (already in eviction order) as units; a unit is evicted all at once.

    Per job, the first ``ready - min_available`` victims are spare and go one by one; the rest
    form one closing unit that evicts the job whole, kept only if with the spare ones it covers
    every pod the job holds.
    """
    by_job: dict[str, list[Task]] = {}
    for task in victims:
        by_job.setdefault(task.job, []).append(task)
    spare: dict[str, set[str]] = {}
    tail: dict[str, list[Task] | None] = {}
    for name, tasks in by_job.items():
        job = ssn.jobs[name]
        allowance = max(job.ready_task_num() - job.min_available, 0)
        spare[name] = {t.name for t in tasks[:allowance]}
        rest = tasks[allowance:]
        if not rest:
            continue
        chosen = {t.name for t in tasks}
        holding = [t for t in job.tasks.values() if t.status in ALLOCATED_STATUSES]
        tail[name] = rest if all(t.name in chosen for t in holding) else None
    units: list[list[Task]] = []
    for task in victims:
        if task.name in spare[task.job]:
            units.append([task])
            continue
        leftover = tail.pop(task.job, None)
        if leftover:
            units.append(leftover)
    return units


def flatten(units: list[list[Task]]) -> list[Task]:
    return [task for unit in units for task in unit]
