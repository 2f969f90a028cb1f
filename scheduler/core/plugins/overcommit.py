"""overcommit: admit jobs while their min resources fit the cluster times a factor.

Source: volcano-sh/volcano pkg/scheduler/plugins/overcommit/overcommit.go
(``overcommit-factor``, default 1.2): idle = total * factor - used; a job is enqueueable when
inqueue + its min resources fit idle on the names it asks for.
"""

from __future__ import annotations

import math
from typing import Any

from scheduler.core.config import ConfigError, number_arg
from scheduler.core.plugins._quota import cluster_total
from scheduler.core.resources import Resources
from scheduler.core.session import Session
from scheduler.core.state import Job
from scheduler.core.types import ALLOCATED_STATUSES, PodGroupPhase, Vote

PLUGIN_NAME = "overcommit"


def build(arguments: dict[str, Any]) -> OvercommitPlugin:
    factor = number_arg(arguments, "overcommit-factor", 1.2)
    if factor < 1:
        factor = 1.2  # upstream falls back to the default below 1
    if math.isnan(factor):
        raise ConfigError("overcommit-factor", "expected a number")
    return OvercommitPlugin(factor)


class OvercommitPlugin:
    name = PLUGIN_NAME

    def __init__(self, factor: float):
        self.factor = factor

    def on_session_open(self, ssn: Session) -> None:
        used = Resources()
        for node in ssn.node_list:
            used = used.add(node.used)
        self.idle = cluster_total(ssn).multi(self.factor).sub(used)
        self.inqueue = Resources()
        for job in ssn.jobs.values():
            minimum = job.info.min_resources
            if minimum is None:
                continue
            if job.phase is PodGroupPhase.INQUEUE:
                self.inqueue = self.inqueue.add(minimum)
            elif (
                job.phase is PodGroupPhase.RUNNING
                and job.count(*ALLOCATED_STATUSES) >= job.min_available
            ):
                allocated = Resources()
                for task in job.tasks.values():
                    if task.status in ALLOCATED_STATUSES:
                        allocated = allocated.add(task.resreq)
                self.inqueue = self.inqueue.add(minimum.exceeded_part(allocated))
        ssn.add_job_enqueueable_fn(self.name, self.enqueueable)
        ssn.add_job_enqueued_fn(self.name, self.enqueued)

    def enqueueable(self, job: Job) -> int:
        minimum = job.info.min_resources
        if minimum is None:
            return Vote.PERMIT
        if self.inqueue.add(minimum).less_equal_with_dimension(self.idle, minimum):
            return Vote.PERMIT
        job.reason = "the cluster is overcommitted: admitted jobs already claim its idle resources"
        return Vote.REJECT

    def enqueued(self, job: Job) -> None:
        if job.info.min_resources is not None:
            self.inqueue = self.inqueue.add(job.info.min_resources)
