"""The body of a job pod (containers, init containers, volumes, pull secrets, security context,
host names) in Kubernetes' wire shape, from a DesiredPod. Pure.

jobspec.pods.pod_object adds the metadata and the scheduling part (scheduler, tolerations): the
Kubernetes backend sends it and the dry-run render prints it. A pod whose task has no template
gets one container built from the task's fields; a template (jobspec.podtemplate, already
checked) is copied with one change: GPU resources are asked under the name the chosen node
advertises (`nvidia.com/gpu` on one node, `mars-tech.com/gpu` on another), so a template
written for one vendor runs on the other. Either way the pod gets the defaults of its tenant's
pod security level (jobspec.podsecurity): no service-account token, seccomp RuntimeDefault,
and under `restricted` no root and no capabilities; and the file of its preemption deadline
(jobspec.notice: a downward API volume, which every pod security level allows).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from jobspec.labels import JOB_ID
from jobspec.notice import with_deadline_volume
from jobspec.podsecurity import secured_spec

if TYPE_CHECKING:
    from jobspec.pods import DesiredPod

CONTAINER_NAME = "main"
# Resources whose request the kubelet reads as-is; everything else in requests is an extended
# resource (GPUs and friends), which Kubernetes only accepts with limits equal to requests.
NATIVE_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})
DEFAULT_RESTART_POLICY = "Never"
# Pod spec keys a template may carry besides the containers (jobspec.podtemplate checked
# them) plus the host names the svc plugin sets.
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_POD_KEYS = (
    "volumes",
    "imagePullSecrets",
    "securityContext",
    "nodeSelector",
    "priorityClassName",
    "terminationGracePeriodSeconds",
    "automountServiceAccountToken",
    "hostname",
    "subdomain",
)


def pod_spec_body(desired: DesiredPod, gpu_resource_names: Iterable[str]) -> dict[str, Any]:
    """The pod spec without nodeName and tolerations, as the API server reads it (camelCase),
    with the defaults of the tenant's pod security level (no service-account token, seccomp
    RuntimeDefault, and restricted's: jobspec.podsecurity.secured_spec), and the preemption
    deadline's file (jobspec.notice)."""
    body = with_additions(_body(desired, frozenset(gpu_resource_names)), desired.additions)
    return secured_spec(with_deadline_volume(body), desired.security_level)


def _body(desired: DesiredPod, gpu_names: frozenset[str]) -> dict[str, Any]:
    template = desired.template.get("spec") if desired.template else None
    if not template:
        return {
            "restartPolicy": DEFAULT_RESTART_POLICY,
            "containers": [_simple_container(desired)],
        }
    node_gpu = next((name for name in sorted(desired.requests) if name in gpu_names), None)
    body: dict[str, Any] = {
        "restartPolicy": template.get("restartPolicy", DEFAULT_RESTART_POLICY),
        "containers": [_with_gpu_name(c, gpu_names, node_gpu) for c in template["containers"]],
    }
    if template.get("initContainers"):
        body["initContainers"] = [
            _with_gpu_name(c, gpu_names, node_gpu) for c in template["initContainers"]
        ]
    for key in _POD_KEYS:
        if template.get(key) not in (None, "", [], {}):
            body[key] = copy.deepcopy(template[key])
    if template.get("affinity"):
        body["affinity"] = affinity_for_job(template["affinity"], desired.labels.get(JOB_ID, ""))
    return body


def affinity_for_job(affinity: Mapping[str, Any], job_id: str) -> dict[str, Any]:
    """A template's affinity (jobspec.affinity, already checked) with each pod
    anti-affinity selector confined to the job's own pods by its job-id label: a tenant's
    selector (say `app: ddp`) must not repel, nor be repelled by, another job's pods."""
    out = copy.deepcopy(dict(affinity))
    for term in (out.get("podAntiAffinity") or {}).get(_REQUIRED) or []:
        selector = term.setdefault("labelSelector", {})
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), JOB_ID: job_id}
    return out


def with_additions(body: dict[str, Any], additions: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with what the job's plugins add (jobspec.job_plugins.PodAdditions): appended
    after the template's own, as upstream's plugins append (a later duplicate env name wins)."""
    if not additions:
        return body
    for section, env_key in (("containers", "env"), ("initContainers", "initEnv")):
        for container in body.get(section, []):
            if additions.get(env_key):
                container["env"] = [*container.get("env", []), *additions[env_key]]
            if additions.get("volumeMounts"):
                container["volumeMounts"] = [
                    *container.get("volumeMounts", []),
                    *additions["volumeMounts"],
                ]
    for section, ports_key in (("containers", "ports"), ("initContainers", "initPorts")):
        for container in body.get(section, []):
            _open_ports(container, additions.get(ports_key) or [])
    if additions.get("volumes"):
        body["volumes"] = [*body.get("volumes", []), *additions["volumes"]]
    for key in ("hostname", "subdomain"):
        if additions.get(key):
            body[key] = additions[key]
    if command_of := additions.get("commandOf"):
        for container in _named(body, command_of["container"]):
            container["command"] = list(command_of["command"])
    if ports_of := additions.get("portsOf"):
        for container in _named(body, ports_of["container"]):
            _open_ports(container, ports_of["ports"])
    # After the loops above: a plugin's own init container gets no other plugin's additions.
    _add_init_containers(body, additions.get("initContainers") or [])
    return body


def _add_init_containers(body: dict[str, Any], added: list[dict[str, Any]]) -> None:
    """Each after the pod's own, unless the pod has one of its name (pytorch.go:213-217)."""
    for init in added:
        if all(c.get("name") != init["name"] for c in body.get("initContainers", [])):
            body["initContainers"] = [*body.get("initContainers", []), copy.deepcopy(init)]


def _open_ports(container: dict[str, Any], ports: list[dict[str, Any]]) -> None:
    for port in ports:
        # A port the container (or another plugin) opened already is not added twice.
        if all(p.get("containerPort") != port["containerPort"] for p in container.get("ports", [])):
            container["ports"] = [*container.get("ports", []), port]


def _named(body: dict[str, Any], name: str) -> list[dict[str, Any]]:
    """The containers called `name`; in a pod the portal built itself (its one container is
    CONTAINER_NAME), that container whatever the name: the plugins' container flags name a
    template's containers, and the portal's own container is nobody's to name."""
    containers = body.get("containers", [])
    named = [c for c in containers if c.get("name") == name]
    if not named and len(containers) == 1 and containers[0].get("name") == CONTAINER_NAME:
        return containers
    return named


def pod_template_labels(desired: DesiredPod) -> dict[str, str]:
    """The template's own pod labels (the portal's labels are laid over them)."""
    return dict((desired.template.get("metadata") or {}).get("labels") or {})


def pod_template_annotations(desired: DesiredPod) -> dict[str, str]:
    return dict((desired.template.get("metadata") or {}).get("annotations") or {})


def _simple_container(desired: DesiredPod) -> dict[str, Any]:
    requests = {name: _quantity(name, amount) for name, amount in sorted(desired.requests.items())}
    limits = {name: qty for name, qty in requests.items() if name not in NATIVE_RESOURCES}
    resources: dict[str, Any] = {"requests": requests}
    if limits:
        resources["limits"] = limits
    container: dict[str, Any] = {"name": CONTAINER_NAME, "image": desired.image}
    if desired.command:
        container["command"] = list(desired.command)
    if desired.env:
        container["env"] = [{"name": k, "value": v} for k, v in sorted(desired.env.items())]
    container["resources"] = resources
    return container


def _with_gpu_name(
    container: Mapping[str, Any], gpu_names: frozenset[str], node_gpu: str | None
) -> dict[str, Any]:
    copied = copy.deepcopy(dict(container))
    resources = copied.get("resources")
    if not resources or node_gpu is None:
        return copied
    for section in ("limits", "requests"):
        values = resources.get(section)
        if not values:
            continue
        renamed = {}
        for name, amount in values.items():
            # Any */gpu name in a template means "GPUs" (the portal counts GPUs of any name).
            is_gpu = name in gpu_names or name.endswith("/gpu")
            renamed[node_gpu if is_gpu else name] = amount
        resources[section] = renamed
    return copied


def _quantity(name: str, amount: int) -> str:
    if amount < 0:
        raise ValueError(f"negative request {name}={amount}")
    return f"{amount}m" if name == "cpu" else str(amount)
