"""A pod's log for the portal's pages and API (portal.scheduling.facade.pod_log_read): from the
configured cluster backend, without the cycle's watch cache (a web process reads one pod, it
does not watch the cluster)."""

from __future__ import annotations

from scheduler.adapters.backends import backend_from_settings
from scheduler.adapters.cluster.base import ClusterError, PodLog
from scheduler.adapters.portal_port import LogUnavailable, Placement, placement_namespace


def pod_log_read(*, pod_name: str, tail: int) -> PodLog:
    """The last `tail` lines of `pod_name`, in the namespace its placement was made in;
    LogUnavailable when the cluster cannot be asked."""
    stored = Placement.objects.filter(pod_name=pod_name).values_list("namespace", flat=True)
    namespace = placement_namespace(stored.first() or "")
    try:
        return backend_from_settings(watch_cache=False).pod_log(pod_name, namespace, tail)
    except ClusterError as error:
        raise LogUnavailable(str(error)) from error
