"""cdp (cooldown protection): a pod is not a victim of preempt or reclaim until it has run
its queue's minimum run time.

Source: volcano-sh/volcano pkg/scheduler/plugins/cdp/cdp.go (how_to_use_cdp_plugin.md). There
a pod's cooldown is its ``volcano.sh/cooldown-time`` label or annotation (a Go duration), and a
Running pod whose PodScheduled condition turned true less than that long ago is left out of the
victims of both preemptableFn and reclaimableFn; every other candidate stays, with a Permit
vote. Departures, each for a reason:

- The cooldown is the queue's ``min_runtime`` (the portal's per-queue minimum run time), not a
  per-pod annotation: the portal's users do not write pod annotations, and the rule belongs
  to the queue's lead. A pod carrying upstream's annotation is not read.
- "Now" is the snapshot's ``now`` (the core has no clock), and the run time is measured from
  the pod's bind (``TaskInfo.started``), the portal's record of upstream's PodScheduled time.
- The filter is a guard (``Declared.guards``): upstream registers it in its tier like any
  preemptable hook, and when every candidate of that tier is protected the dispatcher moves on
  to the next tier, whose plugins may pick the very pods cdp protected. Here a protected pod is
  never a victim, whatever the tiers say.
- With no queue setting a minimum nothing is registered, so the default (0) keeps Volcano's
  behaviour without cdp exactly and costs nothing.
- ``cdp.guaranteeOverrides`` (portal argument, default false): reclaim for a queue that stays
  within its guarantee with the task may take protected pods, and the eviction's reason says
  the minimum was overridden. The admin who set the guarantee promised those resources;
  upstream has no such exception.
"""

from __future__ import annotations

from typing import Any

from scheduler.core.config import ConfigError
from scheduler.core.plugins._quota import QueueAttr
from scheduler.core.resources import Resources
from scheduler.core.session import Session
from scheduler.core.state import Task
from scheduler.core.types import TaskStatus, Vote

PLUGIN_NAME = "cdp"
GUARANTEE_OVERRIDES = "cdp.guaranteeOverrides"
OVERRIDDEN = "; its minimum run time of {seconds:g} s was overridden: queue {queue} reclaims within its guarantee"


def build(arguments: dict[str, Any]) -> CooldownProtectionPlugin:
    overrides = arguments.get(GUARANTEE_OVERRIDES, False)
    if not isinstance(overrides, bool):
        raise ConfigError(GUARANTEE_OVERRIDES, f"expected true or false, got {overrides!r}")
    return CooldownProtectionPlugin(guarantee_overrides=overrides)


def within_guarantee(attr: QueueAttr, request: Resources) -> bool:
    """Does the queue stay within every resource it is guaranteed with ``request`` added, and
    does ``request`` ask for one of them?"""
    guaranteed = [name for name, value in attr.guarantee.explicit_items() if value > 0]
    return any(request.get(name) > 0 for name in guaranteed) and all(
        attr.allocated.get(name) + request.get(name) <= attr.guarantee.get(name)
        for name in guaranteed
    )


class CooldownProtectionPlugin:
    name = PLUGIN_NAME

    def __init__(self, *, guarantee_overrides: bool = False) -> None:
        self.guarantee_overrides = guarantee_overrides

    def on_session_open(self, ssn: Session) -> None:
        minimum = {
            name: queue.info.min_runtime
            for name, queue in ssn.queues.items()
            if queue.info.min_runtime > 0
        }
        if not minimum:
            return
        now, jobs = ssn.now, ssn.jobs

        def protected(task: Task) -> bool:
            seconds = minimum.get(jobs[task.job].queue)
            if seconds is None or task.status is not TaskStatus.RUNNING:
                return False  # upstream protects Running pods only
            started = task.info.started
            return started is not None and now - started < seconds

        def unprotected(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            return [task for task in candidates if not protected(task)], Vote.PERMIT

        def reclaimable(preemptor: Task, candidates: list[Task]) -> tuple[list[Task], int]:
            queue = jobs[preemptor.job].queue
            attr = ssn.queue_share(queue)
            if attr is None or not within_guarantee(attr, preemptor.resreq):
                return unprotected(preemptor, candidates)
            for task in candidates:
                if protected(task):
                    seconds = minimum[jobs[task.job].queue]
                    ssn.eviction_notes[task.name] = OVERRIDDEN.format(seconds=seconds, queue=queue)
            return candidates, Vote.PERMIT

        ssn.add_preemptable_fn(self.name, unprotected, guards=True)
        fn = reclaimable if self.guarantee_overrides else unprotected
        ssn.add_reclaimable_fn(self.name, fn, guards=True)
