"""A pod's log for the portal's pages and API: from the configured cluster backend, without the
cycle's watch cache (a web process reads one pod, it does not watch the cluster)."""

from __future__ import annotations

from django.conf import settings

from portal.cluster.models import Placement
from portal.cluster.namespaces import placement_namespace
from scheduler.adapters.cluster.base import PodLog


def pod_log_read(*, pod_name: str, tail: int) -> PodLog:
    """The last `tail` lines of `pod_name`, in the namespace its placement was made in;
    ClusterError when the cluster cannot be asked."""
    stored = Placement.objects.filter(pod_name=pod_name).values_list("namespace", flat=True)
    namespace = placement_namespace(stored.first() or "")
    if settings.CLUSTER_BACKEND == "kubernetes":
        from scheduler.adapters.cluster.kubernetes import KubernetesBackend

        backend = KubernetesBackend.from_config(
            namespace,
            settings.GPU_RESOURCE_NAMES,
            scheduler_name=settings.KUBERNETES_SCHEDULER_NAME,
        )
        return backend.pod_log(pod_name, namespace, tail)
    from scheduler.adapters.cluster.simulated import SimulatedBackend

    simulated = SimulatedBackend(default_run_seconds=settings.SIMULATED_DEFAULT_RUN_SECONDS)
    return simulated.pod_log(pod_name, namespace, tail)
