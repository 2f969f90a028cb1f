"""backfill: place best-effort tasks (no resource requests) wherever the predicates allow.

Source: volcano-sh/volcano pkg/scheduler/actions/backfill/backfill.go.
"""

from __future__ import annotations

from scheduler.core.session import Session
from scheduler.core.statement import Statement
from scheduler.core.types import PodGroupPhase


def execute(ssn: Session) -> None:
    # Only jobs with best-effort pods matter; sorting just those keeps this action cheap.
    jobs = [job for job in ssn.jobs.values() if job.has_best_effort]
    for job in ssn.sorted_jobs(jobs):
        if job.phase is PodGroupPhase.PENDING or job.queue not in ssn.queues:
            continue
        if ssn.job_valid(job) is not None:
            continue
        stmt = Statement(ssn)
        for task in ssn.sorted_tasks([t for t in job.pending_tasks() if t.best_effort]):
            nodes = [
                n
                for n in ssn.node_list
                if task.resreq.less_equal(n.future_idle()) and ssn.predicate(task, n) is None
            ]
            node = ssn.best_node(task, nodes)
            if node is not None:
                stmt.allocate(task, node.name)
        if ssn.job_ready(job):
            stmt.commit()
