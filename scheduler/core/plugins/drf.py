"""drf: dominant resource fairness between jobs.

Source: volcano-sh/volcano pkg/scheduler/plugins/drf/drf.go: a job's share is its largest
allocated/cluster ratio; lower share goes first; a task may preempt another job's task when the
preemptor's share after the move is not above the victim's share after it.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.hooks import EventHandler
from scheduler.core.resources import Resources, total
from scheduler.core.session import Session
from scheduler.core.state import Job, Task
from scheduler.core.types import ALLOCATED_STATUSES, TaskStatus, Vote

PLUGIN_NAME = "drf"
_SHARE_DELTA = 0.000001


def build(arguments: dict[str, Any]) -> DrfPlugin:
    return DrfPlugin()


def share_of(allocated: Resources, cluster: Resources) -> float:
    share = 0.0
    for name in cluster.names():
        capacity = cluster.get(name)
        used = allocated.get(name)
        if capacity == 0:
            ratio = 0.0 if used == 0 else 1.0
        else:
            ratio = used / capacity
        share = max(share, ratio)
    return share


class DrfPlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        self.cluster = total(node.allocatable for node in ssn.node_list)
        self.allocated: dict[str, Resources] = {}
        self.share: dict[str, float] = {}
        held = ALLOCATED_STATUSES | {TaskStatus.PIPELINED}
        for job in ssn.jobs.values():
            alloc = total(t.resreq for t in job.tasks.values() if t.status in held)
            self.allocated[job.name] = alloc
            self.share[job.name] = share_of(alloc, self.cluster)

        def order(left: Job, right: Job) -> int:
            ls, rs = self.share[left.name], self.share[right.name]
            return -1 if ls < rs else (1 if ls > rs else 0)

        def preemptable(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            after = self.allocated[preemptor.job].add(preemptor.resreq)
            lshare = share_of(after, self.cluster)
            remaining: dict[str, Resources] = {}
            victims = []
            for task in candidates:
                alloc = remaining.get(task.job, self.allocated[task.job]).sub(task.resreq)
                remaining[task.job] = alloc
                rshare = share_of(alloc, self.cluster)
                if lshare < rshare or abs(lshare - rshare) <= _SHARE_DELTA:
                    victims.append(task)
            return victims, Vote.PERMIT

        def on_allocate(task: Task) -> None:
            self._update(task.job, self.allocated[task.job].add(task.resreq))

        def on_deallocate(task: Task) -> None:
            self._update(task.job, self.allocated[task.job].sub(task.resreq))

        ssn.add_job_order_fn(self.name, order)
        # Its verdict compares the preemptor job's own dominant share (upstream drf's
        # preemptableFn), so preempt may not carry a failure over to another job of one shape.
        ssn.add_preemptable_fn(self.name, preemptable, by_preemptor_job=True)
        ssn.add_event_handler(EventHandler(on_allocate, on_deallocate))

    def _update(self, job: str, allocated: Resources) -> None:
        self.allocated[job] = allocated
        self.share[job] = share_of(allocated, self.cluster)
