"""The cluster backend chosen by settings.CLUSTER_BACKEND."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from scheduler.adapters.cluster.base import ClusterBackend

BACKENDS = ("simulated", "kubernetes")


def backend_from_settings() -> ClusterBackend:
    name = settings.CLUSTER_BACKEND
    if name == "simulated":
        from scheduler.adapters.cluster.simulated import SimulatedBackend

        return SimulatedBackend(default_run_seconds=settings.SIMULATED_DEFAULT_RUN_SECONDS)
    if name == "kubernetes":
        from scheduler.adapters.cluster.kubernetes import KubernetesBackend

        return KubernetesBackend.from_config(
            settings.KUBERNETES_NAMESPACE, settings.GPU_RESOURCE_NAMES
        )
    raise ImproperlyConfigured(f"CLUSTER_BACKEND must be one of {', '.join(BACKENDS)}: {name!r}")
