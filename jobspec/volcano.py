"""Map a Volcano `batch.volcano.sh/v1alpha1` Job manifest onto a job submission.

Pure functions: a parsed manifest (dict) in, a `VolcanoJobSpec` out, or a `ManifestError`
whose `errors` are keyed by the manifest path at fault, e.g.
`spec.tasks[0].template.spec.containers[0].resources.limits.nvidia.com/gpu`.
No Django, no I/O: the API resolves the queue and calls the `job_submit` service.

What is mapped (docs/api.md has the table of every field):
- metadata.name, or metadata.generateName completed by the caller with five random
  characters as the API server does (`generated_name`); annotation `priority` (an integer)
  -> job priority; annotation `gpuq/expected-duration-seconds`, else spec.runningEstimate
  -> expected duration.
- spec.queue (left out: the caller picks the submitter's default queue, where upstream's
  webhook and CRD default it to `default`: mutate/mutate_job.go patchDefaultQueue),
  spec.minAvailable (left out: the tasks' minAvailable, or replicas, summed, as
  patchDefaultMinAvailable), plugins, policies, maxRetry (0 or left out: 3, as
  patchDefaultMaxRetry), ttlSecondsAfterFinished; spec.priorityClassName goes to each task
  whose template has none (pkg/controllers/job/job_controller_util.go createJobPod :68-70).
- spec.tasks[i].name (left out: `default<i>`, as mutateSpec), .replicas, and .template, the
  pod template, whole: `job_submit` checks it (jobspec.podtemplate: several containers, init
  containers, volumes, env valueFrom, ...) and sums its resources the way the kubelet does;
  `.template.spec.tolerations` become the task's tolerations (JobTask.tolerations checks them).
- What the portal decides itself (schedulerName, the namespace, ...) is ignored and named back
  in `ignored`; what it cannot honour (spec.volumes) is refused naming the field.

Shape only: how large a number may be (GPUs per pod, replicas, priority, ...) is the
`job_submit` service's to say (jobspec.limits), with the same message as every other way a
job comes in; its error paths are translated back to manifest paths by `manifest_path`.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .job_plugins import plugins_parse
from .names import STR_NUL, nul_paths  # noqa: F401 (STR_NUL re-exported)
from .podtemplate import pod_template_parse
from .policies import duration_seconds, policies_parse
from .quantity import BAD_QUANTITY, NEGATIVE_QUANTITY, parse_quantity  # noqa: F401 (re-exported)

API_VERSION = "batch.volcano.sh/v1alpha1"
KIND = "Job"
PRIORITY_ANNOTATION = "priority"
DURATION_ANNOTATION = "gpuq/expected-duration-seconds"
# apiserver's names.SimpleNameGenerator (k8s.io/apiserver/pkg/storage/names/generate.go):
# the prefix cut to 58 characters, then 5 characters of utilrand's alphabet.
GENERATED_PREFIX_MAX = 58
GENERATED_SUFFIX_LENGTH = 5
GENERATED_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
DEFAULT_TASK_PREFIX = "default"  # batch/v1alpha1 DefaultTaskSpec: a nameless task's name + index
DOCUMENTS_MAX = 32

REQUIRED = "this field is required"
NAME_OR_GENERATE_NAME = "give metadata.name or metadata.generateName"
NOT_A_MAPPING = "must be a mapping"
NOT_A_LIST = "must be a list"
NOT_A_STRING = "must be a string"
NOT_A_STRING_LIST = "must be a list of strings"
NOT_AN_INTEGER = "must be an integer"
NOT_A_DURATION = "must be a duration such as 90s, 10m or 1h30m"
WRONG_API_VERSION = f"must be {API_VERSION}"
WRONG_KIND = f"must be {KIND}"
EMPTY_TASKS = "a job needs at least one task"
NO_CONTAINERS = "a task needs at least one container"
GPU_NOT_WHOLE = "GPUs must be a whole number"
GPU_TWO_NAMES = "only one GPU resource name per container (found {names})"
GPU_REQUEST_MISMATCH = "GPU request ({request}) differs from the limit ({limit})"
ENV_VALUE_FROM = "valueFrom is not supported; give a literal value"
DUPLICATE_ENV = "environment variable {name} is set twice"
JOB_VOLUMES_REFUSED = (
    "the job's volumes (a claim the Volcano controller makes, mounted in every container) are "
    "not supported by the portal: declare a persistentVolumeClaim volume and its volumeMounts "
    "in the task's template"
)
# Ignored spec fields are named back in a response header: only plain names can be.
NOT_A_FIELD_NAME = (
    "unknown field {key!r} is not a field name (letters, digits, '_', '.', '-'; at most 63)"
)
NOT_AN_ANNOTATION_KEY = (
    "annotation {key!r} is not an annotation key (an optional DNS prefix and '/', then "
    "letters, digits, '_', '.', '-'; at most 63)"
)
_FIELD_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,63}")
_ANNOTATION_KEY_RE = re.compile(r"(?:[a-z0-9.-]{1,253}/)?[A-Za-z0-9_.-]{1,63}")

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
# The spec fields the portal reads; every other one is ignored and named back.
_MAPPED_SPEC_KEYS = (
    "queue", "minAvailable", "tasks", "plugins", "policies", "maxRetry",
    "ttlSecondsAfterFinished", "priorityClassName", "runningEstimate", "volumes",
)  # fmt: skip
_MAPPED_METADATA_KEYS = ("name", "generateName", "annotations")
_MAPPED_TASK_KEYS = ("name", "replicas", "template", "policies", "minAvailable")
TASK_MINIMUM_NOTE = (
    "{path}.minAvailable counts in the job's minAvailable when that is not given; the portal "
    "holds the job's pods to its minAvailable as a whole, not each task to its own"
)


class ManifestError(ValueError):
    """The manifest cannot be mapped; `errors` maps manifest paths to messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{path}: {', '.join(msgs)}" for path, msgs in errors.items()))
        self.errors = errors


@dataclass(frozen=True)
class VolcanoJobSpec:
    """What `job_submit` needs, plus the queue *name* (the caller resolves it; None: not given,
    the submitter's default) and the name's prefix when metadata.generateName gives it."""

    name: str
    queue: str | None
    tasks: list[dict[str, Any]]
    min_available: int | None = None
    priority: int = 0
    expected_duration_seconds: int | None = None
    # Manifest paths of fields the portal ignores (its scheduler or its namespaces decide).
    ignored: list[str] = field(default_factory=list)
    # Sentences about how a field was read (a default from the tasks, ...), for the caller.
    notes: list[str] = field(default_factory=list)
    plugins: Any = None  # spec.plugins as given; job_submit checks it (jobspec.job_plugins)
    policies: Any = None  # spec.policies as given (jobspec.policies)
    max_retry: Any = None  # spec.maxRetry as given
    ttl_seconds_after_finished: Any = None  # spec.ttlSecondsAfterFinished as given
    generate_name: str | None = None  # metadata.generateName, when the name comes from it

    def job_fields(self, *, name: str | None = None) -> dict[str, Any]:
        """The keyword arguments of `job_submit` / `job_build` this manifest gives (all but the
        queue, which the caller resolves, and the submitter). `name`: the generated name, for
        a manifest with metadata.generateName."""
        return {
            "name": self.name if name is None else name,
            "tasks": self.tasks,
            "priority": self.priority,
            "min_available": self.min_available,
            "expected_duration_seconds": self.expected_duration_seconds,
            "plugins": self.plugins,
            "policies": self.policies,
            "max_retry": self.max_retry,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
        }

    def path_of(self, service_path: str) -> str:
        """`manifest_path`, with the name's faults on metadata.generateName when it gave it."""
        path = manifest_path(service_path)
        if self.generate_name is not None and path == "metadata.name":
            return "metadata.generateName"
        return path


IGNORED_FIELD = "{field} is ignored by the portal"
NAME_GENERATED = "metadata.generateName: the job is named {name}"


def spec_warnings(spec: VolcanoJobSpec, *, name: str | None = None) -> list[str]:
    """What a caller says back about how the manifest was read: the name it generated, the
    fields read with a default, and every field the portal ignores."""
    said = [NAME_GENERATED.format(name=name)] if spec.generate_name is not None and name else []
    return [*said, *spec.notes, *(IGNORED_FIELD.format(field=path) for path in spec.ignored)]


def generated_name(prefix: str, suffix: str) -> str:
    """metadata.generateName completed as the API server does (names.SimpleNameGenerator)."""
    return prefix[:GENERATED_PREFIX_MAX] + suffix


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


@dataclass(frozen=True)
class Documents:
    """A YAML file's documents sorted out: the Jobs (their 1-based document numbers and the
    documents) and a sentence for each other one, which is skipped."""

    jobs: list[tuple[int, Any]]
    skipped: list[str]

    def where(self, number: int) -> str:
        """How the Job in document `number` is named in messages ("" for a lone document)."""
        return f"document {number}: " if self.count > 1 else ""

    @property
    def count(self) -> int:
        return len(self.jobs) + len(self.skipped)


SKIPPED_KIND = "document {number}: skipped: kind {kind}{name} (only Volcano Jobs are submitted)"
TOO_MANY_DOCUMENTS = f"at most {DOCUMENTS_MAX} documents in one file"


def documents_split(documents: Sequence[Any]) -> Documents:
    """Sort a file's documents: a document whose kind is `Job` (or that names no kind: its
    parse says what is missing) is a Job; any other kind (a PriorityClass beside the Job, a
    Queue, a PodGroup, ...) is a cluster admin's or another controller's object, skipped."""
    jobs: list[tuple[int, Any]] = []
    skipped: list[str] = []
    for number, document in enumerate(documents, start=1):
        kind = document.get("kind") if isinstance(document, dict) else None
        if not isinstance(kind, str) or kind == KIND:
            jobs.append((number, document))
            continue
        metadata = document.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        named = f" ({name[:63]})" if isinstance(name, str) and name else ""
        skipped.append(SKIPPED_KIND.format(number=number, kind=kind[:63], name=named))
    return Documents(jobs=jobs, skipped=skipped)


def manifest_errors(
    errors: dict[str, list[str]], path_of: Callable[[str], str] = manifest_path
) -> dict[str, list[str]]:
    """`job_submit`'s errors keyed by the manifest's paths (`path_of`: a spec's own, which
    knows its generateName); two service paths may name one manifest field (a task's
    tolerations, stated in its template), their messages joined."""
    paths: dict[str, list[str]] = {}
    for key, messages in errors.items():
        paths.setdefault(path_of(key), []).extend(messages)
    return paths


class _Collector:
    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.ignored: list[str] = []
        self.notes: list[str] = []

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

    def ignore(self, path: str, key: Any, *, annotation: bool = False) -> None:
        """Name back an ignored field `<path>.<key>` (a key that is no field name is an error:
        the names go into a response header)."""
        if not isinstance(key, str):
            return
        if (_ANNOTATION_KEY_RE if annotation else _FIELD_NAME_RE).fullmatch(key):
            self.ignored.append(f"{path}.{key}")
        else:
            message = NOT_AN_ANNOTATION_KEY if annotation else NOT_A_FIELD_NAME
            self.add(path, message.format(key=key))


@dataclass
class _Metadata:
    name: str = ""
    generate_name: str | None = None
    priority: int = 0
    duration: int | None = None


def volcano_job_parse(
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
    meta = _metadata(c, c.mapping(data.get("metadata"), "metadata", required=True))
    spec = c.mapping(data.get("spec"), "spec", required=True)
    queue = c.string(spec.get("queue"), "spec.queue") or None
    for key in spec:
        if key not in _MAPPED_SPEC_KEYS:
            c.ignore("spec", key)
    if spec.get("volumes") not in (None, []):
        c.add("spec.volumes", JOB_VOLUMES_REFUSED)
    if spec.get("runningEstimate") is not None:
        estimate = duration_seconds(spec["runningEstimate"])
        if estimate is None:
            c.add("spec.runningEstimate", NOT_A_DURATION)
        elif meta.duration is None and estimate:
            meta.duration = estimate
    priority_class = c.string(spec.get("priorityClassName"), "spec.priorityClassName")
    tasks, task_minimums = _tasks_parse(
        c,
        spec,
        too_many_tasks=too_many_tasks,
        allow_host_path=allow_host_path,
        priority_class=priority_class,
    )
    min_available = _min_available(c, spec, tasks, task_minimums)
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
        name=meta.name,
        queue=queue,
        tasks=tasks,
        min_available=min_available,
        priority=meta.priority,
        expected_duration_seconds=meta.duration,
        ignored=c.ignored,
        notes=c.notes,
        plugins=spec.get("plugins"),
        policies=spec.get("policies"),
        # mutate_job.go patchDefaultMaxRetry: 0 is the default, 3
        max_retry=spec.get("maxRetry") or None,
        ttl_seconds_after_finished=spec.get("ttlSecondsAfterFinished"),
        generate_name=meta.generate_name,
    )


def _metadata(c: _Collector, metadata: dict[str, Any]) -> _Metadata:
    meta = _Metadata()
    name = c.string(metadata.get("name"), "metadata.name")
    generate = c.string(metadata.get("generateName"), "metadata.generateName")
    if name:
        meta.name = name  # the API server too takes the name when both are given
    elif generate:
        meta.generate_name = generate
    elif "metadata.name" not in c.errors and "metadata.generateName" not in c.errors:
        c.add("metadata.name", NAME_OR_GENERATE_NAME if "metadata" not in c.errors else REQUIRED)
    for key in metadata:
        # The namespace is the tenant's, the labels stay on a Job object the portal does not
        # make, and the rest (ownerReferences, finalizers, ...) are another controller's.
        if key not in _MAPPED_METADATA_KEYS:
            c.ignore("metadata", key)
    annotations = c.mapping(metadata.get("annotations"), "metadata.annotations")
    if PRIORITY_ANNOTATION in annotations:
        path = f"metadata.annotations.{PRIORITY_ANNOTATION}"
        meta.priority = c.integer(annotations[PRIORITY_ANNOTATION], path) or 0
    if DURATION_ANNOTATION in annotations:
        path = f"metadata.annotations.{DURATION_ANNOTATION}"
        meta.duration = c.integer(annotations[DURATION_ANNOTATION], path)
    for key in annotations:
        if key not in (PRIORITY_ANNOTATION, DURATION_ANNOTATION):
            c.ignore("metadata.annotations", key, annotation=True)
    return meta


def _tasks_parse(
    c: _Collector,
    spec: dict[str, Any],
    *,
    too_many_tasks: Callable[[int], str | None],
    allow_host_path: bool,
    priority_class: str | None,
) -> tuple[list[dict[str, Any]], list[int | None]]:
    """The tasks, and each one's own minAvailable (None where it gives none)."""
    tasks: list[dict[str, Any]] = []
    minimums: list[int | None] = []
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
            path = f"spec.tasks[{index}]"
            task = _task_parse(
                c, raw_task, path, index, allow_host_path=allow_host_path,
                priority_class=priority_class,
            )  # fmt: skip
            if task is not None:
                tasks.append(task)
            if isinstance(raw_task, dict):
                minimums.append(_task_minimum(c, raw_task, path))
                if raw_task.get("minAvailable") is not None:
                    c.notes.append(TASK_MINIMUM_NOTE.format(path=path))
                # A task's dependsOn, topologyPolicy, ...: named back like the job's.
                for key in raw_task:
                    if key not in _MAPPED_TASK_KEYS:
                        c.ignore(path, key)
    return tasks, minimums


def _task_minimum(c: _Collector, raw_task: dict[str, Any], path: str) -> int | None:
    if raw_task.get("minAvailable") is None:
        return None
    return c.integer(raw_task["minAvailable"], f"{path}.minAvailable")


def _min_available(
    c: _Collector,
    spec: dict[str, Any],
    tasks: list[dict[str, Any]],
    task_minimums: list[int | None],
) -> int | None:
    """spec.minAvailable; left out (or 0) with a task that gives its own, the tasks' own or
    their replicas summed, as upstream's webhook (mutate_job.go patchDefaultMinAvailable)."""
    if spec.get("minAvailable"):
        return c.integer(spec["minAvailable"], "spec.minAvailable")
    if spec.get("minAvailable") is not None:
        c.integer(spec["minAvailable"], "spec.minAvailable")  # 0, or not a number
    if not any(m is not None for m in task_minimums) or len(task_minimums) != len(tasks):
        return None
    total = 0
    for task, own in zip(tasks, task_minimums, strict=True):
        replicas = task["replicas"] if isinstance(task["replicas"], int) else 0
        total += own if own is not None else replicas
    c.notes.append(
        f"spec.minAvailable is not given: {total}, the tasks' minAvailable (or replicas) summed"
    )
    return total


def _task_parse(
    c: _Collector,
    raw: Any,
    path: str,
    index: int,
    *,
    allow_host_path: bool,
    priority_class: str | None,
) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        c.add(path, NOT_A_MAPPING)
        return None
    name = c.string(raw.get("name"), f"{path}.name") or f"{DEFAULT_TASK_PREFIX}{index}"
    replicas: int | None = 1
    if raw.get("replicas") is not None:
        replicas = c.integer(raw["replicas"], f"{path}.replicas")
    template = c.mapping(raw.get("template"), f"{path}.template", required=True)
    if not template:
        return None
    template = _template_defaulted(c, template, f"{path}.template", priority_class)
    # The same check job_submit makes of a template given through the API, here so that a
    # manifest's every fault is named by its manifest path before anything else is looked at.
    parsed = pod_template_parse(
        template, allow_host_path=allow_host_path, prefix=f"{path}.template."
    )
    for key, messages in parsed.errors.items():
        for message in messages:
            c.add(key, message)
    task = {"name": name, "replicas": replicas, "pod_template": parsed.template}
    if raw.get("policies") is not None:
        task["policies"] = raw["policies"]  # checked by job_submit (jobspec.policies)
    return task


def _template_defaulted(
    c: _Collector, template: dict[str, Any], path: str, priority_class: str | None
) -> dict[str, Any]:
    """The template as the job's pods take it: the job's priorityClassName where the template
    has none (createJobPod), its schedulerName ignored (the portal places every job pod; a
    Volcano manifest names `volcano` there as a matter of course)."""
    pod = template.get("spec")
    if not isinstance(pod, dict):
        return template
    if "schedulerName" not in pod and not (priority_class and not pod.get("priorityClassName")):
        return template
    template = {**template, "spec": dict(pod)}
    if "schedulerName" in pod:
        del template["spec"]["schedulerName"]
        c.ignore(f"{path}.spec", "schedulerName")
    if priority_class and not pod.get("priorityClassName"):
        template["spec"]["priorityClassName"] = priority_class
    return template
