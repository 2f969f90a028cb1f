"""What should be running: one DesiredPod per bound or running placement."""

from __future__ import annotations

from portal.cluster.models import Placement
from portal.jobs.models import JobTask
from portal.jobs.plugins import JobShape, job_objects, pod_additions
from scheduler.adapters.cluster.base import DesiredPod
from scheduler.adapters.cluster.labels import (
    JOB_ID,
    MANAGED,
    label_value,
    replica_annotations,
    replica_labels,
)
from scheduler.adapters.cluster.simulated import RUN_SECONDS
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
)
_JOB_ID, _JOB_NAME, _PLUGINS = COLUMNS.index("job_id"), COLUMNS.index("job__name"), -1


def desired_pods(
    *, namespace: str, gpu_resource_of: dict[str, str], faults: Faults | None = None
) -> list[DesiredPod]:
    """`gpu_resource_of` maps node name -> the GPU resource name that node advertises, so a pod
    asks for `nvidia.com/gpu` on one node and `mars-tech.com/gpu` on another.

    With `faults`, a job whose rows break one of its pods is reported there and none of its
    pods is desired (the cycle quarantines it); without, the error propagates."""
    rows = list(
        Placement.objects.filter(state__in=[Placement.State.BOUND, Placement.State.RUNNING])
        .order_by("id")
        .values_list(*COLUMNS)
    )
    jobs = _plugin_jobs(rows, namespace)
    if faults is None:
        return [_desired(row, namespace, gpu_resource_of, jobs) for row in rows]
    built = [
        (row[3], faults.call("reconcile", row[3], _desired, row, namespace, gpu_resource_of, jobs))
        for row in rows
    ]
    failed = {fault.job_id for fault in faults}
    return [pod for job_id, pod in built if pod is not None and job_id not in failed]


def _plugin_jobs(rows: list[tuple], namespace: str) -> dict[int, tuple[JobShape, tuple]]:
    """For each job of `rows` that runs plugins (svc, env, pytorch): its shape (every task's
    name and replicas, in the job's order) and the objects it needs besides its pods."""
    names = {row[_JOB_ID]: row[_JOB_NAME] for row in rows if row[_PLUGINS]}
    plugins = {row[_JOB_ID]: row[_PLUGINS] for row in rows if row[_PLUGINS]}
    if not names:
        return {}
    tasks: dict[int, list[tuple[str, int]]] = {}
    for job_id, name, replicas in (
        JobTask.objects.filter(job_id__in=names).order_by("id").values_list(
            "job_id", "name", "replicas"
        )
    ):
        tasks.setdefault(job_id, []).append((name, replicas))
    jobs = {}
    for job_id, name in names.items():
        shape = JobShape(job_id=job_id, name=name, tasks=tuple(tasks.get(job_id, ())))
        objects = job_objects(
            plugins[job_id],
            shape,
            namespace=namespace,
            labels={MANAGED: "true", JOB_ID: label_value(str(job_id))},
            selector={MANAGED: "true", JOB_ID: label_value(str(job_id))},
        )
        jobs[job_id] = (shape, tuple(objects))
    return jobs


def _desired(
    row: tuple,
    namespace: str,
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
    ) = row
    additions: dict = {}
    objects: tuple = ()
    if job_id in jobs:
        shape, objects = jobs[job_id]
        additions = pod_additions(plugins, shape, task, replica).as_dict()
    requests = {"cpu": cpu_millis, "memory": memory_bytes}
    if gpus:
        requests[gpu_resource_of.get(node_name, "nvidia.com/gpu")] = gpus
    annotations = replica_annotations(job_name=job_name, queue=queue, tenant=tenant)
    if duration:
        annotations[RUN_SECONDS] = str(duration)
    return DesiredPod(
        name=pod_name,
        namespace=namespace,
        node_name=node_name,
        image=image,
        command=list(command),
        env=dict(env),
        requests=requests,
        labels=replica_labels(
            job_id=job_id, task=task, replica=replica, queue=queue, tenant=tenant
        ),
        annotations=annotations,
        tolerations=list(tolerations),
        template=pod_template or {},
        min_available=min_available,
        additions=additions,
        job_objects=objects,
    )
