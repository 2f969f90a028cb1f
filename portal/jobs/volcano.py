"""Map a Volcano `batch.volcano.sh/v1alpha1` Job manifest onto a job submission.

Pure functions: a parsed manifest (dict) in, a `VolcanoJobSpec` out, or a `ManifestError`
whose `errors` are keyed by the manifest path at fault, e.g.
`spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu`.
No Django, no I/O: the API resolves the queue and calls the `job_submit` service.

What is mapped:
- metadata.name -> job name; annotation `priority` (an integer) -> job priority;
  annotation `gpuq/expected-duration-seconds` -> expected duration.
- spec.queue (required), spec.minAvailable; spec.priorityClassName, schedulerName,
  policies, plugins, maxRetry, ... are ignored (the portal's scheduler decides).
- spec.tasks[i].name, .replicas, .template.spec.nodeSelector, .template.spec.tolerations
  (validated by the task's field, like every other way in); containers[0] gives image,
  command (+ args) and env (name/value pairs); resources are summed over all containers:
  cpu ("4", "500m", 0.5), memory ("16Gi", "512M", 1e9) and GPUs under any `*/gpu` name
  (limits first, as Kubernetes requires GPUs in limits; requests must match if both).

Shape only: how large a number may be (GPUs per pod, replicas, priority, ...) is the
`job_submit` service's to say (portal.jobs.limits), with the same message as every other way a
job comes in; its error paths are translated back to manifest paths by `manifest_path`.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from portal.common.validators import STR_NUL

API_VERSION = "batch.volcano.sh/v1alpha1"
KIND = "Job"
PRIORITY_ANNOTATION = "priority"
DURATION_ANNOTATION = "gpuq/expected-duration-seconds"

REQUIRED = "this field is required"
NOT_A_MAPPING = "must be a mapping"
NOT_A_LIST = "must be a list"
NOT_A_STRING = "must be a string"
NOT_A_STRING_LIST = "must be a list of strings"
NOT_AN_INTEGER = "must be an integer"
WRONG_API_VERSION = f"must be {API_VERSION}"
WRONG_KIND = f"must be {KIND}"
EMPTY_TASKS = "a job needs at least one task"
NO_CONTAINERS = "a task needs at least one container"
BAD_QUANTITY = 'not a Kubernetes quantity (examples: "4", "500m", "16Gi")'
NEGATIVE_QUANTITY = "must not be negative"
GPU_NOT_WHOLE = "GPUs must be a whole number"
GPU_TWO_NAMES = "only one GPU resource name per container (found {names})"
GPU_REQUEST_MISMATCH = "GPU request ({request}) differs from the limit ({limit})"
ENV_VALUE_FROM = "valueFrom is not supported; give a literal value"
DUPLICATE_ENV = "environment variable {name} is set twice"
# Ignored spec fields are named back in a response header: only plain names can be.
NOT_A_FIELD_NAME = (
    "unknown field {key!r} is not a field name (letters, digits, '_', '.', '-'; at most 63)"
)
_FIELD_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,63}")

_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_SUFFIXES = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}

# Where the service's field paths come from in a manifest (for error messages).
_JOB_FIELD_PATHS = {
    "name": "metadata.name",
    "queue": "spec.queue",
    "min_available": "spec.minAvailable",
    "priority": f"metadata.annotations.{PRIORITY_ANNOTATION}",
    "expected_duration_seconds": f"metadata.annotations.{DURATION_ANNOTATION}",
    "tasks": "spec.tasks",
}
_TASK_FIELD_PATHS = {
    "name": "name",
    "replicas": "replicas",
    "image": "template.spec.containers[0].image",
    "command": "template.spec.containers[0].command",
    "env": "template.spec.containers[0].env",
    "gpus": "template.spec.containers[0].resources.limits",
    "cpu_millis": "template.spec.containers[0].resources.requests.cpu",
    "memory_bytes": "template.spec.containers[0].resources.requests.memory",
    "node_selector": "template.spec.nodeSelector",
    "tolerations": "template.spec.tolerations",
}
_TASK_PATH_RE = re.compile(r"^tasks\[(\d+)\](?:\.(\w+))?(.*)$")


class ManifestError(ValueError):
    """The manifest cannot be mapped; `errors` maps manifest paths to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path}: {', '.join(msgs)}" for path, msgs in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class VolcanoJobSpec:
    """What `job_submit` needs, plus the queue *name* (the caller resolves it)."""

    name: str
    queue: str
    tasks: list[dict[str, Any]]
    min_available: int | None = None
    priority: int = 0
    expected_duration_seconds: int | None = None
    ignored: list[str] = field(default_factory=list)


def is_volcano_manifest(data: Any) -> bool:
    return isinstance(data, dict) and ("apiVersion" in data or "kind" in data)


def manifest_path(service_path: str) -> str:
    """Translate a `job_submit` error path (`tasks[1].gpus`) into the manifest's path."""
    match = _TASK_PATH_RE.match(service_path)
    if match:
        index, task_field, rest = match.groups()
        base = f"spec.tasks[{index}]"
        if task_field is None:
            return base + rest
        return f"{base}.{_TASK_FIELD_PATHS.get(task_field, task_field)}{rest}"
    return _JOB_FIELD_PATHS.get(service_path, service_path)


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity as a Decimal; ValueError with a message otherwise."""
    if isinstance(value, bool):
        raise ValueError(BAD_QUANTITY)
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(BAD_QUANTITY)
        number = Decimal(repr(value))
    elif isinstance(value, str) and len(value) <= 64:
        match = _QUANTITY_RE.match(value.strip())
        if not match:
            raise ValueError(BAD_QUANTITY)
        try:
            base = Decimal(match.group(1))
        except InvalidOperation as error:
            raise ValueError(BAD_QUANTITY) from error
        if abs(base.adjusted()) > 30:
            raise ValueError(BAD_QUANTITY)
        number = base * _SUFFIXES[match.group(2)]
    else:
        raise ValueError(BAD_QUANTITY)
    if not number.is_finite():
        raise ValueError(BAD_QUANTITY)
    if number < 0:
        raise ValueError(NEGATIVE_QUANTITY)
    return number


class _Collector:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        self.errors.setdefault(path, []).append(message)

    def mapping(self, value: Any, path: str, *, required: bool = False) -> dict[str, Any]:
        if value is None:
            if required:
                self.add(path, REQUIRED)
            return {}
        if not isinstance(value, dict):
            self.add(path, NOT_A_MAPPING)
            return {}
        return value

    def string(self, value: Any, path: str, *, required: bool = False) -> str | None:
        if value is None:
            if required:
                self.add(path, REQUIRED)
            return None
        if not isinstance(value, str):
            self.add(path, NOT_A_STRING)
            return None
        return value

    def integer(self, value: Any, path: str) -> int | None:
        """An int, or a string of digits (annotations are strings)."""
        if isinstance(value, str) and re.fullmatch(r"[+-]?\d{1,19}", value.strip()):
            value = int(value.strip())
        if isinstance(value, bool) or not isinstance(value, int):
            self.add(path, NOT_AN_INTEGER)
            return None
        return value

    def string_list(self, value: Any, path: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            self.add(path, NOT_A_STRING_LIST)
            return []
        return value

    def string_dict(self, value: Any, path: str) -> dict[str, str]:
        result: dict[str, str] = {}
        for key, item in self.mapping(value, path).items():
            if not isinstance(key, str):
                self.add(path, NOT_A_MAPPING)
                continue
            if isinstance(item, bool) or item is None or isinstance(item, dict | list):
                self.add(f"{path}.{key}", NOT_A_STRING)
                continue
            result[key] = str(item)
        return result


def volcano_job_parse(  # noqa: C901, PLR0912 - one branch per field of a Volcano Job, in the manifest's order
    data: Any, *, too_many_tasks: Callable[[int], str | None] = lambda count: None
) -> VolcanoJobSpec:
    """Map a parsed Volcano Job manifest; raise ManifestError naming every path at fault.

    `too_many_tasks(count)` refuses a task count (portal.jobs.limits.task_count_error) before
    any task is mapped, so a manifest of thousands of tasks costs nothing more."""
    c = _Collector()
    if not isinstance(data, dict):
        raise ManifestError({"body": ["a Volcano Job manifest must be a mapping"]})
    for path in _nul_paths(data):
        c.add(path, STR_NUL)
    if data.get("apiVersion") != API_VERSION:
        c.add("apiVersion", WRONG_API_VERSION)
    if data.get("kind") != KIND:
        c.add("kind", WRONG_KIND)

    metadata = c.mapping(data.get("metadata"), "metadata", required=True)
    name = c.string(metadata.get("name"), "metadata.name", required=True) or ""
    annotations = c.mapping(metadata.get("annotations"), "metadata.annotations")
    priority = 0
    if PRIORITY_ANNOTATION in annotations:
        priority = (
            c.integer(annotations[PRIORITY_ANNOTATION], f"metadata.annotations.{PRIORITY_ANNOTATION}")
            or 0
        )
    duration = None
    if DURATION_ANNOTATION in annotations:
        duration = c.integer(
            annotations[DURATION_ANNOTATION], f"metadata.annotations.{DURATION_ANNOTATION}"
        )

    spec = c.mapping(data.get("spec"), "spec", required=True)
    queue = c.string(spec.get("queue"), "spec.queue", required=True) or ""
    min_available = None
    if spec.get("minAvailable") is not None:
        min_available = c.integer(spec["minAvailable"], "spec.minAvailable")
    ignored = sorted(
        key
        for key in spec
        if key not in ("queue", "minAvailable", "tasks") and isinstance(key, str)
    )
    for key in ignored:
        if not _FIELD_NAME_RE.fullmatch(key):
            c.add("spec", NOT_A_FIELD_NAME.format(key=key))

    tasks: list[dict[str, Any]] = []
    raw_tasks = spec.get("tasks")
    if raw_tasks is None:
        if spec:
            c.add("spec.tasks", REQUIRED)
    elif not isinstance(raw_tasks, list):
        c.add("spec.tasks", NOT_A_LIST)
    elif not raw_tasks:
        c.add("spec.tasks", EMPTY_TASKS)
    elif too_many := too_many_tasks(len(raw_tasks)):
        c.add("spec.tasks", too_many)
    else:
        for index, raw_task in enumerate(raw_tasks):
            task = _task_parse(c, raw_task, f"spec.tasks[{index}]")
            if task is not None:
                tasks.append(task)

    if c.errors:
        raise ManifestError(c.errors)
    return VolcanoJobSpec(
        name=name,
        queue=queue,
        tasks=tasks,
        min_available=min_available,
        priority=priority,
        expected_duration_seconds=duration,
        ignored=ignored,
    )


def _nul_paths(data: Any) -> list[str]:
    """Paths of every string (key or value) holding U+0000, which PostgreSQL cannot store.

    Iterative: an API body may be nested about as deep as the JSON parser's recursion allows.
    """
    found: list[str] = []
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                found.append(path or "body")
        elif isinstance(value, dict):
            for key, item in value.items():
                name = str(key).replace("\x00", "\\0")
                child = f"{path}.{name}" if path else name
                if isinstance(key, str) and "\x00" in key:
                    found.append(child)
                stack.append((child, item))
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return sorted(found)


def _task_parse(c: _Collector, raw: Any, path: str) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        c.add(path, NOT_A_MAPPING)
        return None
    name = c.string(raw.get("name"), f"{path}.name", required=True)
    replicas: int | None = 1
    if raw.get("replicas") is not None:
        replicas = c.integer(raw["replicas"], f"{path}.replicas")
    template = c.mapping(raw.get("template"), f"{path}.template", required=True)
    pod = c.mapping(template.get("spec"), f"{path}.template.spec", required=bool(template))
    node_selector = c.string_dict(pod.get("nodeSelector"), f"{path}.template.spec.nodeSelector")
    containers_path = f"{path}.template.spec.containers"
    containers = pod.get("containers")
    if containers is None or containers == []:
        if pod:
            c.add(containers_path, NO_CONTAINERS)
        return None
    if not isinstance(containers, list):
        c.add(containers_path, NOT_A_LIST)
        return None

    task: dict[str, Any] = {
        "name": name or "",
        "replicas": replicas,
        "node_selector": node_selector,
    }
    if pod.get("tolerations") is not None:
        task["tolerations"] = pod["tolerations"]
    # CPU and memory no container states are left out: the job gets the portal's default.
    totals = {"gpus": 0}
    for index, container in enumerate(containers):
        cpath = f"{containers_path}[{index}]"
        if not isinstance(container, dict):
            c.add(cpath, NOT_A_MAPPING)
            continue
        if index == 0:
            task["image"] = c.string(container.get("image"), f"{cpath}.image", required=True) or ""
            command = c.string_list(container.get("command"), f"{cpath}.command")
            args = c.string_list(container.get("args"), f"{cpath}.args")
            task["command"] = command + args
            task["env"] = _env_parse(c, container.get("env"), f"{cpath}.env")
        for key, amount in _resources_parse(c, container.get("resources"), f"{cpath}.resources"):
            totals[key] = totals.get(key, 0) + amount
    task.update(totals)
    return task


def _env_parse(c: _Collector, raw: Any, path: str) -> dict[str, str]:
    env: dict[str, str] = {}
    if raw is None:
        return env
    if not isinstance(raw, list):
        c.add(path, NOT_A_LIST)
        return env
    for index, item in enumerate(raw):
        ipath = f"{path}[{index}]"
        if not isinstance(item, dict):
            c.add(ipath, NOT_A_MAPPING)
            continue
        name = c.string(item.get("name"), f"{ipath}.name", required=True)
        if "valueFrom" in item:
            c.add(f"{ipath}.valueFrom", ENV_VALUE_FROM)
            continue
        value = item.get("value", "")
        if isinstance(value, bool) or value is None or isinstance(value, dict | list):
            c.add(f"{ipath}.value", NOT_A_STRING)
            continue
        if name is None:
            continue
        if name in env:
            c.add(f"{ipath}.name", DUPLICATE_ENV.format(name=name))
        env[name] = str(value)
    return env


def _resources_parse(c: _Collector, raw: Any, path: str) -> list[tuple[str, int]]:
    resources = c.mapping(raw, path)
    found: dict[str, dict[str, int]] = {}
    for section in ("limits", "requests"):
        spath = f"{path}.{section}"
        values = c.mapping(resources.get(section), spath)
        gpu_names = []
        parsed: dict[str, int] = {}
        for key, value in values.items():
            kpath = f"{spath}.{key}"
            if not isinstance(key, str):
                c.add(spath, NOT_A_MAPPING)
                continue
            try:
                number = parse_quantity(value)
            except ValueError as error:
                c.add(kpath, str(error))
                continue
            if key == "cpu":
                parsed["cpu_millis"] = math.ceil(number * 1000)
            elif key == "memory":
                parsed["memory_bytes"] = math.ceil(number)
            elif key.endswith("/gpu"):
                if number != number.to_integral_value():
                    c.add(kpath, GPU_NOT_WHOLE)
                    continue
                gpu_names.append(key)
                parsed["gpus"] = int(number)
        if len(gpu_names) > 1:
            c.add(spath, GPU_TWO_NAMES.format(names=", ".join(sorted(gpu_names))))
        found[section] = parsed
    limits, requests = found.get("limits", {}), found.get("requests", {})
    gpus = limits.get("gpus", requests.get("gpus", 0))
    if "gpus" in limits and "gpus" in requests and limits["gpus"] != requests["gpus"]:
        c.add(
            f"{path}.requests",
            GPU_REQUEST_MISMATCH.format(request=requests["gpus"], limit=limits["gpus"]),
        )
    stated = [
        (key, requests.get(key, limits.get(key)))
        for key in ("cpu_millis", "memory_bytes")
        if key in requests or key in limits
    ]
    return [("gpus", gpus), *stated]

