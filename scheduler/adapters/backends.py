"""The cluster backend chosen by settings.CLUSTER_BACKEND."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from portal.cluster.namespaces import job_namespaces
from scheduler.adapters.cluster.base import ClusterBackend

if TYPE_CHECKING:
    from scheduler.adapters.cluster.kubernetes import KubernetesBackend
    from scheduler.adapters.cluster.watch_cache import ClusterCache

BACKENDS = ("simulated", "kubernetes")


def backend_from_settings() -> ClusterBackend:
    name = settings.CLUSTER_BACKEND
    if name == "simulated":
        from scheduler.adapters.cluster.simulated import SimulatedBackend

        return SimulatedBackend(default_run_seconds=settings.SIMULATED_DEFAULT_RUN_SECONDS)
    if name == "kubernetes":
        from scheduler.adapters.cluster.kubernetes import KubernetesBackend

        backend = KubernetesBackend.from_config(
            settings.KUBERNETES_NAMESPACE,
            settings.GPU_RESOURCE_NAMES,
            scheduler_name=settings.KUBERNETES_SCHEDULER_NAME,
            instance=settings.KUBERNETES_INSTANCE,
            write_concurrency=settings.KUBERNETES_WRITE_CONCURRENCY,
        )
        backend.namespaces = job_namespaces
        if settings.KUBERNETES_WATCH_CACHE:
            backend.cache = _shared_cache(backend)
        return backend
    raise ImproperlyConfigured(f"CLUSTER_BACKEND must be one of {', '.join(BACKENDS)}: {name!r}")


def _shared_cache(backend: KubernetesBackend) -> ClusterCache:
    """One watch cache per process and API server, kept from cycle to cycle (the cycle worker
    is one process); each cycle still gets a fresh backend, so its write breaker starts closed."""
    from scheduler.adapters.cluster.labels import owned_selector
    from scheduler.adapters.cluster.watch_cache import (
        ClusterCache,
        manifests_translation,
        shared_cache,
    )

    host = backend.core_v1.api_client.configuration.host
    return shared_cache(
        ("kubernetes", host, backend.instance, backend.namespace),
        lambda: ClusterCache(
            backend.core_v1,
            manifests_translation(backend.instance),
            object_namespaces=(backend.namespace,),
            object_selector=owned_selector(backend.instance),
        ),
    )
