"""Delayed policy actions: a policy with a `timeout` (jobspec.policies) raised by a pod of a
job waits on the job's row (`policy_delays`) until its time, then the cycle's observation
carries it out. Pure: lists of mappings in and out, the time given.

As upstream's job controller (pkg/controllers/job/job_controller.go AddDelayActionForJob,
:461-509): one delay per pod and action (the same action raised again for the same pod while
it waits is not added twice), and while it waits the job goes on as it is, the pod that raised
it not replaced. A delay belongs to the run of the job it was raised in (its admission time):
once the job is restarted, preempted or ended, the delays of the run before are dropped, never
carried out, as upstream's `cleanupDelayActions` drops them when the job's pods are killed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


@dataclass(frozen=True)
class Delay:
    """One action waiting for its time; `pod` is blank for a task's event (TaskCompleted)."""

    action: str
    event: str
    pod: str
    task: str
    what: str
    why: str
    due: datetime
    run: str  # the job's admission time (ISO), the run the delay belongs to

    def as_dict(self) -> dict[str, str]:
        return {
            "action": self.action,
            "event": self.event,
            "pod": self.pod,
            "task": self.task,
            "what": self.what,
            "why": self.why,
            "due": self.due.isoformat(),
            "run": self.run,
        }


def run_of(admitted_at: datetime | None) -> str:
    return admitted_at.isoformat() if admitted_at is not None else ""


def delays_read(stored: Iterable[Mapping[str, Any]]) -> list[Delay]:
    return [
        Delay(**{**item, "due": datetime.fromisoformat(item["due"])})  # type: ignore[arg-type]
        for item in stored
    ]


def delay_added(stored: Sequence[Mapping[str, Any]], delay: Delay) -> list[dict[str, str]] | None:
    """`stored` with `delay` in due order, or None when the same action already waits for the
    same pod (or task) in the same run."""
    delays = delays_read(stored)
    for other in delays:
        if (other.pod, other.task, other.action, other.run) == (
            delay.pod,
            delay.task,
            delay.action,
            delay.run,
        ):
            return None
    delays.append(delay)
    delays.sort(key=lambda d: (d.due, d.pod, d.task, d.action))
    return [d.as_dict() for d in delays]


def delays_due(
    stored: Sequence[Mapping[str, Any]], *, now: datetime, run: str
) -> tuple[list[Delay], list[Delay]]:
    """(the delays of run `run` whose time has come, in due order; those still waiting). Delays
    of another run are in neither: they are dropped."""
    delays = [d for d in delays_read(stored) if d.run == run]
    return [d for d in delays if d.due <= now], [d for d in delays if d.due > now]


def due_at(delays: Sequence[Delay]) -> datetime | None:
    return min((d.due for d in delays), default=None)


def due(now: datetime, seconds: int) -> datetime:
    return now + timedelta(seconds=seconds)


def held_pods(stored: Sequence[Mapping[str, Any]], *, run: str) -> set[str]:
    """The pods whose replicas wait for a delayed action of run `run`: not placed again
    meanwhile."""
    return {item["pod"] for item in stored if item.get("run") == run and item.get("pod")}
