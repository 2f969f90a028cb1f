"""The pods and objects a job becomes on Kubernetes, built from its stored values. Pure.

One builder for the scheduler's reconcile (scheduler.adapters.desired, from the placements'
rows) and the dry-run render (portal.jobs.dry_run, from a job not stored yet), so what the
render prints is what the Kubernetes backend sends. The share of a card the scheduler picked
for a pod is added by the adapters (scheduler.adapters.desired): it names a device of a node,
which only a placement has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from jobspec.job_plugins import JobShape, job_objects, pod_additions
from jobspec.labels import (
    INSTANCE,
    JOB_ID,
    MANAGED,
    TASK,
    job_object_name,
    label_value,
    replica_annotations,
    replica_labels,
)
from jobspec.podsecurity import DEFAULT_LEVEL
from jobspec.podspec import pod_spec_body, pod_template_annotations, pod_template_labels

# The job's expected duration, for the simulated cluster, which runs the pod that long.
RUN_SECONDS = "gpuportal.io/expected-duration-seconds"
# The node an unbound pod is headed for, so `kubectl describe` shows it before the binding.
TARGET_NODE = "gpuportal.io/target-node"


@dataclass(frozen=True, slots=True)
class DesiredPod:
    name: str
    namespace: str
    node_name: str
    image: str
    command: list[str]
    env: dict[str, str]
    # cpu in millicores, memory in bytes, at most one GPU resource name -> device count.
    requests: dict[str, int]
    labels: dict[str, str]
    annotations: dict[str, str]
    # Kubernetes tolerations as the API spells them (key, operator, value, effect, ...).
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    # The task's pod template with what the job's plugins add for this pod (env, host names,
    # the hosts volume), in Kubernetes' wire shape; empty: one container from the fields above.
    template: dict = field(default_factory=dict)
    # The gang: pods of the job are bound only once this many of them exist.
    min_available: int = 1
    # What the job's plugins add to this pod (jobspec.job_plugins.PodAdditions.as_dict) and
    # the objects its job needs before its pods start (Service, ConfigMap, NetworkPolicy).
    additions: dict = field(default_factory=dict)
    job_objects: tuple = ()
    # The tenant's pod security level: the defaults every pod gets (jobspec.podsecurity).
    security_level: str = DEFAULT_LEVEL
    # The job's object name (jobspec.labels.job_object_name), its owner object's; empty in a
    # pod built by hand: the legacy `gp-<job id>` (owner_object).
    owner: str = ""

    @property
    def owner_object(self) -> str:
        """The name of the job's owner object."""
        return self.owner or job_object_name(self.labels.get(JOB_ID, ""), None)


def desired_pod(
    *,
    pod_name: str,
    node_name: str,
    namespace: str,
    gpu_resource: str,
    job_id: int | str,
    job_name: str,
    duration: int | None,
    queue: str,
    tenant: str,
    task: str,
    replica: int,
    image: str,
    command: list[str],
    env: dict[str, str],
    gpus: int,
    cpu_millis: int,
    memory_bytes: int,
    tolerations: list,
    pod_template: dict,
    min_available: int,
    plugins: dict,
    shape: JobShape | None,
    instance: str,
    object_prefix: str | None,
    job_objects: tuple = (),
    security_level: str = DEFAULT_LEVEL,
) -> DesiredPod:
    """One replica's pod from its job's and task's values, marked as `instance`'s;
    `object_prefix` is the job's (jobspec.labels.job_object_name)."""
    additions: dict = {}
    if plugins and shape is not None:
        additions = pod_additions(plugins, shape, task, replica).as_dict()
    requests = {"cpu": cpu_millis, "memory": memory_bytes}
    if gpus:
        requests[gpu_resource] = gpus
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
            job_id=job_id,
            task=task,
            replica=replica,
            queue=queue,
            tenant=tenant,
            instance=instance,
        ),
        annotations=annotations,
        tolerations=list(tolerations),
        template=pod_template or {},
        min_available=min_available,
        additions=additions,
        job_objects=job_objects,
        security_level=security_level,
        owner=job_object_name(job_id, object_prefix),
    )


def plugin_objects(
    plugins: dict, shape: JobShape, *, namespace: str, instance: str
) -> tuple[dict, ...]:
    """The objects a job's plugins need besides its pods, marked as `instance`'s and
    selecting the job's pods by its id."""
    mark = {
        MANAGED: "true",
        INSTANCE: label_value(instance),
        JOB_ID: label_value(str(shape.job_id)),
    }
    return tuple(
        job_objects(
            plugins,
            shape,
            namespace=namespace,
            labels=mark,
            selector=mark,
            task_selector=lambda task: {**mark, TASK: label_value(task)},
        )
    )


def pod_object(
    desired: DesiredPod, gpu_resource_names: Iterable[str], scheduler_name: str
) -> dict[str, Any]:
    """The unbound Pod for `scheduler_name`, in the API's wire shape: kube-scheduler ignores
    pods naming another scheduler, and the kubelet starts nothing until the portal binds it
    (pods/binding) to desired.node_name, once the whole gang exists. The node is also an
    annotation, so `kubectl describe` shows where an unbound pod is headed. The body
    (containers, volumes, ...) is podspec's."""
    gpu_names = set(gpu_resource_names)
    # GPU nodes are commonly tainted with their resource name; the ExtendedResourceToleration
    # admission plugin would add these tolerations for a scheduled pod, a bound pod needs them.
    tolerations = [_toleration(item) for item in desired.tolerations]
    tolerations += [
        {"key": name, "operator": "Exists", "effect": "NoSchedule"}
        for name in sorted(desired.requests)
        if name in gpu_names and desired.requests[name] > 0
    ]
    spec = pod_spec_body(desired, gpu_names)
    spec["schedulerName"] = scheduler_name
    if tolerations:
        spec["tolerations"] = tolerations
    # The portal's labels and annotations win over a template's own.
    metadata: dict[str, Any] = {
        "name": desired.name,
        "namespace": desired.namespace,
        "labels": {**pod_template_labels(desired), **desired.labels},
    }
    annotations = {**pod_template_annotations(desired), **desired.annotations}
    if desired.node_name:  # none in a dry-run render
        annotations[TARGET_NODE] = desired.node_name
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def _toleration(item: Mapping[str, Any]) -> dict[str, Any]:
    """A task's toleration as the API takes it: empty fields left out."""
    toleration = {key: item[key] for key in ("key", "operator", "value", "effect") if item.get(key)}
    if item.get("tolerationSeconds") is not None:
        toleration["tolerationSeconds"] = item["tolerationSeconds"]
    return toleration
