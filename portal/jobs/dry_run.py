"""Dry run: every Kubernetes object the portal would create for a Volcano Job manifest, like
`kubectl apply --dry-run=client`. Offline: no query, no cluster. The API's render endpoint and
`python -m portal.jobs.render` print it.

The manifest goes through the same checks as a submission (`volcano_job_parse`, then
`job_build`, which `job_submit` uses), and the pods and objects are built by the builders the
Kubernetes backend uses (jobspec.pods), so what is printed is what would be sent, but for the
ssh plugin's keys, which only the reconcile generates (the Secret is shown with placeholders,
and a warning says so). A job has no id before it is stored: names and labels carry `new` in
its place (`gp-<instance tag>-new-worker-0`, jobspec.labels), and a name from metadata.generateName carries `xxxxx` in place
of the 5 random characters a submission draws. Pods come without a node (the scheduler picks
it); whether the queue exists and the caller may use it is not checked offline: a warning says
so. A manifest without spec.queue is shown in the caller's default queue when the caller knows
it (the API), else in `default`, with a warning.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from kubernetes import client

from jobspec.job_plugins import JobShape
from jobspec.labels import pod_name
from jobspec.pods import desired_pod, plugin_objects, pod_object
from jobspec.podsecurity import DEFAULT_LEVEL
from jobspec.tenancy import TenantPolicy
from jobspec.volcano import (
    GENERATED_SUFFIX_LENGTH,
    ManifestError,
    generated_name,
    manifest_errors,
    spec_warnings,
    volcano_job_parse,
)
from portal.cluster.namespaces import job_namespace
from portal.jobs.limits import host_path_allowed, job_limits, task_count_check
from portal.jobs.policy import offline_policy
from portal.queues.selectors import VOLCANO_DEFAULT_QUEUE, DefaultQueue

from .models import JobTask
from .services import job_build

RENDER_JOB_ID = "new"
RENDER_NAME_SUFFIX = "x" * GENERATED_SUFFIX_LENGTH
QUEUE_DEFAULT_UNKNOWN = (
    "spec.queue is not given: a submission puts the job in the submitter's default queue (one "
    "a lead of their tenant set, else their queue named default); shown here as {queue}"
)
QUEUE_DEFAULT_RENDERED = (
    "spec.queue is not given: a submission puts the job in queue {queue}, {why}"
)
QUEUE_DEFAULT_NONE = "spec.queue is not given, and a submission would be refused: {error}"
NAME_RENDERED = (
    "metadata.generateName: a submission names the job {prefix} and "
    f"{GENERATED_SUFFIX_LENGTH} random characters; shown here as {{name}}"
)
QUEUE_NOT_CHECKED = (
    "queue {queue} is not checked by a dry run: submitting checks that it exists, is open "
    "and that you may use it"
)
KEYS_NOT_SHOWN = (
    "Secret {name} (ssh plugin) is shown with placeholders for its keys: the key pair is "
    "generated on the cluster when the job's pods are created, and the portal neither stores "
    "nor shows it"
)
NAMESPACE_NOT_KNOWN = (
    "each tenant's jobs run in a namespace of its own, and the tenant of queue {queue} is not "
    "known here (name it: --tenant), so the objects are shown in {namespace}"
)


@dataclass
class Rendered:
    objects: list[dict[str, Any]] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def job_render(
    data: Any,
    *,
    namespace: str | None = None,
    tenant_of: Callable[[str], str | None] | None = None,
    default_queue: DefaultQueue | None = None,
    security_level: str = DEFAULT_LEVEL,
    policy_of: Callable[[str], TenantPolicy | None] | None = None,
) -> Rendered:
    """The objects for manifest `data` (parsed YAML/JSON), or the errors by manifest path.
    They go to `namespace` if given, else where the job of the queue's tenant would
    (portal.cluster.namespaces; `tenant_of(queue)` names it, None when not known).
    `default_queue`: where the caller's manifests without spec.queue go (None: not known).
    The job is checked against, and its pods get the defaults of, the queue's tenant's
    cluster policy (`policy_of(queue)`, portal.jobs.policy.job_policy) when known, else the
    defaults at pod security level `security_level` with no admin's allowance
    (offline_policy)."""
    try:
        spec = volcano_job_parse(
            data, too_many_tasks=task_count_check(), allow_host_path=host_path_allowed()
        )
    except ManifestError as error:
        return Rendered(errors=error.errors)
    name = None
    if spec.generate_name is not None:
        name = generated_name(spec.generate_name, RENDER_NAME_SUFFIX)
    queue, warnings = _queue(spec.queue, default_queue)
    tenant = tenant_of(queue) if tenant_of is not None else None
    policy = policy_of(queue) if policy_of is not None else None
    if policy is None:
        policy = offline_policy(level=security_level, tenant=tenant)
    job, tasks, errors = job_build(**spec.job_fields(name=name), limits=job_limits(), policy=policy)
    if errors:
        return Rendered(errors=manifest_errors(errors, spec.path_of))
    warnings.append(QUEUE_NOT_CHECKED.format(queue=queue))
    if namespace is None:
        namespace = job_namespace(tenant) if tenant else settings.KUBERNETES_NAMESPACE
        if not tenant and settings.KUBERNETES_NAMESPACE_PER_TENANT:
            warnings.append(NAMESPACE_NOT_KNOWN.format(queue=queue, namespace=namespace))
    shape = JobShape(
        job_id=RENDER_JOB_ID,
        name=job.name,
        tasks=tuple((t.name, t.replicas) for t in tasks),
        prefix=job.object_prefix,
    )
    instance = settings.KUBERNETES_INSTANCE
    objects = []
    if job.plugins:
        objects = list(plugin_objects(job.plugins, shape, namespace=namespace, instance=instance))
    warnings += [
        KEYS_NOT_SHOWN.format(name=o["metadata"]["name"]) for o in objects if o["kind"] == "Secret"
    ]
    api = client.ApiClient()
    for task in tasks:
        for replica in range(task.replicas):
            desired = desired_pod(
                pod_name=pod_name(RENDER_JOB_ID, task.name, replica, prefix=job.object_prefix),
                node_name="",
                namespace=namespace,
                gpu_resource=_gpu_resource(task),
                job_id=RENDER_JOB_ID,
                job_name=job.name,
                duration=job.expected_duration_seconds,
                queue=queue,
                tenant=tenant or "",
                task=task.name,
                replica=replica,
                image=task.image,
                command=task.command,
                env=task.env,
                gpus=task.gpus,
                cpu_millis=task.cpu_millis,
                memory_bytes=task.memory_bytes,
                tolerations=task.tolerations,
                pod_template=task.pod_template,
                min_available=job.min_available,
                plugins=job.plugins,
                shape=shape,
                instance=instance,
                object_prefix=job.object_prefix,
                security_level=policy.level,
            )
            pod = pod_object(
                desired, settings.GPU_RESOURCE_NAMES, settings.KUBERNETES_SCHEDULER_NAME
            )
            # As the client sends it: its V1Pod, serialized (the field order of its models).
            sent = api.deserialize(json.dumps(pod), "V1Pod", "application/json")
            objects.append(api.sanitize_for_serialization(sent))
    said = spec_warnings(spec)
    if name is not None:
        said.insert(0, NAME_RENDERED.format(prefix=spec.generate_name, name=name))
    return Rendered(objects=objects, warnings=[*warnings, *said])


def _queue(given: str | None, default: DefaultQueue | None) -> tuple[str, list[str]]:
    """The queue the job is shown in, and what is said of it when the manifest names none."""
    if given is not None:
        return given, []
    if default is None:
        return VOLCANO_DEFAULT_QUEUE, [QUEUE_DEFAULT_UNKNOWN.format(queue=VOLCANO_DEFAULT_QUEUE)]
    if default.queue is None:
        return VOLCANO_DEFAULT_QUEUE, [QUEUE_DEFAULT_NONE.format(error=default.error)]
    name = default.queue.name
    return name, [QUEUE_DEFAULT_RENDERED.format(queue=name, why=default.why)]


def _gpu_resource(task: JobTask) -> str:
    """The GPU resource name the task's template asks for, else the first one configured (on
    a cluster, the chosen node's own name replaces it)."""
    spec = (task.pod_template or {}).get("spec") or {}
    for container in [*spec.get("containers", []), *spec.get("initContainers", [])]:
        for section in (container.get("resources") or {}).values():
            for name in section:
                if name.endswith("/gpu"):
                    return name
    return settings.GPU_RESOURCE_NAMES[0]
