"""One scheduling cycle: observe -> snapshot -> core -> persist -> reconcile, timed per phase.

The caller holds the cluster-wide cycle lock (scheduler.tasks). Each phase is safe to repeat:
if a worker dies anywhere in here, the next cycle observes the cluster again and converges.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from portal.cluster.models import Node
from portal.cluster.services import node_inventory_sync
from portal.scheduling.models import CycleRun
from scheduler.adapters import reconcile
from scheduler.adapters.cluster.base import ClusterBackend, ObservedNode, ObservedPod
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.desired import desired_pods
from scheduler.adapters.observe import cluster_observe
from scheduler.adapters.persist import decisions_persist
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.cycle import run_cycle

logger = logging.getLogger(__name__)

GPU_MODEL_LABELS = ("gpu-model", "nvidia.com/gpu.product")
TOPOLOGY_PREFIXES = ("topology.kubernetes.io/", "volcano.sh/hypernode", "network.topology/")


def scheduling_cycle_run(
    *, backend: ClusterBackend, now: Callable[[], datetime] = timezone.now
) -> CycleRun:
    cycle = CycleRun.objects.create(started_at=now())
    timings: dict[str, float] = {}
    try:
        with _timed(timings, "snapshot_ms"):
            if not isinstance(backend, SimulatedBackend):
                # The simulated cluster's nodes are the inventory itself; a real one reports its own.
                nodes_sync(backend.list_nodes())
            pods = backend.list_pods()
            cluster_observe(pods=pods, now=now())
            bundle = snapshot_build(now=now())
        with _timed(timings, "core_ms"):
            result = run_cycle(bundle.snapshot, bundle.conf)
        with _timed(timings, "persist_ms"):
            decisions_persist(bundle=bundle, result=result, cycle=cycle, now=now())
        with _timed(timings, "reconcile_ms"):
            report = cluster_reconcile(backend=backend, observed=pods)
            if not report.ok:
                cycle.error = "; ".join(report.errors)[:10_000]
    except Exception as error:
        logger.exception("scheduling cycle %s failed", cycle.id)
        cycle.error = f"{type(error).__name__}: {error}"[:10_000]
        raise
    finally:
        for field, value in timings.items():
            setattr(cycle, field, value)
        cycle.finished_at = now()
        cycle.save()
    return cycle


def cluster_reconcile(
    *, backend: ClusterBackend, observed: list[ObservedPod] | None = None
) -> reconcile.ReconcileReport:
    """Make the cluster match the bound and running placements. Finished pods are deleted: the
    observe step has already recorded their outcome."""
    if observed is None:
        observed = backend.list_pods()
    gpu_resource_of = dict(Node.objects.values_list("name", "gpu_resource_name"))
    desired = desired_pods(namespace=settings.KUBERNETES_NAMESPACE, gpu_resource_of=gpu_resource_of)
    plan = reconcile.plan(desired, observed, delete_finished=True)
    return reconcile.apply(plan, backend, grace_seconds=settings.EVICTION_GRACE_SECONDS)


def nodes_sync(observed: list[ObservedNode]) -> None:
    gpu_names = set(settings.GPU_RESOURCE_NAMES)
    specs = []
    for node in observed:
        gpu_name = next((n for n in sorted(node.allocatable) if n in gpu_names), None)
        model = next((node.labels[k] for k in GPU_MODEL_LABELS if k in node.labels), "")
        specs.append(
            {
                "name": node.name,
                "gpu_resource_name": gpu_name or "nvidia.com/gpu",
                "gpu_count": node.allocatable.get(gpu_name, 0) if gpu_name else 0,
                "gpu_model": model,
                "cpu_millis": node.allocatable.get("cpu", 0),
                "memory_bytes": node.allocatable.get("memory", 0),
                "pods_capacity": node.allocatable.get("pods", 110),
                "labels": dict(node.labels),
                "topology_labels": {
                    k: v for k, v in node.labels.items() if k.startswith(TOPOLOGY_PREFIXES)
                },
                "schedulable": not node.unschedulable,
            }
        )
    node_inventory_sync(nodes=specs)


@contextmanager
def _timed(timings: dict[str, float], field: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        timings[field] = (time.perf_counter() - start) * 1000
