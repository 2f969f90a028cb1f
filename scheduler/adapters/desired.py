"""What should be running: one DesiredPod per bound or running placement."""

from __future__ import annotations

from portal.cluster.models import Placement
from scheduler.adapters.cluster.base import DesiredPod
from scheduler.adapters.cluster.labels import replica_annotations, replica_labels
from scheduler.adapters.cluster.simulated import RUN_SECONDS


def desired_pods(*, namespace: str, gpu_resource_of: dict[str, str]) -> list[DesiredPod]:
    """`gpu_resource_of` maps node name -> the GPU resource name that node advertises, so a pod
    asks for `nvidia.com/gpu` on one node and `mars-tech.com/gpu` on another."""
    placements = (
        Placement.objects.filter(state__in=[Placement.State.BOUND, Placement.State.RUNNING])
        .select_related("task", "job__queue", "job__tenant")
        .order_by("id")
    )
    return [_desired(p, namespace, gpu_resource_of) for p in placements]


def _desired(placement: Placement, namespace: str, gpu_resource_of: dict[str, str]) -> DesiredPod:
    task, job = placement.task, placement.job
    requests = {"cpu": task.cpu_millis, "memory": task.memory_bytes}
    if task.gpus:
        requests[gpu_resource_of.get(placement.node_name, "nvidia.com/gpu")] = task.gpus
    annotations = replica_annotations(
        job_name=job.name, queue=job.queue.name, tenant=job.tenant.name
    )
    if job.expected_duration_seconds:
        annotations[RUN_SECONDS] = str(job.expected_duration_seconds)
    return DesiredPod(
        name=placement.pod_name,
        namespace=namespace,
        node_name=placement.node_name,
        image=task.image,
        command=list(task.command),
        env=dict(task.env),
        requests=requests,
        labels=replica_labels(
            job_id=job.id,
            task=task.name,
            replica=placement.replica,
            queue=job.queue.name,
            tenant=job.tenant.name,
        ),
        annotations=annotations,
    )
