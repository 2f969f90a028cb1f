"""The simulated cluster: the embedded default, so every feature can be seen on a laptop.

Nodes are the portal's Node inventory (seeded from a YAML file, editable in the admin). Pods are
SimulatedPod rows, so every worker process sees the same cluster. Each observation plays the
kubelet's part: a pending pod starts running, a running pod succeeds once its run time is over,
and a pod whose deletion was requested disappears when its grace period ends (until then it
still holds its node's resources, like a terminating pod).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from portal.cluster.models import Node, SimulatedPod
from scheduler.adapters.cluster.base import ClusterError, DesiredPod, ObservedNode, ObservedPod
from scheduler.adapters.cluster.labels import is_managed, replica_key

# Annotations the portal sets on a desired pod for the simulation's benefit.
RUN_SECONDS = "gpuportal.io/expected-duration-seconds"
GPU_MODEL_LABEL = "gpu-model"


class SimulatedBackend:
    def __init__(
        self,
        *,
        default_run_seconds: int,
        now: Callable[[], datetime] = timezone.now,
    ) -> None:
        self._default_run_seconds = default_run_seconds
        self._now = now

    def list_nodes(self) -> list[ObservedNode]:
        return [node_observed(node) for node in Node.objects.order_by("name")]

    def list_pods(self) -> list[ObservedPod]:
        self.advance()
        return [
            pod_observed(pod)
            for pod in SimulatedPod.objects.order_by("namespace", "name")
            if is_managed(pod.labels)
        ]

    def create_pod(self, pod: DesiredPod) -> None:
        existing = SimulatedPod.objects.filter(name=pod.name, namespace=pod.namespace).first()
        if existing is not None:
            if replica_key(existing.labels) != replica_key(pod.labels):
                raise ClusterError(f"pod {pod.name} already exists for another replica")
            return
        run_seconds = int(pod.annotations.get(RUN_SECONDS) or self._default_run_seconds)
        SimulatedPod.objects.create(
            name=pod.name,
            namespace=pod.namespace,
            node_name=pod.node_name,
            labels=dict(pod.labels),
            annotations=dict(pod.annotations),
            requests=dict(pod.requests),
            phase="Pending",
            run_seconds=run_seconds,
        )

    def delete_pod(self, name: str, namespace: str, grace_seconds: int) -> None:
        now = self._now()
        pod = SimulatedPod.objects.filter(name=name, namespace=namespace).first()
        if pod is None or pod.delete_after is not None:
            return
        if grace_seconds <= 0 or pod.phase in ("Succeeded", "Failed"):
            pod.delete()
            return
        pod.delete_after = now + timedelta(seconds=grace_seconds)
        pod.save(update_fields=["delete_after"])

    @transaction.atomic
    def advance(self) -> None:
        """One kubelet tick: start pending pods, finish those whose time is up, drop deleted."""
        now = self._now()
        SimulatedPod.objects.filter(delete_after__lte=now).delete()
        SimulatedPod.objects.filter(phase="Pending", delete_after__isnull=True).update(
            phase="Running", started_at=now
        )
        finished = [
            pod.pk
            for pod in SimulatedPod.objects.filter(phase="Running", delete_after__isnull=True)
            .exclude(run_seconds__isnull=True)
            .only("pk", "started_at", "run_seconds")
            if pod.started_at + timedelta(seconds=pod.run_seconds) <= now
        ]
        SimulatedPod.objects.filter(pk__in=finished).update(phase="Succeeded", exit_code=0)


def node_observed(node: Node) -> ObservedNode:
    labels = {**node.labels, **node.topology_labels}
    if node.gpu_model:
        labels.setdefault(GPU_MODEL_LABEL, node.gpu_model)
    return ObservedNode(
        name=node.name,
        allocatable={
            "cpu": node.cpu_millis,
            "memory": node.memory_bytes,
            node.gpu_resource_name: node.gpu_count,
            "pods": node.pods_capacity,
        },
        labels=labels,
        unschedulable=not node.schedulable,
    )


def pod_observed(pod: SimulatedPod) -> ObservedPod:
    return ObservedPod(
        name=pod.name,
        namespace=pod.namespace,
        node_name=pod.node_name,
        phase=pod.phase,
        labels=dict(pod.labels),
        annotations=dict(pod.annotations),
        deletion_requested=pod.delete_after is not None,
        exit_code=pod.exit_code,
        reason="Completed" if pod.phase == "Succeeded" else None,
    )
