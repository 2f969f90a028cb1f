"""The scheduler, as the portal calls it: kick a cycle after a commit, read a pod's log, read
the labels of the jobs' namespaces.

The scheduler's shell (the `scheduler` app: its Celery tasks and adapters) is above the portal:
it reads and writes the portal's rows through its port (scheduler.adapters.portal_port). So the
portal never imports it, directly or through another module (the import contracts in
pyproject.toml); the shell hands its calls over when Django starts (scheduler/apps.py), the way
an app connects its signal handlers in `ready()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured

NOT_CONNECTED = "the scheduler's shell is not connected: add the `scheduler` app to INSTALLED_APPS"


class PodLog(Protocol):
    """The last lines a pod's main container wrote, and how it ended if it did."""

    @property
    def pod(self) -> str: ...

    @property
    def lines(self) -> list[str]: ...

    @property
    def phase(self) -> str | None:
        """None: the cluster has no such pod (any more)."""

    @property
    def exit_code(self) -> int | None: ...

    @property
    def reason(self) -> str | None: ...


class LogUnavailable(Exception):
    """The cluster could not be asked for the log (unreachable, refused)."""


class ClusterUnavailable(Exception):
    """The cluster could not be asked (unreachable, refused)."""


@dataclass(frozen=True, slots=True)
class SchedulerShell:
    # Queue a scheduling cycle once the current transaction commits.
    cycle_kick: Callable[[], None]
    # pod_log_read(pod_name=, tail=): the pod's last `tail` lines; LogUnavailable when the
    # cluster cannot be asked.
    pod_log_read: Callable[..., PodLog]
    # namespace_labels_read(names=): {namespace: its labels} of those that exist;
    # ClusterUnavailable when the cluster cannot be asked.
    namespace_labels_read: Callable[..., dict[str, dict[str, str]]]


_shell: SchedulerShell | None = None


def facade_connect(shell: SchedulerShell) -> None:
    """Called once by the scheduler app when Django starts."""
    global _shell
    _shell = shell


def cycle_kick() -> None:
    """Queue a scheduling cycle once the current transaction commits (call from services)."""
    _connected().cycle_kick()


def pod_log_read(*, pod_name: str, tail: int) -> PodLog:
    """The last `tail` lines of `pod_name` and how it ended; LogUnavailable saying why not."""
    return _connected().pod_log_read(pod_name=pod_name, tail=tail)


def namespace_labels_read(*, names: list[str]) -> dict[str, dict[str, str]]:
    """The labels of each of the namespaces `names` that exists; ClusterUnavailable saying why
    the cluster could not be asked."""
    return _connected().namespace_labels_read(names=names)


def _connected() -> SchedulerShell:
    if _shell is None:
        raise ImproperlyConfigured(NOT_CONNECTED)
    return _shell
