"""The cluster backend settings.CLUSTER_BACKEND names: the one place that chooses it, for the
cycle (scheduler.tasks) and for a pod's log (scheduler.adapters.pod_logs).

Each backend's module is imported when it is chosen: the Kubernetes client is a large library
that the simulated cluster never needs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from scheduler.adapters.cluster.base import ClusterBackend
from scheduler.adapters.portal_port import job_namespaces

if TYPE_CHECKING:
    from scheduler.adapters.cluster.kubernetes import KubernetesBackend
    from scheduler.adapters.cluster.watch_cache import ClusterCache

BACKENDS = ("simulated", "kubernetes")


def backend_from_settings(*, watch_cache: bool = True) -> ClusterBackend:
    """A fresh backend; on Kubernetes with KUBERNETES_WATCH_CACHE, reading through the
    process's watch cache unless `watch_cache` is off (a web process reads one pod's log)."""
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
        if watch_cache and settings.KUBERNETES_WATCH_CACHE:
            backend.cache = _shared_cache(backend)
        return backend
    raise ImproperlyConfigured(f"CLUSTER_BACKEND must be one of {', '.join(BACKENDS)}: {name!r}")


def _shared_cache(backend: KubernetesBackend) -> ClusterCache:
    """One watch cache per process and API server, kept from cycle to cycle (the cycle worker
    is one process); each cycle still gets a fresh backend, so its write breaker starts closed."""
    from jobspec.labels import owned_selector
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
