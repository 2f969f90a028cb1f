"""The job lifecycle: which event moves a job from which status to which, and what it stamps.

Pure: no Django, no database, no clock (the caller gives the event's time). Every writer of a
job's status asks `transition(status, event)`: the services a person's action calls (cancel,
quarantine, release in portal.jobs.services), the scheduling cycle's bulk writers
(scheduler.adapters.observe and persist), which compute each job's new status in memory and
write many jobs in a few UPDATEs, and the demo's past jobs (portal.dashboards.demo_history).

| status      | admit    | start   | succeed   | fail   | preempt   | restart   | requeue | cancel    | quarantine  | release |
|-------------|----------|---------|-----------|--------|-----------|-----------|---------|-----------|-------------|---------|
| pending     | admitted |         |           | failed |           |           |         | cancelled | quarantined |         |
| admitted    |          | running | succeeded | failed | preempted | preempted |         | cancelled | quarantined |         |
| running     |          |         | succeeded | failed | preempted | preempted |         | cancelled | quarantined |         |
| preempted   | admitted |         |           | failed |           |           | pending | cancelled | quarantined |         |
| quarantined |          |         |           |        |           |           |         | cancelled |             | pending |

Succeeded, failed and cancelled are final: no event applies to them.

Design records:
- A preempted job is admitted again straight away when a cycle places it before the cycle
  that sees its old pods gone has written `pending` (its status in the database is still
  preempted).
- An admitted job may succeed: all its pods can finish between two observations, so it is
  never seen running; it then gets a start time as well (a job that succeeded ran).
- `restart` is `preempt` without counting a preemption: the job goes back to the queue because
  a pod was lost or a restart policy said so, not because the scheduler evicted it.
- `requeue` is only for a preempted job whose pods are gone; a job is never sent back to
  pending while it still holds pods.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """A job's status: the values of portal.jobs.models.Job.Status."""

    PENDING = "pending"
    ADMITTED = "admitted"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    # The scheduler failed on this job's data and stopped working on it
    # (scheduler/adapters/quarantine.py). Not final: a site admin may release it back to
    # pending, its owner may cancel it.
    QUARANTINED = "quarantined"


class Event(StrEnum):
    ADMIT = "admit"  # the cycle bound its gang's pods
    START = "start"  # min_available of its pods run
    SUCCEED = "succeed"  # its pods succeeded, or a policy completed it
    FAIL = "fail"  # a pod failed, a policy aborted it, or the cluster refused its pods
    PREEMPT = "preempt"  # the scheduler evicted it (preempt, reclaim, rescheduling)
    RESTART = "restart"  # a pod was lost, or a restart policy with retries left requeues it
    REQUEUE = "requeue"  # a preempted job's pods are gone: it waits for its turn again
    CANCEL = "cancel"  # its submitter, a lead or an admin cancelled it
    QUARANTINE = "quarantine"  # a scheduling phase failed on its data
    RELEASE = "release"  # a site admin sent it back to the queue


@dataclass(frozen=True, slots=True)
class Transition:
    """What an event does to a job in a given status."""

    status: Status
    # Timestamp fields set to the event's time.
    stamps: tuple[str, ...] = ()
    # Timestamp fields set to the event's time unless they are set already.
    kept_stamps: tuple[str, ...] = ()
    # How much the job's preemption_count grows.
    preemptions: int = 0

    def apply(self, job: Any, at: datetime) -> list[str]:
        """Set the new status, the stamps and the preemption count on `job` (any object with
        those attributes, such as a Job); returns the names of the fields it set."""
        job.status = self.status
        fields = ["status", *self.stamps]
        for field in self.stamps:
            setattr(job, field, at)
        for field in self.kept_stamps:
            if getattr(job, field) is None:
                setattr(job, field, at)
                fields.append(field)
        if self.preemptions:
            job.preemption_count += self.preemptions
            fields.append("preemption_count")
        return fields


class IllegalTransition(ValueError):
    def __init__(self, status: str, event: Event) -> None:
        self.status = status
        self.event = event
        super().__init__(f"a {status} job cannot {_VERBS[event]}")


_VERBS = {
    Event.ADMIT: "be admitted",
    Event.START: "start",
    Event.SUCCEED: "succeed",
    Event.FAIL: "fail",
    Event.PREEMPT: "be preempted",
    Event.RESTART: "be restarted",
    Event.REQUEUE: "be requeued",
    Event.CANCEL: "be cancelled",
    Event.QUARANTINE: "be quarantined",
    Event.RELEASE: "be released",
}

S, E = Status, Event
_ADMITTED = Transition(Status.ADMITTED, stamps=("admitted_at",))
_RUNNING = Transition(Status.RUNNING, stamps=("started_at",))
_SUCCEEDED = Transition(Status.SUCCEEDED, stamps=("finished_at",), kept_stamps=("started_at",))
_FAILED = Transition(Status.FAILED, stamps=("finished_at",))
_PREEMPTED = Transition(Status.PREEMPTED, preemptions=1)
_RESTARTED = Transition(Status.PREEMPTED)  # pending again once its pods are gone (requeue)
_PENDING = Transition(Status.PENDING)
_CANCELLED = Transition(Status.CANCELLED, stamps=("cancelled_at", "finished_at"))
_QUARANTINED = Transition(Status.QUARANTINED)

# What may happen to a job whose pods are placed: an admitted job also starts.
_PLACED: dict[Event, Transition] = {
    Event.SUCCEED: _SUCCEEDED,
    Event.FAIL: _FAILED,
    Event.PREEMPT: _PREEMPTED,
    Event.RESTART: _RESTARTED,
    Event.CANCEL: _CANCELLED,
    Event.QUARANTINE: _QUARANTINED,
}

# The one table: status -> event -> what happens. A pair not listed is illegal.
TRANSITIONS: dict[Status, dict[Event, Transition]] = {
    Status.PENDING: {
        Event.ADMIT: _ADMITTED,
        Event.FAIL: _FAILED,
        Event.CANCEL: _CANCELLED,
        Event.QUARANTINE: _QUARANTINED,
    },
    Status.ADMITTED: {Event.START: _RUNNING, **_PLACED},
    Status.RUNNING: _PLACED,
    Status.PREEMPTED: {
        Event.ADMIT: _ADMITTED,
        Event.FAIL: _FAILED,
        Event.REQUEUE: _PENDING,
        Event.CANCEL: _CANCELLED,
        Event.QUARANTINE: _QUARANTINED,
    },
    Status.QUARANTINED: {Event.CANCEL: _CANCELLED, Event.RELEASE: _PENDING},
    Status.SUCCEEDED: {},
    Status.FAILED: {},
    Status.CANCELLED: {},
}

TERMINAL = frozenset(status for status, events in TRANSITIONS.items() if not events)
# Waiting for the scheduler to place it: the statuses a job is admitted from.
WAITING = frozenset(status for status, events in TRANSITIONS.items() if Event.ADMIT in events)
# The scheduler still works on it (places, keeps or evicts its pods): the statuses a job can be
# quarantined from, since only the scheduler's work on a job can fail on its data.
SCHEDULED = frozenset(
    status for status, events in TRANSITIONS.items() if Event.QUARANTINE in events
)


def transition(status: str, event: Event) -> Transition:
    """What `event` does to a job in `status`; IllegalTransition when it may not happen."""
    change = TRANSITIONS.get(status, {}).get(event)  # type: ignore[call-overload]
    if change is None:
        raise IllegalTransition(status, event)
    return change


def allows(status: str, event: Event) -> bool:
    """Whether `event` applies to a job in `status`."""
    return event in TRANSITIONS.get(status, {})  # type: ignore[call-overload]
