"""How the cycle changes job statuses: through portal.jobs.lifecycle, in memory, job by job,
before observe and persist write them in bulk.

An event the lifecycle refuses (a job the cycle found in a status the event cannot leave) is
logged, left undone and counted, never raised: one odd row must not stop scheduling for every
tenant. The cycle records the count and the first few on its CycleRun.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db.models import DateTimeField, F, Value
from django.db.models.functions import Coalesce

from scheduler.adapters.portal_port import Event, IllegalTransition, Transition, transition

logger = logging.getLogger(__name__)

SKIPPED_NOTE = "{count} job status change(s) refused by the job lifecycle and skipped: {which}"
NOTE_EXAMPLES = 5


class CycleTransitions:
    """One cycle's status changes: `step` says what an event does to a job, or None (logged
    and counted) when the lifecycle refuses it."""

    def __init__(self) -> None:
        # (job id, event) -> why; a persist attempt that is rolled back and run again (after a
        # quarantine) meets the same refusals, counted once.
        self.refused: dict[tuple[int, str], str] = {}

    def step(self, job_id: int, status: str, event: Event) -> Transition | None:
        try:
            return transition(status, event)
        except IllegalTransition as error:
            logger.warning("job %s: %s; its status is left as it is", job_id, error)
            self.refused[(job_id, event)] = f"job {job_id}: {error}"
            return None

    def apply(self, job: Any, event: Event, at: datetime) -> bool:
        """`step`, then the change set on `job` (a Job holding the fields it stamps)."""
        change = self.step(job.pk, job.status, event)
        if change is None:
            return False
        change.apply(job, at)
        return True

    def notes(self) -> list[str]:
        if not self.refused:
            return []
        which = [self.refused[key] for key in sorted(self.refused)][:NOTE_EXAMPLES]
        more = len(self.refused) - len(which)
        return [
            SKIPPED_NOTE.format(
                count=len(self.refused),
                which="; ".join(which) + (f"; {more} more" if more else ""),
            )
        ]


def stamp_columns(change: Transition, at: datetime) -> dict[str, Any]:
    """The change's timestamps as UPDATE values: a kept stamp stays when it is set already."""
    return {
        **dict.fromkeys(change.stamps, at),
        **{
            field: Coalesce(F(field), Value(at, output_field=DateTimeField()))
            for field in change.kept_stamps
        },
    }
