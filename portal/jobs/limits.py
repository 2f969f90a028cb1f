"""The job limits and switches in force: read from settings at call time (never at import),
for the job spec's rules (jobspec.limits, jobspec.podtemplate) to check against."""

from __future__ import annotations

import functools
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobspec.gpushare import SHARING_NONE, SHARING_STACKS
from jobspec.limits import SETTINGS, JobLimits, task_count_error
from portal.jobs.backoff import BackoffSettings

GPU_SHARING_INVALID = "GPU_SHARING must be one of {choices}; it is {value!r}"
START_BACKOFF_INVALID = (
    "START_BACKOFF_BASE_SECONDS must be above 0 and at most START_BACKOFF_MAX_SECONDS; "
    "they are {base!r} and {most!r}"
)


def job_limits() -> JobLimits:
    """The limits in force now."""
    return JobLimits(
        **{name: getattr(settings, setting) for name, (setting, _) in SETTINGS.items()}
    )


def host_path_allowed() -> bool:
    """Whether pod templates may mount a node's directory (the JOB_ALLOW_HOST_PATH setting)."""
    return bool(settings.JOB_ALLOW_HOST_PATH)


def task_count_check() -> Callable[[int], str | None]:
    """`task_count_error` with the limits in force, for a parser to call."""
    return functools.partial(task_count_error, limits=job_limits())


def gpu_sharing() -> str:
    """The GPU sharing stack the cluster runs (settings.GPU_SHARING)."""
    value = getattr(settings, "GPU_SHARING", SHARING_NONE)
    if value not in SHARING_STACKS:
        raise ImproperlyConfigured(
            GPU_SHARING_INVALID.format(choices=", ".join(SHARING_STACKS), value=value)
        )
    return value


def start_backoff() -> BackoffSettings:
    """The backoff of jobs whose pods failed to start (portal.jobs.backoff), in force now."""
    base, most = settings.START_BACKOFF_BASE_SECONDS, settings.START_BACKOFF_MAX_SECONDS
    if not 0 < base <= most:
        raise ImproperlyConfigured(START_BACKOFF_INVALID.format(base=base, most=most))
    return BackoffSettings(base_seconds=float(base), max_seconds=float(most))
