"""Action registry: name -> module exposing ``execute(session)``.

Counterpart of volcano-sh/volcano pkg/scheduler/actions/factory.go.
"""

from scheduler.core.actions import allocate, backfill, enqueue, preempt, reclaim

ACTIONS = {
    "enqueue": enqueue,
    "allocate": allocate,
    "backfill": backfill,
    "preempt": preempt,
    "reclaim": reclaim,
}
