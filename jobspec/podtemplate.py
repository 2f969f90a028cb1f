"""The pod template a task may carry: a checked subset of Kubernetes' PodTemplateSpec.

Pure: a parsed template (a dict in Kubernetes' own camelCase shape) goes in, the normalised
template and the task's summary (image, command, GPUs, CPU, memory, node selector) come out, or
errors keyed by the path at fault (`spec.containers[1].env[0].valueFrom.secretKeyRef.namespace`).
Every key is checked against what the portal can honour: an unknown or unsupported field is an
error naming it, never silently dropped. The stored template keeps `valueFrom` as a reference,
so a secret never reaches the database in plain text.

Resources are summed the way the kubelet computes a pod's effective request: the sum over the
app containers, or the largest init container if that is larger (init containers run one at a
time, before the app containers): kubernetes pkg/api/v1/resource/helpers.go
`PodRequests` ("max(sum(containers), max(initContainers))").

Upper bounds an operator tunes (environment size, command size) are jobspec.limits'; the
fixed bounds below follow Kubernetes and keep a stored template small.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from .affinity import affinity_parse
from .gpushare import (
    GPU_MEMORY_NAMES,
    PERCENT_ABOVE_100,
    SHARE_NAMES,
    is_gpu_count_name,
    share_from_resources,
)
from .names import (
    SUBDOMAIN_MAX,
    SUBDOMAIN_RE,
    annotation_key_error,
    annotations_size_error,
    env_name_error,
    image_error,
    label_key_error,
    label_value_error,
)
from .quantity import parse_quantity

CONTAINERS_MAX = 16  # app containers, and separately init containers, per pod
VOLUMES_MAX = 64
PORTS_MAX = 64
MOUNTS_MAX = 64
PULL_SECRETS_MAX = 16
ENV_FROM_MAX = 16
NAME_MAX = 253
PATH_MAX = 4096

REQUIRED = "this field is required"
NOT_A_MAPPING = "must be a mapping"
NOT_A_LIST = "must be a list"
NOT_A_STRING = "must be a string"
NOT_A_BOOL = "must be true or false"
NOT_AN_INTEGER = "must be an integer"
NOT_A_STRING_LIST = "must be a list of strings"
UNSUPPORTED = "not supported by the portal ({why})"
UNKNOWN_FIELD = "unknown or unsupported field; the portal accepts: {allowed}"
TOO_MANY = "at most {limit} {what}; this has {count}"
NO_CONTAINERS = "a task needs at least one container"
BAD_DNS_LABEL = "must be a DNS label (lowercase letters, digits and '-', at most 63)"
BAD_NAME = "must be a Kubernetes object name (lowercase letters, digits, '-' and '.')"
DUPLICATE_NAME = "name {name} is used twice"
NOT_ONE_OF = "must be one of: {choices}"
OUT_OF_RANGE = "must be between {low} and {high}"
GPU_NOT_WHOLE = "GPUs must be a whole number"
GPU_TWO_NAMES = "only one GPU resource name per container (found {names})"
GPU_REQUEST_MISMATCH = "GPU request ({request}) differs from the limit ({limit})"
UNKNOWN_RESOURCE = (
    "unknown resource; the portal accepts cpu, memory, ephemeral-storage, */gpu and a share "
    "of one GPU (volcano.sh/vgpu-number, -memory, -memory-percentage, -cores; "
    "nvidia.com/gpumem, gpumem-percentage, gpucores)"
)
ENV_NOT_ONE_SOURCE = "give exactly one of value or valueFrom"
VALUE_FROM_NOT_ONE = (
    "valueFrom needs exactly one of secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef"
)
OTHER_NAMESPACE = (
    "a reference to another namespace is not allowed: the pod can only read secrets and "
    "config maps of the namespace it runs in"
)
UNDECLARED_VOLUME = "volume {name} is not declared in spec.volumes"
VOLUME_NOT_ONE_SOURCE = (
    "a volume needs exactly one of persistentVolumeClaim, emptyDir, configMap, secret, hostPath"
)
HOST_PATH_NOT_ALLOWED = (
    "hostPath volumes are not allowed on this portal (an admin enables them with "
    "JOB_ALLOW_HOST_PATH)"
)
NOT_ABSOLUTE = "must be an absolute path"
DUPLICATE_MOUNT_PATH = "mount path {path} is used twice in this container"
UNSUPPORTED_WHY = {
    "hostNetwork": "pods of the portal never share the node's network",
    "hostPID": "pods of the portal never share the node's process namespace",
    "hostIPC": "pods of the portal never share the node's IPC namespace",
    "serviceAccountName": "job pods run with the namespace's default service account",
    "nodeName": "the portal's scheduler chooses the node",
    "schedulerName": "the portal's scheduler places every job pod",
    "hostname": "the portal names each pod's host (see the svc plugin)",
    "subdomain": "the portal names each job's subdomain (see the svc plugin)",
    "projected": (
        "a projected volume can carry a service-account token; mount secret and configMap "
        "volumes instead"
    ),
}
GPU_SHARE_IN_TWO = (
    "a share of one GPU is one container's: {containers} all ask for one (each would be "
    "given the whole share); ask for it in one container"
)
PROFILE_TYPES = ("RuntimeDefault", "Localhost", "Unconfined")
LOCALHOST_PROFILE_NEEDED = "localhostProfile is required with type Localhost, and only then"

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
# A DNS subdomain of at most 253 characters (jobspec.names), the rule for object names.
_OBJECT_NAME = re.compile(rf"(?=.{{1,{SUBDOMAIN_MAX}}}\Z)(?:{SUBDOMAIN_RE.pattern})")
_NATIVE = ("cpu", "memory", "ephemeral-storage")
_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.podIP",
    "status.podIPs",
)


@dataclass
class TaskSummary:
    """What the scheduler and the pages read of a template."""

    image: str = ""
    command: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    gpus: int = 0
    # A share of one device (jobspec.gpushare), from Volcano's or HAMi's share resources.
    gpu_milli: int = 0
    gpu_memory_mib: int = 0
    # None: no container states it (the task's default applies, see job_submit).
    cpu_millis: int | None = None
    memory_bytes: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    gpu_resource: str | None = None
    # spec.tolerations as given: the task's own field (JobTask.tolerations) checks and keeps
    # them, for a template as for a task without one.
    tolerations: Any = None


@dataclass
class ParsedTemplate:
    template: dict[str, Any]
    summary: TaskSummary
    errors: dict[str, list[str]]


class _Walk:
    """Error collection and typed reads, every message keyed by the path at fault."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.errors: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(self.prefix + path, []).append(message)

    def mapping(self, value: Any, path: str, allowed: tuple[str, ...]) -> dict[str, Any] | None:
        if not isinstance(value, dict):
            self.add(path, NOT_A_MAPPING)
            return None
        for key in value:
            if key in allowed:
                continue
            kpath = f"{path}.{key}" if path else str(key)
            if key in UNSUPPORTED_WHY:
                self.add(kpath, UNSUPPORTED.format(why=UNSUPPORTED_WHY[key]))
            else:
                self.add(kpath, UNKNOWN_FIELD.format(allowed=", ".join(allowed)))
        return value

    def items(self, value: Any, path: str, limit: int, what: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.add(path, NOT_A_LIST)
            return []
        if len(value) > limit:
            self.add(path, TOO_MANY.format(limit=limit, what=what, count=len(value)))
            return []
        return value

    def string(
        self, value: Any, path: str, *, required: bool = False, pattern: re.Pattern | None = None,
        message: str = "", max_chars: int = PATH_MAX,
    ) -> str | None:  # fmt: skip
        if value is None:
            if required:
                self.add(path, REQUIRED)
            return None
        if not isinstance(value, str):
            self.add(path, NOT_A_STRING)
            return None
        if len(value) > max_chars:
            self.add(path, TOO_MANY.format(limit=max_chars, what="characters", count=len(value)))
            return None
        if pattern is not None and not pattern.fullmatch(value):
            self.add(path, message)
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.add(path, NOT_A_BOOL)
            return None
        return value

    def integer(self, value: Any, path: str, low: int, high: int) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(path, NOT_AN_INTEGER)
            return None
        if not low <= value <= high:
            self.add(path, OUT_OF_RANGE.format(low=low, high=high))
            return None
        return value

    def string_list(self, value: Any, path: str) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.add(path, NOT_A_STRING_LIST)
            return None
        return list(value)

    def string_map(self, value: Any, path: str) -> dict[str, str] | None:
        if value is None:
            return None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            self.add(path, "must be a mapping of strings to strings")
            return None
        return dict(value)


def _put(target: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def pod_template_parse(raw: Any, *, allow_host_path: bool, prefix: str = "") -> ParsedTemplate:
    """Check and normalise a pod template (`{metadata: ..., spec: ...}`); errors are keyed
    `<prefix><path>`, e.g. prefix `spec.tasks[0].template.` for a Volcano manifest."""
    w = _Walk(prefix)
    summary = TaskSummary()
    out: dict[str, Any] = {}
    top = w.mapping(raw, "", ("metadata", "spec"))
    if top is None:
        return ParsedTemplate({}, summary, w.errors)
    if top.get("metadata") is not None:
        _put(out, "metadata", _metadata(w, top["metadata"]))
    if top.get("spec") is None:
        w.add("spec", REQUIRED)
        return ParsedTemplate({}, summary, w.errors)
    spec = w.mapping(
        top["spec"],
        "spec",
        (
            "containers",
            "initContainers",
            "volumes",
            "imagePullSecrets",
            "securityContext",
            "nodeSelector",
            "affinity",
            "priorityClassName",
            "restartPolicy",
            "terminationGracePeriodSeconds",
            "tolerations",
            "automountServiceAccountToken",
        ),
    )
    if spec is None:
        return ParsedTemplate({}, summary, w.errors)
    pod: dict[str, Any] = {}
    volumes = _volumes(w, spec.get("volumes"), "spec.volumes", allow_host_path=allow_host_path)
    # Every volume named, valid or not: a mount of a faulty volume is not reported twice.
    raw_volumes = spec.get("volumes") if isinstance(spec.get("volumes"), list) else []
    declared = {
        v["name"] for v in raw_volumes if isinstance(v, dict) and isinstance(v.get("name"), str)
    }
    names: set[str] = set()
    containers = _containers(w, spec.get("containers"), "spec.containers", declared, names)
    if not containers and "spec.containers" not in {k[len(prefix) :] for k in w.errors}:
        w.add("spec.containers", NO_CONTAINERS)
    init = _containers(w, spec.get("initContainers"), "spec.initContainers", declared, names)
    pod["containers"] = containers
    _put(pod, "initContainers", init or None)
    _put(pod, "volumes", volumes or None)
    pull = w.items(spec.get("imagePullSecrets"), "spec.imagePullSecrets", PULL_SECRETS_MAX,
                   "image pull secrets")  # fmt: skip
    secrets = []
    for index, item in enumerate(pull):
        ipath = f"spec.imagePullSecrets[{index}]"
        entry = w.mapping(item, ipath, ("name",))
        if entry is not None:
            name = w.string(entry.get("name"), f"{ipath}.name", required=True, pattern=_OBJECT_NAME,
                            message=BAD_NAME)  # fmt: skip
            if name:
                secrets.append({"name": name})
    _put(pod, "imagePullSecrets", secrets or None)
    _put(pod, "securityContext", _pod_security(w, spec.get("securityContext")))
    _put(pod, "automountServiceAccountToken", w.boolean(
        spec.get("automountServiceAccountToken"), "spec.automountServiceAccountToken"))  # fmt: skip
    selector = w.string_map(spec.get("nodeSelector"), "spec.nodeSelector")
    _put(pod, "nodeSelector", selector or None)
    _put(pod, "affinity", affinity_parse(w, spec.get("affinity"), "spec.affinity"))
    _put(pod, "priorityClassName", w.string(spec.get("priorityClassName"), "spec.priorityClassName",
                                            pattern=_OBJECT_NAME, message=BAD_NAME))  # fmt: skip
    restart = w.string(spec.get("restartPolicy"), "spec.restartPolicy")
    if restart is not None and restart not in ("Never", "OnFailure"):
        # Always would restart a finished pod for ever: a job's pod must be able to finish.
        w.add("spec.restartPolicy", NOT_ONE_OF.format(choices="Never, OnFailure"))
        restart = None
    _put(pod, "restartPolicy", restart)
    _put(pod, "terminationGracePeriodSeconds", w.integer(
        spec.get("terminationGracePeriodSeconds"), "spec.terminationGracePeriodSeconds", 0, 3600))  # fmt: skip
    out["spec"] = pod

    if containers:
        first = containers[0]
        summary.image = first.get("image", "")
        summary.command = [*first.get("command", []), *first.get("args", [])]
        summary.env = {e["name"]: e["value"] for e in first.get("env", []) if "value" in e}
    summary.node_selector = selector or {}
    summary.tolerations = spec.get("tolerations")
    # Kept as given for job_submit, which moves them to the task's own field.
    _put(pod, "tolerations", summary.tolerations)
    _sum_resources(w, summary, containers, init)
    return ParsedTemplate(out, summary, w.errors)


def _containers(
    w: _Walk, raw: Any, path: str, declared: set[str], names: set[str]
) -> list[dict[str, Any]]:
    result = []
    for index, item in enumerate(w.items(raw, path, CONTAINERS_MAX, "containers")):
        cpath = f"{path}[{index}]"
        spec = w.mapping(
            item,
            cpath,
            (
                "name", "image", "command", "args", "workingDir", "env", "envFrom", "ports",
                "resources", "volumeMounts", "imagePullPolicy", "securityContext",
            ),
        )  # fmt: skip
        if spec is None:
            continue
        container: dict[str, Any] = {}
        # Kubernetes requires a name; manifests written for the portal's earlier shape often
        # have none, so a missing name defaults to "main" (the first app container), else
        # "container-<i>" or "init-<i>".
        is_app = path.endswith(".containers")
        default = (
            "main" if is_app and index == 0 else f"{'container' if is_app else 'init'}-{index}"
        )
        name = w.string(spec.get("name", default), f"{cpath}.name", required=True,
                        pattern=_DNS_LABEL, message=BAD_DNS_LABEL)  # fmt: skip
        if name is not None:
            if name in names:
                w.add(f"{cpath}.name", DUPLICATE_NAME.format(name=name))
            names.add(name)
            container["name"] = name
        image = w.string(spec.get("image"), f"{cpath}.image", required=True, max_chars=500)
        if image is not None and (refusal := image_error(image)) is not None:
            w.add(f"{cpath}.image", refusal)
            image = None
        _put(container, "image", image)
        _put(container, "command", w.string_list(spec.get("command"), f"{cpath}.command"))
        _put(container, "args", w.string_list(spec.get("args"), f"{cpath}.args"))
        _put(container, "workingDir", w.string(spec.get("workingDir"), f"{cpath}.workingDir"))
        env = _env(w, spec.get("env"), f"{cpath}.env")
        _put(container, "env", env or None)
        env_from = _env_from(w, spec.get("envFrom"), f"{cpath}.envFrom")
        _put(container, "envFrom", env_from or None)
        ports = _ports(w, spec.get("ports"), f"{cpath}.ports")
        _put(container, "ports", ports or None)
        resources = _resources(w, spec.get("resources"), f"{cpath}.resources")
        _put(container, "resources", resources or None)
        mounts = _mounts(w, spec.get("volumeMounts"), f"{cpath}.volumeMounts", declared)
        _put(container, "volumeMounts", mounts or None)
        policy = w.string(spec.get("imagePullPolicy"), f"{cpath}.imagePullPolicy")
        if policy is not None and policy not in ("Always", "IfNotPresent", "Never"):
            w.add(
                f"{cpath}.imagePullPolicy", NOT_ONE_OF.format(choices="Always, IfNotPresent, Never")
            )
            policy = None
        _put(container, "imagePullPolicy", policy)
        _put(container, "securityContext",
             _container_security(w, spec.get("securityContext"), f"{cpath}.securityContext"))  # fmt: skip
        result.append(container)
    return result


def _env(w: _Walk, raw: Any, path: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    seen: set[str] = set()
    # The count and size bounds are tunable limits (jobspec.limits), checked with the
    # rest of the task; this bound only keeps the walk itself cheap.
    for index, item in enumerate(w.items(raw, path, 4096, "environment variables")):
        ipath = f"{path}[{index}]"
        spec = w.mapping(item, ipath, ("name", "value", "valueFrom"))
        if spec is None:
            continue
        name = w.string(spec.get("name"), f"{ipath}.name", required=True, max_chars=NAME_MAX)
        if name is not None and (refusal := env_name_error(name)) is not None:
            w.add(f"{ipath}.name", refusal)
            name = None
        if name is not None and name in seen:
            w.add(f"{ipath}.name", f"environment variable {name} is set twice")
        has_value, has_from = "value" in spec, spec.get("valueFrom") is not None
        if has_value and has_from:
            w.add(ipath, ENV_NOT_ONE_SOURCE)
            continue
        entry: dict[str, Any] = {"name": name}
        if has_from:
            source = _value_from(w, spec["valueFrom"], f"{ipath}.valueFrom")
            if source is None:
                continue
            entry["valueFrom"] = source
        else:
            value = spec.get("value", "")
            if isinstance(value, bool) or value is None or isinstance(value, dict | list):
                w.add(f"{ipath}.value", NOT_A_STRING)
                continue
            if isinstance(value, float) and not math.isfinite(value):
                w.add(f"{ipath}.value", NOT_A_STRING)
                continue
            entry["value"] = str(value)
        if name is not None:
            seen.add(name)
            result.append(entry)
    return result


def _key_ref(w: _Walk, raw: Any, path: str) -> dict[str, Any] | None:
    if isinstance(raw, dict) and "namespace" in raw:
        w.add(f"{path}.namespace", OTHER_NAMESPACE)
        return None
    spec = w.mapping(raw, path, ("name", "key", "optional"))
    if spec is None:
        return None
    ref: dict[str, Any] = {}
    _put(ref, "name", w.string(spec.get("name"), f"{path}.name", required=True,
                               pattern=_OBJECT_NAME, message=BAD_NAME))  # fmt: skip
    _put(ref, "key", w.string(spec.get("key"), f"{path}.key", required=True, max_chars=NAME_MAX))
    _put(ref, "optional", w.boolean(spec.get("optional"), f"{path}.optional"))
    return ref if "name" in ref and "key" in ref else None


def _value_from(w: _Walk, raw: Any, path: str) -> dict[str, Any] | None:
    spec = w.mapping(raw, path, ("secretKeyRef", "configMapKeyRef", "fieldRef", "resourceFieldRef"))
    if spec is None:
        return None
    given = [key for key, value in spec.items() if value is not None]
    if len(given) != 1:
        w.add(path, VALUE_FROM_NOT_ONE)
        return None
    kind = given[0]
    kpath = f"{path}.{kind}"
    if kind in ("secretKeyRef", "configMapKeyRef"):
        ref = _key_ref(w, spec[kind], kpath)
        return {kind: ref} if ref is not None else None
    if kind == "fieldRef":
        ref_spec = w.mapping(spec[kind], kpath, ("fieldPath", "apiVersion"))
        if ref_spec is None:
            return None
        field_path = w.string(ref_spec.get("fieldPath"), f"{kpath}.fieldPath", required=True)
        if field_path is None:
            return None
        # The fields the downward API can show (labels and annotations by key too); anything
        # else would fail at pod creation, after the job was accepted.
        if field_path not in _FIELD_PATHS and not re.fullmatch(
            r"metadata\.(labels|annotations)\['[^']{1,317}'\]", field_path
        ):
            w.add(f"{kpath}.fieldPath", NOT_ONE_OF.format(choices=", ".join(_FIELD_PATHS)))
            return None
        return {kind: {"fieldPath": field_path}}
    ref_spec = w.mapping(spec[kind], kpath, ("resource", "containerName", "divisor"))
    if ref_spec is None:
        return None
    ref: dict[str, Any] = {}
    resource = w.string(ref_spec.get("resource"), f"{kpath}.resource", required=True)
    if resource is None:
        return None
    ref["resource"] = resource
    _put(ref, "containerName", w.string(ref_spec.get("containerName"), f"{kpath}.containerName"))
    if ref_spec.get("divisor") is not None:
        try:
            parse_quantity(ref_spec["divisor"])
            ref["divisor"] = str(ref_spec["divisor"])
        except ValueError as error:
            w.add(f"{kpath}.divisor", str(error))
    return {kind: ref}


def _env_from(w: _Walk, raw: Any, path: str) -> list[dict[str, Any]]:
    result = []
    for index, item in enumerate(w.items(raw, path, ENV_FROM_MAX, "envFrom sources")):
        ipath = f"{path}[{index}]"
        spec = w.mapping(item, ipath, ("configMapRef", "secretRef", "prefix"))
        if spec is None:
            continue
        refs = [key for key in ("configMapRef", "secretRef") if spec.get(key) is not None]
        if len(refs) != 1:
            w.add(ipath, "give exactly one of configMapRef or secretRef")
            continue
        kind = refs[0]
        kpath = f"{ipath}.{kind}"
        if isinstance(spec[kind], dict) and "namespace" in spec[kind]:
            w.add(f"{kpath}.namespace", OTHER_NAMESPACE)
            continue
        ref_spec = w.mapping(spec[kind], kpath, ("name", "optional"))
        if ref_spec is None:
            continue
        name = w.string(ref_spec.get("name"), f"{kpath}.name", required=True,
                        pattern=_OBJECT_NAME, message=BAD_NAME)  # fmt: skip
        if name is None:
            continue
        ref: dict[str, Any] = {"name": name}
        _put(ref, "optional", w.boolean(ref_spec.get("optional"), f"{kpath}.optional"))
        entry: dict[str, Any] = {kind: ref}
        env_prefix = w.string(spec.get("prefix"), f"{ipath}.prefix", max_chars=NAME_MAX)
        if env_prefix and (refusal := env_name_error(env_prefix)) is not None:
            w.add(f"{ipath}.prefix", refusal)
            continue
        _put(entry, "prefix", env_prefix)
        result.append(entry)
    return result


def _ports(w: _Walk, raw: Any, path: str) -> list[dict[str, Any]]:
    result = []
    for index, item in enumerate(w.items(raw, path, PORTS_MAX, "ports")):
        ipath = f"{path}[{index}]"
        spec = w.mapping(item, ipath, ("name", "containerPort", "protocol"))
        if spec is None:
            continue
        port: dict[str, Any] = {}
        _put(port, "name", w.string(spec.get("name"), f"{ipath}.name",
                                    pattern=re.compile(r"[a-z0-9]([-a-z0-9]{0,13}[a-z0-9])?"),
                                    message="must be a port name (at most 15 characters)"))  # fmt: skip
        number = w.integer(spec.get("containerPort"), f"{ipath}.containerPort", 1, 65535)
        if number is None:
            if spec.get("containerPort") is None:
                w.add(f"{ipath}.containerPort", REQUIRED)
            continue
        port["containerPort"] = number
        protocol = w.string(spec.get("protocol"), f"{ipath}.protocol")
        if protocol is not None and protocol not in ("TCP", "UDP", "SCTP"):
            w.add(f"{ipath}.protocol", NOT_ONE_OF.format(choices="TCP, UDP, SCTP"))
        elif protocol is not None:
            port["protocol"] = protocol
        result.append(port)
    return result


def _resources(w: _Walk, raw: Any, path: str) -> dict[str, dict[str, str]]:
    spec = w.mapping(raw, path, ("limits", "requests")) if raw is not None else None
    if spec is None:
        return {}
    result: dict[str, dict[str, str]] = {}
    for section in ("limits", "requests"):
        spath = f"{path}.{section}"
        if spec.get(section) is None:
            continue
        if not isinstance(spec[section], dict):
            w.add(spath, NOT_A_MAPPING)
            continue
        values: dict[str, str] = {}
        for key, value in spec[section].items():
            kpath = f"{spath}.{key}"
            if not isinstance(key, str) or not (
                key in _NATIVE or is_gpu_count_name(key) or key in SHARE_NAMES
            ):
                w.add(kpath, UNKNOWN_RESOURCE)
                continue
            try:
                number = parse_quantity(value)
            except ValueError as error:
                w.add(kpath, str(error))
                continue
            if is_gpu_count_name(key) and number != number.to_integral_value():
                w.add(kpath, GPU_NOT_WHOLE)
                continue
            if key in SHARE_NAMES and key not in GPU_MEMORY_NAMES and number > 100:
                w.add(kpath, PERCENT_ABOVE_100)
                continue
            values[key] = value if isinstance(value, str) else _plain(number)
        if values:
            result[section] = values
    return result


def _plain(number: Decimal) -> str:
    return format(number.normalize(), "f")


def _mounts(w: _Walk, raw: Any, path: str, declared: set[str]) -> list[dict[str, Any]]:
    result = []
    paths: set[str] = set()
    for index, item in enumerate(w.items(raw, path, MOUNTS_MAX, "volume mounts")):
        ipath = f"{path}[{index}]"
        spec = w.mapping(item, ipath, ("name", "mountPath", "readOnly", "subPath"))
        if spec is None:
            continue
        name = w.string(spec.get("name"), f"{ipath}.name", required=True, max_chars=63)
        if name is not None and name not in declared:
            w.add(f"{ipath}.name", UNDECLARED_VOLUME.format(name=name))
            name = None
        mount_path = w.string(spec.get("mountPath"), f"{ipath}.mountPath", required=True)
        if mount_path is not None and not mount_path.startswith("/"):
            w.add(f"{ipath}.mountPath", NOT_ABSOLUTE)
            mount_path = None
        if mount_path is not None and mount_path in paths:
            w.add(f"{ipath}.mountPath", DUPLICATE_MOUNT_PATH.format(path=mount_path))
        if name is None or mount_path is None:
            continue
        paths.add(mount_path)
        mount: dict[str, Any] = {"name": name, "mountPath": mount_path}
        _put(mount, "readOnly", w.boolean(spec.get("readOnly"), f"{ipath}.readOnly"))
        sub = w.string(spec.get("subPath"), f"{ipath}.subPath")
        if sub is not None and (sub.startswith("/") or ".." in sub.split("/")):
            w.add(f"{ipath}.subPath", "must be a relative path without '..'")
        elif sub:
            mount["subPath"] = sub
        result.append(mount)
    return result


_VOLUME_SOURCES = ("persistentVolumeClaim", "emptyDir", "configMap", "secret", "hostPath")


def _volumes(w: _Walk, raw: Any, path: str, *, allow_host_path: bool) -> list[dict[str, Any]]:
    result = []
    names: set[str] = set()
    for index, item in enumerate(w.items(raw, path, VOLUMES_MAX, "volumes")):
        vpath = f"{path}[{index}]"
        spec = w.mapping(item, vpath, ("name", *_VOLUME_SOURCES))
        if spec is None:
            continue
        name = w.string(spec.get("name"), f"{vpath}.name", required=True, pattern=_DNS_LABEL,
                        message=BAD_DNS_LABEL)  # fmt: skip
        if name is not None and name in names:
            w.add(f"{vpath}.name", DUPLICATE_NAME.format(name=name))
            name = None
        sources = [key for key in _VOLUME_SOURCES if key in spec]
        if len(sources) != 1:
            w.add(vpath, VOLUME_NOT_ONE_SOURCE)
            continue
        kind = sources[0]
        source = _volume_source(w, kind, spec[kind], f"{vpath}.{kind}", allow_host_path)
        if name is None or source is None:
            continue
        names.add(name)
        result.append({"name": name, kind: source})
    return result


def _volume_source(
    w: _Walk, kind: str, raw: Any, path: str, allow_host_path: bool
) -> dict[str, Any] | None:
    if kind == "hostPath" and not allow_host_path:
        w.add(path, HOST_PATH_NOT_ALLOWED)
        return None
    if kind == "emptyDir" and raw is None:
        raw = {}
    read, allowed = _VOLUME_READERS[kind]
    spec = w.mapping(raw, path, allowed)
    if spec is None:
        return None
    errors_before = len(w.errors)
    out = read(w, spec, path)
    if len(w.errors) != errors_before:
        return None
    return out


def _claim(w: _Walk, spec: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["claimName"] = w.string(spec.get("claimName"), f"{path}.claimName", required=True,
                                pattern=_OBJECT_NAME, message=BAD_NAME)  # fmt: skip
    _put(out, "readOnly", w.boolean(spec.get("readOnly"), f"{path}.readOnly"))
    return out


def _empty_dir(w: _Walk, spec: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    medium = w.string(spec.get("medium"), f"{path}.medium")
    if medium not in (None, "", "Memory"):
        w.add(f"{path}.medium", NOT_ONE_OF.format(choices='"" (node disk), Memory'))
    elif medium:
        out["medium"] = medium
    if spec.get("sizeLimit") is not None:
        try:
            parse_quantity(spec["sizeLimit"])
            out["sizeLimit"] = str(spec["sizeLimit"])
        except ValueError as error:
            w.add(f"{path}.sizeLimit", str(error))
    return out


def _projection(key: str) -> Any:
    """A configMap (`name`) or secret (`secretName`) volume source reader."""

    def read(w: _Walk, spec: dict[str, Any], path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out[key] = w.string(spec.get(key), f"{path}.{key}", required=True, pattern=_OBJECT_NAME,
                            message=BAD_NAME)  # fmt: skip
        _put(
            out, "defaultMode", w.integer(spec.get("defaultMode"), f"{path}.defaultMode", 0, 0o777)
        )
        _put(out, "optional", w.boolean(spec.get("optional"), f"{path}.optional"))
        items = []
        for index, item in enumerate(w.items(spec.get("items"), f"{path}.items", 256, "items")):
            ipath = f"{path}.items[{index}]"
            entry = w.mapping(item, ipath, ("key", "path", "mode"))
            if entry is None:
                continue
            projected: dict[str, Any] = {}
            _put(projected, "key", w.string(entry.get("key"), f"{ipath}.key", required=True))
            item_path = w.string(entry.get("path"), f"{ipath}.path", required=True)
            if item_path is not None and (
                item_path.startswith("/") or ".." in item_path.split("/")
            ):
                w.add(f"{ipath}.path", "must be a relative path without '..'")
            else:
                _put(projected, "path", item_path)
            _put(projected, "mode", w.integer(entry.get("mode"), f"{ipath}.mode", 0, 0o777))
            items.append(projected)
        _put(out, "items", items or None)
        return out

    return read


def _host_path(w: _Walk, spec: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    host = w.string(spec.get("path"), f"{path}.path", required=True)
    if host is not None and not host.startswith("/"):
        w.add(f"{path}.path", NOT_ABSOLUTE)
    out["path"] = host
    _put(out, "type", w.string(spec.get("type"), f"{path}.type"))
    return out


_VOLUME_READERS = {
    "persistentVolumeClaim": (_claim, ("claimName", "readOnly")),
    "emptyDir": (_empty_dir, ("medium", "sizeLimit")),
    "configMap": (_projection("name"), ("name", "items", "defaultMode", "optional")),
    "secret": (_projection("secretName"), ("secretName", "items", "defaultMode", "optional")),
    "hostPath": (_host_path, ("path", "type")),
}


def _pod_security(w: _Walk, raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    path = "spec.securityContext"
    spec = w.mapping(raw, path, ("runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup",
                                 "supplementalGroups", "seccompProfile", "appArmorProfile"))  # fmt: skip
    if spec is None:
        return None
    out: dict[str, Any] = {}
    for key in ("runAsUser", "runAsGroup", "fsGroup"):
        _put(out, key, w.integer(spec.get(key), f"{path}.{key}", 0, 2**31 - 1))
    _put(out, "runAsNonRoot", w.boolean(spec.get("runAsNonRoot"), f"{path}.runAsNonRoot"))
    groups = w.items(spec.get("supplementalGroups"), f"{path}.supplementalGroups", 32, "groups")
    checked = [
        w.integer(g, f"{path}.supplementalGroups[{i}]", 0, 2**31 - 1) for i, g in enumerate(groups)
    ]
    _put(out, "supplementalGroups", [g for g in checked if g is not None] or None)
    for key in ("seccompProfile", "appArmorProfile"):
        _put(out, key, _profile(w, spec.get(key), f"{path}.{key}"))
    return out or None


def _container_security(w: _Walk, raw: Any, path: str) -> dict[str, Any] | None:
    """What a container may say of its security; whether the tenant's pod security level
    allows it is jobspec.podsecurity's to say (privileged, capabilities, root, profiles)."""
    if raw is None:
        return None
    spec = w.mapping(raw, path, ("runAsUser", "runAsGroup", "runAsNonRoot",
                                 "readOnlyRootFilesystem", "allowPrivilegeEscalation",
                                 "capabilities", "privileged", "seccompProfile",
                                 "appArmorProfile"))  # fmt: skip
    if spec is None:
        return None
    out: dict[str, Any] = {}
    for key in ("runAsUser", "runAsGroup"):
        _put(out, key, w.integer(spec.get(key), f"{path}.{key}", 0, 2**31 - 1))
    for key in ("runAsNonRoot", "readOnlyRootFilesystem", "allowPrivilegeEscalation", "privileged"):
        _put(out, key, w.boolean(spec.get(key), f"{path}.{key}"))
    if spec.get("capabilities") is not None:
        caps = w.mapping(spec["capabilities"], f"{path}.capabilities", ("add", "drop"))
        if caps is not None:
            kept = {}
            for key in ("add", "drop"):
                _put(kept, key, w.string_list(caps.get(key), f"{path}.capabilities.{key}"))
            if kept:
                out["capabilities"] = kept
    for key in ("seccompProfile", "appArmorProfile"):
        _put(out, key, _profile(w, spec.get(key), f"{path}.{key}"))
    return out or None


def _profile(w: _Walk, raw: Any, path: str) -> dict[str, Any] | None:
    """A seccomp or AppArmor profile: a type, and a localhostProfile with Localhost only
    (the API server's validateSeccompProfileField / validateAppArmorProfileField)."""
    if raw is None:
        return None
    spec = w.mapping(raw, path, ("type", "localhostProfile"))
    if spec is None:
        return None
    kind = w.string(spec.get("type"), f"{path}.type", required=True)
    if kind is None:
        return None
    if kind not in PROFILE_TYPES:
        w.add(f"{path}.type", NOT_ONE_OF.format(choices=", ".join(PROFILE_TYPES)))
        return None
    local = w.string(spec.get("localhostProfile"), f"{path}.localhostProfile", max_chars=NAME_MAX)
    if (kind == "Localhost") != bool(local):
        w.add(f"{path}.localhostProfile", LOCALHOST_PROFILE_NEEDED)
        return None
    return {"type": kind, **({"localhostProfile": local} if local else {})}


def _metadata(w: _Walk, raw: Any) -> dict[str, Any] | None:
    meta = w.mapping(raw, "metadata", ("name", "labels", "annotations"))
    if meta is None:
        return None
    kept: dict[str, Any] = {}
    # metadata.name is Volcano's pod name prefix: the portal's pod names are id-based.
    _put(kept, "labels", _labels(w, meta.get("labels")))
    _put(kept, "annotations", _annotations(w, meta.get("annotations")))
    return kept or None


def _labels(w: _Walk, raw: Any) -> dict[str, str] | None:
    """The pod's labels, keys and values as Kubernetes takes them (jobspec.names)."""
    labels = w.string_map(raw, "metadata.labels")
    for key, value in (labels or {}).items():
        if refusal := label_key_error(key) or label_value_error(value):
            w.add(f"metadata.labels.{key}", refusal)
    return labels


def _annotations(w: _Walk, raw: Any) -> dict[str, str] | None:
    annotations = w.string_map(raw, "metadata.annotations")
    for key in annotations or {}:
        if (refusal := annotation_key_error(key)) is not None:
            w.add(f"metadata.annotations.{key}", refusal)
    if annotations and (refusal := annotations_size_error(annotations)) is not None:
        w.add("metadata.annotations", refusal)
    return annotations


def _sum_resources(
    w: _Walk, summary: TaskSummary, containers: list[dict], init: list[dict]
) -> None:
    """The pod's effective request, as the kubelet computes it (see the module docstring)."""
    app = [_container_amounts(w, c, f"spec.containers[{i}]") for i, c in enumerate(containers)]
    starts = [_container_amounts(w, c, f"spec.initContainers[{i}]") for i, c in enumerate(init)]
    names = {name for _, name in app + starts if name}
    sharing = [
        c.get("name", "?")
        for (amounts, _), c in zip(app + starts, containers + init)
        if amounts.get("gpu_milli") or amounts.get("gpu_memory_mib")
    ]
    if len(sharing) > 1:
        w.add("spec", GPU_SHARE_IN_TWO.format(containers=", ".join(sharing)))
    if len(names) > 1:
        w.add("spec", GPU_TWO_NAMES.format(names=", ".join(sorted(names))))
    summary.gpu_resource = min(names) if names else None
    for key in ("gpus", "gpu_milli", "gpu_memory_mib", "cpu_millis", "memory_bytes"):
        stated = [amounts[key] for amounts, _ in app + starts if key in amounts]
        if not stated and key not in ("gpus", "gpu_milli", "gpu_memory_mib"):
            setattr(summary, key, None)  # no container says: the portal's default applies
            continue
        total = sum(amounts.get(key, 0) for amounts, _ in app)
        largest_init = max((amounts.get(key, 0) for amounts, _ in starts), default=0)
        setattr(summary, key, max(total, largest_init))


def _container_amounts(w: _Walk, container: dict, path: str) -> tuple[dict[str, int], str | None]:
    """(gpus, cpu_millis, memory_bytes) a container asks for: its requests, or its limits where
    it gives none (Kubernetes defaults a missing request to the limit)."""
    resources = container.get("resources", {})
    limits, requests = resources.get("limits", {}), resources.get("requests", {})
    gpu_names = sorted({key for key in (*limits, *requests) if is_gpu_count_name(key)})
    if len(gpu_names) > 1:
        w.add(f"{path}.resources", GPU_TWO_NAMES.format(names=", ".join(gpu_names)))
    amounts = {"gpus": 0}
    if gpu_names:
        name = gpu_names[0]
        limit, request = limits.get(name), requests.get(name)
        if (
            limit is not None
            and request is not None
            and parse_quantity(limit) != parse_quantity(request)
        ):
            w.add(
                f"{path}.resources.requests",
                GPU_REQUEST_MISMATCH.format(request=request, limit=limit),
            )
        amounts["gpus"] = int(parse_quantity(limit if limit is not None else request))
    shares = {
        name: parse_quantity(limits.get(name, requests.get(name)))
        for name in SHARE_NAMES
        if name in limits or name in requests
    }
    (amounts["gpus"], amounts["gpu_milli"], amounts["gpu_memory_mib"]), refusal = (
        share_from_resources(amounts["gpus"], shares)
    )
    if refusal:
        w.add(f"{path}.resources.limits", refusal)
    for key, resource, scale in (("cpu_millis", "cpu", 1000), ("memory_bytes", "memory", 1)):
        value = requests.get(resource, limits.get(resource))
        if value is not None:
            amounts[key] = math.ceil(parse_quantity(value) * scale)
    return amounts, gpu_names[0] if gpu_names else None
