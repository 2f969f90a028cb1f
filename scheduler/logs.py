"""Pod logs for the portal: the portal never imports the adapters (import-linter), so it asks
here, and this imports the cluster backends only when called."""

from __future__ import annotations

from typing import Any


class LogUnavailable(Exception):
    """The cluster could not be asked for the log (unreachable, refused)."""


def pod_log_read(*, pod_name: str, tail: int) -> Any:
    """scheduler.adapters.pod_logs.pod_log_read: a PodLog (pod, lines, phase, exit_code,
    reason), or LogUnavailable saying why not."""
    from scheduler.adapters.cluster.base import ClusterError
    from scheduler.adapters.pod_logs import pod_log_read as read

    try:
        return read(pod_name=pod_name, tail=tail)
    except ClusterError as error:
        raise LogUnavailable(str(error)) from error
