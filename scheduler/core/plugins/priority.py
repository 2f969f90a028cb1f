"""priority: order jobs and tasks by priority; lower-priority jobs are preemptable.

Source: volcano-sh/volcano pkg/scheduler/plugins/priority/priority.go.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.session import Session
from scheduler.core.state import Job, Task
from scheduler.core.types import Vote

PLUGIN_NAME = "priority"


def build(arguments: dict[str, Any]) -> PriorityPlugin:
    return PriorityPlugin()


def _desc(left: int, right: int) -> int:
    return -1 if left > right else (1 if left < right else 0)


class PriorityPlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        def task_order(left: Task, right: Task) -> int:
            return _desc(left.priority, right.priority)

        def job_order(left: Job, right: Job) -> int:
            return _desc(left.priority, right.priority)

        ssn.add_task_order_fn(self.name, task_order, key=lambda task: -task.priority)
        ssn.add_job_order_fn(self.name, job_order, key=lambda job: -job.priority)

        def preemptable(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            preemptor_job = ssn.jobs[preemptor.job]
            victims = []
            for task in candidates:
                job = ssn.jobs[task.job]
                if job is not preemptor_job:
                    if job.priority >= preemptor_job.priority:
                        continue
                elif task.priority >= preemptor.priority:
                    continue
                victims.append(task)
            return victims, Vote.PERMIT

        ssn.add_preemptable_fn(self.name, preemptable)

        def starving(job: Job) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        ssn.add_job_starving_fn(self.name, starving)
