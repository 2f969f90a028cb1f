"""Map a Volcano `batch.volcano.sh/v1alpha1` Job manifest onto a job submission.

Pure functions: a parsed manifest (dict) in, a `VolcanoJobSpec` out, or a `ManifestError`
whose `errors` are keyed by the manifest path at fault, e.g.
`spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu`.
No Django, no I/O: the API resolves the queue and calls the `job_submit` service.

What is mapped:
- metadata.name -> job name; annotation `priority` (an integer) -> job priority;
  annotation `gpuq/expected-duration-seconds` -> expected duration.
- spec.queue (required), spec.minAvailable, plugins, policies, maxRetry,
  ttlSecondsAfterFinished; spec.priorityClassName, schedulerName, ... are ignored (the
  portal's scheduler decides).
- spec.tasks[i].name, .replicas, and .template, the pod template, whole: `job_submit` checks
  it (jobspec.podtemplate: several containers, init containers, volumes, env valueFrom,
  ...) and sums its resources the way the kubelet does; `.template.spec.tolerations` become
  the task's tolerations (JobTask.tolerations checks them).

Shape only: how large a number may be (GPUs per pod, replicas, priority, ...) is the
`job_submit` service's to say (jobspec.limits), with the same message as every other way a
job comes in; its error paths are translated back to manifest paths by `manifest_path`.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .job_plugins import plugins_parse
from .names import STR_NUL, nul_paths  # noqa: F401 (STR_NUL re-exported)
from .podtemplate import pod_template_parse
from .policies import policies_parse
from .quantity import BAD_QUANTITY, NEGATIVE_QUANTITY, parse_quantity  # noqa: F401 (re-exported)

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

# Where the service's field paths come from in a manifest (for error messages).
_JOB_FIELD_PATHS = {
    "name": "metadata.name",
    "queue": "spec.queue",
    "min_available": "spec.minAvailable",
    "priority": f"metadata.annotations.{PRIORITY_ANNOTATION}",
    "expected_duration_seconds": f"metadata.annotations.{DURATION_ANNOTATION}",
    "tasks": "spec.tasks",
    "max_retry": "spec.maxRetry",
    "ttl_seconds_after_finished": "spec.ttlSecondsAfterFinished",
}
_TASK_FIELD_PATHS = {
    "name": "name",
    "replicas": "replicas",
    "image": "template.spec.containers[0].image",
    "command": "template.spec.containers[0].command",
    "env": "template.spec.containers[0].env",
    "gpus": "template.spec.containers[0].resources.limits",
    "gpu_milli": "template.spec.containers[0].resources.limits",
    "gpu_memory_mib": "template.spec.containers[0].resources.limits",
    "cpu_millis": "template.spec.containers[0].resources.requests.cpu",
    "memory_bytes": "template.spec.containers[0].resources.requests.memory",
    "node_selector": "template.spec.nodeSelector",
    "tolerations": "template.spec.tolerations",
    "pod_template": "template",
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
    plugins: Any = None  # spec.plugins as given; job_submit checks it (jobspec.job_plugins)
    policies: Any = None  # spec.policies as given (jobspec.policies)
    max_retry: Any = None  # spec.maxRetry as given
    ttl_seconds_after_finished: Any = None  # spec.ttlSecondsAfterFinished as given

    def job_fields(self) -> dict[str, Any]:
        """The keyword arguments of `job_submit` / `job_build` this manifest gives (all but the
        queue, which the caller resolves, and the submitter)."""
        return {
            "name": self.name,
            "tasks": self.tasks,
            "priority": self.priority,
            "min_available": self.min_available,
            "expected_duration_seconds": self.expected_duration_seconds,
            "plugins": self.plugins,
            "policies": self.policies,
            "max_retry": self.max_retry,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
        }


_MAPPED_SPEC_KEYS = (
    "queue", "minAvailable", "tasks", "plugins", "policies", "maxRetry", "ttlSecondsAfterFinished"
)  # fmt: skip


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
    for job_field in ("plugins", "policies"):
        if service_path == job_field or service_path.startswith((f"{job_field}.", f"{job_field}[")):
            return f"spec.{service_path}"
    return _JOB_FIELD_PATHS.get(service_path, service_path)


def manifest_errors(errors: dict[str, list[str]]) -> dict[str, list[str]]:
    """`job_submit`'s errors keyed by the manifest's paths; two service paths may name one
    manifest field (a task's tolerations, stated in its template), their messages joined."""
    paths: dict[str, list[str]] = {}
    for key, messages in errors.items():
        paths.setdefault(manifest_path(key), []).extend(messages)
    return paths


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
    data: Any,
    *,
    too_many_tasks: Callable[[int], str | None] = lambda count: None,
    allow_host_path: bool = False,
) -> VolcanoJobSpec:
    """Map a parsed Volcano Job manifest; raise ManifestError naming every path at fault.

    `too_many_tasks(count)` refuses a task count (jobspec.limits.task_count_error) before
    any task is mapped, so a manifest of thousands of tasks costs nothing more.
    `allow_host_path`: the JOB_ALLOW_HOST_PATH setting (hostPath volumes)."""
    c = _Collector()
    if not isinstance(data, dict):
        raise ManifestError({"body": ["a Volcano Job manifest must be a mapping"]})
    for path in nul_paths(data):
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
            c.integer(
                annotations[PRIORITY_ANNOTATION], f"metadata.annotations.{PRIORITY_ANNOTATION}"
            )
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
    ignored = sorted(key for key in spec if key not in _MAPPED_SPEC_KEYS and isinstance(key, str))
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
            task = _task_parse(c, raw_task, f"spec.tasks[{index}]", allow_host_path=allow_host_path)
            if task is not None:
                tasks.append(task)
            if isinstance(raw_task, dict):
                # A task's policies, minAvailable, dependsOn, ...: named back like the job's.
                ignored += [
                    f"tasks[{index}].{key}"
                    for key in raw_task
                    if key not in ("name", "replicas", "template", "policies")
                    and isinstance(key, str)
                    and _FIELD_NAME_RE.fullmatch(key)
                ]

    # Plugins and policies are job_submit's to check too; checked here as well so that one
    # answer names every field at fault, the template's and these alike.
    _, plugin_errors = plugins_parse(
        spec.get("plugins"), task_names=[task["name"] for task in tasks], path="spec.plugins"
    )
    _, policy_errors = policies_parse(spec.get("policies"), path="spec.policies")
    for key, messages in (plugin_errors | policy_errors).items():
        for message in messages:
            c.add(key, message)
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
        plugins=spec.get("plugins"),
        policies=spec.get("policies"),
        max_retry=spec.get("maxRetry"),
        ttl_seconds_after_finished=spec.get("ttlSecondsAfterFinished"),
    )


def _task_parse(
    c: _Collector, raw: Any, path: str, *, allow_host_path: bool
) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        c.add(path, NOT_A_MAPPING)
        return None
    name = c.string(raw.get("name"), f"{path}.name", required=True)
    replicas: int | None = 1
    if raw.get("replicas") is not None:
        replicas = c.integer(raw["replicas"], f"{path}.replicas")
    template = c.mapping(raw.get("template"), f"{path}.template", required=True)
    if not template:
        return None
    # The same check job_submit makes of a template given through the API, here so that a
    # manifest's every fault is named by its manifest path before anything else is looked at.
    parsed = pod_template_parse(
        template, allow_host_path=allow_host_path, prefix=f"{path}.template."
    )
    for key, messages in parsed.errors.items():
        for message in messages:
            c.add(key, message)
    task = {"name": name or "", "replicas": replicas, "pod_template": parsed.template}
    if raw.get("policies") is not None:
        task["policies"] = raw["policies"]  # checked by job_submit (jobspec.policies)
    return task
