"""What should be running: one DesiredPod per bound or running placement."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Sequence

from django.conf import settings

from jobspec.gpushare import SHARING_NONE
from jobspec.job_plugins import JobShape
from jobspec.labels import JOB_ID, object_prefix
from jobspec.pods import DesiredPod, desired_pod, plugin_objects
from scheduler.adapters.cluster.base import ObservedPod
from scheduler.adapters.cluster.gpushare import (
    ShareSize,
    share_annotations,
    share_resources,
    share_size,
    template_with_share,
)
from scheduler.adapters.cluster.owner import KIND as OWNER_KIND
from scheduler.adapters.cluster.owner import owner_name
from scheduler.adapters.portal_port import Job, JobTask, Placement, gpu_sharing, placement_namespace
from scheduler.adapters.quarantine import Faults

# The columns a desired pod is built from: read as tuples, because building the Placement,
# JobTask, Job, Queue and Tenant instances cost about half a millisecond per pod.
COLUMNS = (
    "pod_name",
    "node_name",
    "replica",
    "job_id",
    "job__name",
    "job__expected_duration_seconds",
    "job__queue__name",
    "job__tenant__name",
    "task__name",
    "task__image",
    "task__command",
    "task__env",
    "task__gpus",
    "task__cpu_millis",
    "task__memory_bytes",
    "task__tolerations",
    "task__pod_template",
    "job__min_available",
    "job__plugins",
    # a share of a card (scheduler.adapters.cluster.gpushare)
    "gpu_devices",
    "task__gpu_milli",
    "task__gpu_memory_mib",
    "node__gpu_memory_mib",
    "node__gpu_uuids",
    "namespace",
    # the defaults its pods get (jobspec.podsecurity)
    "job__tenant__security_level",
    # its objects' names (jobspec.labels.job_object_name)
    "job__object_prefix",
)
_JOB_ID, _JOB_NAME = COLUMNS.index("job_id"), COLUMNS.index("job__name")
_PLUGINS = COLUMNS.index("job__plugins")
_SHARE = _PLUGINS + 1
_NAMESPACE = COLUMNS.index("namespace")
_LEVEL = COLUMNS.index("job__tenant__security_level")
_PREFIX = COLUMNS.index("job__object_prefix")


def desired_pods(
    *, gpu_resource_of: dict[str, str], faults: Faults | None = None
) -> list[DesiredPod]:
    """Each pod in the namespace its placement was made in (portal.cluster.namespaces).
    `gpu_resource_of` maps node name -> the GPU resource name that node advertises, so a pod
    asks for `nvidia.com/gpu` on one node and `mars-tech.com/gpu` on another.

    With `faults`, a job whose rows break one of its pods is reported there and none of its
    pods is desired (the cycle quarantines it); without, the error propagates."""
    rows = list(
        Placement.objects.filter(state__in=[Placement.State.BOUND, Placement.State.RUNNING])
        .order_by("id")
        .values_list(*COLUMNS)
    )
    jobs = _plugin_jobs(rows)
    if faults is None:
        return [_desired(row, gpu_resource_of, jobs) for row in rows]
    built = [
        (row[3], faults.call("reconcile", row[3], _desired, row, gpu_resource_of, jobs))
        for row in rows
    ]
    failed = {fault.job_id for fault in faults}
    return [pod for job_id, pod in built if pod is not None and job_id not in failed]


def _plugin_jobs(rows: list[tuple]) -> dict[int, tuple[JobShape, tuple]]:
    """For each job of `rows` that runs plugins (svc, env, pytorch, ssh, ...): its shape (every task's
    name and replicas, in the job's order) and the objects it needs besides its pods, in the
    namespace of its pods."""
    names = {row[_JOB_ID]: row[_JOB_NAME] for row in rows if row[_PLUGINS]}
    plugins = {row[_JOB_ID]: row[_PLUGINS] for row in rows if row[_PLUGINS]}
    prefixes = {row[_JOB_ID]: row[_PREFIX] for row in rows}
    namespaces = {row[_JOB_ID]: placement_namespace(row[_NAMESPACE]) for row in rows}
    if not names:
        return {}
    tasks: dict[int, list[tuple[str, int]]] = {}
    for job_id, name, replicas in (
        JobTask.objects.filter(job_id__in=names)
        .order_by("id")
        .values_list("job_id", "name", "replicas")
    ):
        tasks.setdefault(job_id, []).append((name, replicas))
    jobs = {}
    for job_id, name in names.items():
        shape = JobShape(
            job_id=job_id, name=name, tasks=tuple(tasks.get(job_id, ())), prefix=prefixes[job_id]
        )
        objects = plugin_objects(
            plugins[job_id],
            shape,
            namespace=namespaces[job_id],
            instance=settings.KUBERNETES_INSTANCE,
        )
        jobs[job_id] = (shape, objects)
    return jobs


def ended_job_objects(job_ids: list[int]) -> list[tuple[dict, ...]]:
    """The plugin objects of jobs that no longer have pods to run (kept for their
    ttlSecondsAfterFinished), in the namespace their pods were in."""
    if not job_ids:
        return []
    namespaces = dict(
        Placement.objects.filter(job_id__in=job_ids)
        .order_by("id")
        .values_list("job_id", "namespace")
    )
    tasks: dict[int, list[tuple[str, int]]] = {}
    for job_id, name, replicas in (
        JobTask.objects.filter(job_id__in=job_ids)
        .order_by("id")
        .values_list("job_id", "name", "replicas")
    ):
        tasks.setdefault(job_id, []).append((name, replicas))
    return [
        plugin_objects(
            plugins,
            JobShape(job_id=job_id, name=name, tasks=tuple(tasks.get(job_id, ())), prefix=prefix),
            namespace=placement_namespace(namespaces.get(job_id, "")),
            instance=settings.KUBERNETES_INSTANCE,
        )
        for job_id, name, plugins, prefix in Job.objects.filter(id__in=job_ids)
        .exclude(plugins={})
        .order_by("id")
        .values_list("id", "name", "plugins", "object_prefix")
    ]


def job_objects_kept(
    desired: Sequence[DesiredPod],
    observed: Sequence[ObservedPod],
    deleted: Collection[str],
    ended_jobs: Sequence[int],
) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of the job objects the cluster keeps: those of the desired pods
    and of the `ended_jobs` still within their ttlSecondsAfterFinished, and each job's owner
    object while a pod of the job is left to own (finished pods stay for their retention;
    `deleted`: "namespace/name" of the pods this pass deleted)."""
    kept_jobs = ended_job_objects(list(ended_jobs))
    keep = {
        (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        for objects in (*(pod.job_objects for pod in desired), *kept_jobs)
        for obj in objects
    }
    keep |= {(OWNER_KIND, pod.namespace, pod.owner_object) for pod in desired}
    # An observed pod and a kept object name their job by its id only, not by whether its
    # names carry the instance: both names this instance could have given its owner are kept
    # (a job has only one of them; the other does not exist).
    owning = [
        (pod.namespace, pod.labels.get(JOB_ID, ""))
        for pod in observed
        if not pod.deletion_requested and f"{pod.namespace}/{pod.name}" not in deleted
    ]
    owning += [
        (obj["metadata"]["namespace"], obj["metadata"].get("labels", {}).get(JOB_ID, ""))
        for objects in kept_jobs
        for obj in objects
    ]
    prefixes = (None, object_prefix(settings.KUBERNETES_INSTANCE))
    keep |= {
        (OWNER_KIND, namespace, owner_name(job, prefix))
        for namespace, job in owning
        if job
        for prefix in prefixes
    }
    return keep


def _desired(
    row: tuple,
    gpu_resource_of: dict[str, str],
    jobs: dict[int, tuple[JobShape, tuple]],
) -> DesiredPod:
    (
        pod_name,
        node_name,
        replica,
        job_id,
        job_name,
        duration,
        queue,
        tenant,
        task,
        image,
        command,
        env,
        gpus,
        cpu_millis,
        memory_bytes,
        tolerations,
        pod_template,
        min_available,
        plugins,
    ) = row[:_SHARE]
    shape, objects = jobs.get(job_id, (None, ()))
    gpu_resource = gpu_resource_of.get(node_name, "nvidia.com/gpu")
    pod = desired_pod(
        pod_name=pod_name,
        node_name=node_name,
        namespace=placement_namespace(row[_NAMESPACE]),
        gpu_resource=gpu_resource,
        job_id=job_id,
        job_name=job_name,
        duration=duration,
        queue=queue,
        tenant=tenant,
        task=task,
        replica=replica,
        image=image,
        command=command,
        env=env,
        gpus=gpus,
        cpu_millis=cpu_millis,
        memory_bytes=memory_bytes,
        tolerations=tolerations,
        pod_template=pod_template,
        min_available=min_available,
        plugins=plugins,
        shape=shape,
        instance=settings.KUBERNETES_INSTANCE,
        object_prefix=row[_PREFIX],
        job_objects=objects,
        security_level=row[_LEVEL],
    )
    share = _gpu_share(row, node_name)
    return pod if share is None else with_gpu_share(pod, share, gpu_resource=gpu_resource)


def _gpu_share(row: tuple, node_name: str) -> GpuShare | None:
    """The share of a card this pod holds, in the cluster's sharing stack; None for whole
    GPUs (the device plugin's resource) or no GPU."""
    devices, milli, memory, device_memory, uuids = row[_SHARE:_NAMESPACE]
    if not milli and not memory:
        return None
    stack = gpu_sharing()
    if stack == SHARING_NONE:
        return None  # refused at submit; one stored before the setting changed asks as is
    index = devices[0] if devices else 0
    uuids = uuids or []
    return GpuShare(
        stack=stack,
        node=node_name,
        # A node that registered no cards (the simulated cluster) gets stable made-up ones.
        device_uuid=uuids[index] if index < len(uuids) else f"GPU-{node_name}-{index}",
        size=share_size(
            gpu_milli=milli, gpu_memory_mib=memory, device_memory_mib=device_memory or 0
        ),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class GpuShare:
    stack: str
    node: str
    device_uuid: str
    size: ShareSize


def with_gpu_share(pod: DesiredPod, share: GpuShare, *, gpu_resource: str) -> DesiredPod:
    """`pod` holding a share of one card: the sharing stack's resources, and the card the
    core picked as the stack's device plugin reads it."""
    template = pod.template
    if template:
        template = template_with_share(template, share.stack, share.size)
    # The pod runs on a GPU node as a whole-GPU pod does: the toleration the manifest gives
    # those for the node's GPU resource taint (jobspec.pods.pod_object), given here.
    tolerations = pod.tolerations
    gpu_toleration = {"key": gpu_resource, "operator": "Exists", "effect": "NoSchedule"}
    if gpu_toleration not in tolerations:
        tolerations = [*tolerations, gpu_toleration]
    annotations = share_annotations(
        share.stack,
        node=share.node,
        device_uuid=share.device_uuid,
        size=share.size,
        now=int(time.time()),
    )
    return dataclasses.replace(
        pod,
        requests={**pod.requests, **share_resources(share.stack, share.size)},
        annotations={**pod.annotations, **annotations},
        template=template,
        tolerations=tolerations,
    )
