"""A pod's log for the portal's pages and API: from the configured cluster backend, without the
cycle's watch cache (a web process reads one pod, it does not watch the cluster)."""

from __future__ import annotations

from django.conf import settings

from scheduler.adapters.cluster.base import PodLog


def pod_log_read(*, pod_name: str, tail: int) -> PodLog:
    """The last `tail` lines of `pod_name` in the jobs namespace; ClusterError when the
    cluster cannot be asked."""
    namespace = settings.KUBERNETES_NAMESPACE
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
