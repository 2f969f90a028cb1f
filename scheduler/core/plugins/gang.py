"""gang: all-or-nothing placement by min_available (and per-role min_task_member).

Source: volcano-sh/volcano pkg/scheduler/plugins/gang/gang.go and api/job_info.go
(IsReady, IsPipelined, IsStarving, CheckTaskValid/Ready/Pipelined).
"""

from __future__ import annotations

from typing import Any

from scheduler.core.session import Session
from scheduler.core.state import Job, Task
from scheduler.core.types import Vote

PLUGIN_NAME = "gang"


def build(arguments: dict[str, Any]) -> GangPlugin:
    return GangPlugin()


class GangPlugin:
    name = PLUGIN_NAME

    def on_session_open(self, ssn: Session) -> None:
        def valid(job: Job) -> str | None:
            count = job.valid_task_num()
            if count < job.min_available:
                return (
                    f"job has {count} schedulable pods, fewer than its "
                    f"min_available of {job.min_available}"
                )
            if not job.check_task_valid():
                return "job has fewer pods of some role than its min_task_member asks"
            return None

        def order(left: Job, right: Job) -> int:
            lready, rready = left.is_ready(), right.is_ready()
            if lready == rready:
                return 0
            return 1 if lready else -1

        def victims(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            # A victim job keeps at least min_available running pods.
            chosen, occupied = [], {}
            for task in candidates:
                job = ssn.jobs[task.job]
                if job.name not in occupied:
                    occupied[job.name] = job.ready_task_num()
                if occupied[job.name] > job.min_available:
                    occupied[job.name] -= 1
                    chosen.append(task)
            return chosen, Vote.PERMIT

        ssn.add_job_valid_fn(self.name, valid)
        # not ready (False) first, like ``order``
        ssn.add_job_order_fn(self.name, order, key=lambda job: job.is_ready())
        ssn.add_job_ready_fn(self.name, lambda job: job.is_ready())
        ssn.add_job_pipelined_fn(
            self.name,
            lambda job: Vote.PERMIT if job.is_pipelined() else Vote.REJECT,
        )
        ssn.add_preemptable_fn(self.name, victims)
        ssn.add_reclaimable_fn(self.name, victims)
        ssn.add_job_starving_fn(self.name, lambda job: job.is_starving())
