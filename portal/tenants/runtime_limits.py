"""Run-time limits and preemption timings: the bounds every form, serializer and service checks.

A tenant's ``max_runtime_seconds`` is set by site admins; its leads set each queue's within it
(an empty queue limit is the tenant's), and a job may ask for less than its queue's. A queue's
``min_runtime_seconds`` (the cdp plugin's cooldown) and ``preemption_notice_seconds`` (time a
victim is given to checkpoint) default to 0, Volcano's behaviour.
"""

from __future__ import annotations

from django.core.validators import MaxValueValidator, MinValueValidator

# A year: past it a limit is a typo (and a notice longer than a day keeps the preemptor waiting
# for nothing a checkpoint needs).
RUNTIME_MAX_SECONDS = 366 * 24 * 3600
NOTICE_MAX_SECONDS = 24 * 3600

RUNTIME_LIMIT_VALIDATORS = [MinValueValidator(1), MaxValueValidator(RUNTIME_MAX_SECONDS)]
MIN_RUNTIME_VALIDATORS = [MaxValueValidator(RUNTIME_MAX_SECONDS)]
NOTICE_VALIDATORS = [MaxValueValidator(NOTICE_MAX_SECONDS)]

ABOVE_TENANT_MAXIMUM = "at most the tenant's maximum run time of {limit} s"
ABOVE_QUEUE_MAXIMUM = "at most the queue's maximum run time of {limit} s"
MIN_ABOVE_MAX = "at most the queue's maximum run time of {limit} s"


def effective_limit(*limits: int | None) -> int | None:
    """The tightest of the limits that are set (None: none is)."""
    set_ = [limit for limit in limits if limit is not None]
    return min(set_) if set_ else None
