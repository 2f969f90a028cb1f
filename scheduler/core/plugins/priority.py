"""priority: order jobs and tasks by priority; lower-priority jobs are preemptable.

Source: volcano-sh/volcano pkg/scheduler/plugins/priority/priority.go.
"""

from __future__ import annotations

from scheduler.core.session import Session
from scheduler.core.state import Job, Task
from scheduler.core.types import Vote

PLUGIN_NAME = "priority"


def build(arguments: dict) -> PriorityPlugin:
    return PriorityPlugin()


def _desc(left: int, right: int) -> int:
    return -1 if left > right else (1 if left < right else 0)


class PriorityPlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        ssn.add_fn("task_order", self.name, lambda lt, rt: _desc(lt.priority, rt.priority))
        ssn.add_fn("job_order", self.name, lambda lj, rj: _desc(lj.priority, rj.priority))

        def preemptable(preemptor: Task, candidates: list[Task]):
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

        ssn.add_fn("preemptable", self.name, preemptable)

        def starving(job: Job) -> bool:
            return job.ready_task_num() + job.waiting_task_num() < len(job.tasks)

        ssn.add_fn("job_starving", self.name, starving)
