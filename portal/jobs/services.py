import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from jobspec.gpushare import gpus_decimal, gpus_split
from jobspec.job_plugins import plugin_mount_errors, plugins_parse
from jobspec.labels import object_prefix
from jobspec.limits import (
    JobLimits,
    gpus_number_error,
    job_limit_errors,
    pending_pods_error,
    task_count_error,
    task_gpu_errors,
    task_limit_errors,
)
from jobspec.names import STR_NUL, nul_paths
from jobspec.podtemplate import pod_template_parse
from jobspec.policies import DEFAULT_MAX_RETRY, policies_parse
from jobspec.tenancy import TenantPolicy, task_policy_errors
from jobspec.volcano import (
    GENERATED_ALPHABET,
    GENERATED_SUFFIX_LENGTH,
    ManifestError,
    VolcanoJobSpec,
    documents_split,
    generated_name,
    manifest_errors,
    spec_warnings,
    volcano_job_parse,
)
from portal.common.services import prefix_errors
from portal.jobs.limits import (
    gpu_sharing,
    host_path_allowed,
    job_limits,
    start_backoff,
    task_count_check,
)
from portal.jobs.policy import job_policy
from portal.queues.access import can_submit_to
from portal.queues.models import Queue
from portal.queues.selectors import QUEUE_NOT_FOUND, queue_default, queue_lookup
from portal.scheduling.facade import cycle_kick
from portal.tenants.models import Tenant
from portal.tenants.runtime_limits import (
    ABOVE_QUEUE_MAXIMUM,
    RUNTIME_MAX_SECONDS,
    effective_limit,
)

from .access import can_cancel_job, can_release_job
from .backoff import Attempt, attempts_of, attempts_with, capped, failed_reason, waiting_reason
from .lifecycle import SCHEDULED, Event, IllegalTransition, allows, transition
from .models import Job, JobTask
from .selectors import tenant_pending_pods

TASK_FIELDS = (
    "name",
    "replicas",
    "image",
    "command",
    "env",
    "gpus",
    "gpu_milli",
    "gpu_memory_mib",
    "cpu_millis",
    "memory_bytes",
    "node_selector",
    "tolerations",
    "pod_template",
    "policies",
)
# What a pod template gives a task (its summary); given alongside a template they conflict.
_NOT_FROM_TEMPLATE = ("name", "replicas", "tolerations", "pod_template", "policies")
TEMPLATE_SUMMARY_FIELDS = tuple(f for f in TASK_FIELDS if f not in _NOT_FROM_TEMPLATE)
MAX_RETRY_MAX = 100
JOB_SUBMIT_BAD_MAX_RETRY = f"must be an integer between 0 and {MAX_RETRY_MAX}"
# A finished job's pods hold their node's pod slots and the API server's memory: 30 days at most.
TTL_MAX_SECONDS = 30 * 86400
JOB_SUBMIT_BAD_TTL = f"must be an integer between 0 and {TTL_MAX_SECONDS} (seconds)"
JOB_SUBMIT_BAD_MAX_RUNTIME = f"must be an integer between 1 and {RUNTIME_MAX_SECONDS} (seconds)"
JOB_SUBMIT_GIVEN_BY_TEMPLATE = "give this in pod_template, not beside it"

JOB_SUBMIT_NOT_A_MEMBER = "you are not a member of tenant {tenant}, which owns queue {queue}"
JOB_SUBMIT_QUEUE_CLOSED = "queue {queue} is closed to new jobs"
JOB_SUBMIT_NO_TASKS = "a job needs at least one task"
JOB_SUBMIT_TASKS_NOT_A_LIST = "tasks must be a list of task mappings"
JOB_SUBMIT_TASK_NOT_A_MAPPING = "each task must be a mapping"
JOB_SUBMIT_TASK_UNKNOWN_FIELD = "unknown field; expected one of: {expected}"
JOB_SUBMIT_TASK_NAME_DUPLICATE = "task name {name} is used twice in this job"
JOB_SUBMIT_MIN_AVAILABLE_ABOVE_REPLICAS = (
    "min_available ({min_available}) may not exceed the job's total replicas ({total})"
)
JOB_CANCEL_FORBIDDEN = (
    "Only the submitter, a lead of the tenant or a site admin may cancel this job."
)
JOB_CANCEL_TERMINAL = "the job is already {status} and cannot be cancelled"
JOB_PENDING_REASON_SUBMITTED = "waiting for the next scheduling cycle"

JOB_QUARANTINED = (
    "quarantined: the scheduler's {phase} step failed on this job ({error}); the scheduler "
    "leaves it alone until a site admin releases it. Cancel it and submit a corrected job, "
    "or ask an admin to release it."
)
JOB_RELEASE_FORBIDDEN = "Only a site admin may release a job from quarantine."
JOB_RELEASE_NOT_QUARANTINED = "the job is {status}, not quarantined"
JOB_RELEASED = "released from quarantine by {actor}; waiting for the next scheduling cycle"
JOB_POLICY_HELD = (
    "quarantined: this job asks for what tenant {tenant}'s jobs may not do on the cluster "
    "({problems}); the scheduler leaves it alone until a site admin releases it. Cancel it and "
    "submit a corrected job, or ask a site admin to change the tenant's cluster policy (its pod "
    "security level, the taints and priority classes it may use) and release it."
)
JOB_RELEASE_POLICY = (
    "the job still asks for what tenant {tenant}'s jobs may not do on the cluster ({problems}): "
    "change the tenant's cluster policy first, or cancel the job"
)
POLICY_PROBLEMS_CHARS = 700
QUARANTINE_ERROR_CHARS = 300
JOB_START_REFUSED = "the cluster refused the job's pods, so none of them runs: {error}"
JOB_START_RETRYING = "pods not started yet, retrying: {error}"
JOB_START_REASON_CHARS = 1000
JOB_RUNTIME_LIMIT_REACHED = (
    "ended at {at:%H:%M:%S} UTC: it reached its run-time limit of {limit} s (started "
    "{started:%H:%M:%S} UTC)"
)
JOB_RUNTIME_LIMIT_NOTICE = (
    "; its pods were told at {given:%H:%M:%S} UTC that they are deleted then (its queue's "
    "preemption notice)"
)


def _task_instances(
    *, tasks: Any, limits: JobLimits, policy: TenantPolicy
) -> tuple[list[JobTask], dict[str, list[str]]]:
    """Build unsaved JobTasks from dicts; errors are keyed `tasks[<i>].<field>`. Each is
    checked against the tenant's cluster policy too (jobspec.tenancy, jobspec.podsecurity).

    `gpus` may be a fraction of one GPU (0.25, a Decimal, a float or its text): it is stored
    as `gpu_milli`; a task may also give `gpu_milli` and `gpu_memory_mib` itself."""
    errors: dict[str, list[str]] = {}
    if not isinstance(tasks, list):
        return [], {"tasks": [JOB_SUBMIT_TASKS_NOT_A_LIST]}
    if not tasks:
        return [], {"tasks": [JOB_SUBMIT_NO_TASKS]}
    if too_many := task_count_error(len(tasks), limits=limits):
        return [], {"tasks": [too_many]}
    instances: list[JobTask] = []
    names: set[str] = set()
    checks = _TaskChecks(limits=limits, policy=policy, gpu_check=_GpuCheck(sharing=gpu_sharing()))
    for index, spec in enumerate(tasks):
        path = f"tasks[{index}]"
        if not isinstance(spec, dict):
            errors[path] = [JOB_SUBMIT_TASK_NOT_A_MAPPING]
            continue
        for key in spec:
            if key not in TASK_FIELDS:
                errors[f"{path}.{key}"] = [
                    JOB_SUBMIT_TASK_UNKNOWN_FIELD.format(expected=", ".join(TASK_FIELDS))
                ]
        template = spec.get("pod_template")
        fields = {
            key: value
            for key, value in spec.items()
            if key in TASK_FIELDS and key != "pod_template"
        }
        gpus_error = _gpus_fields(fields)
        errors.update(_policies_checked(fields, path))
        task = JobTask(**fields)
        if template is not None and template != {}:
            for key, messages in _template_applied(task, spec, template, path).items():
                errors.setdefault(key, []).extend(messages)
        # Tolerations a template stated are refused where they were written (the YAML pane).
        spec_of = template.get("spec") if isinstance(template, dict) else None
        stated = isinstance(spec_of, dict) and "tolerations" in spec_of
        for key, messages in checks.errors(
            task, gpus_error=gpus_error, path=path, in_template=stated
        ).items():
            errors.setdefault(key, []).extend(messages)
        if isinstance(task.name, str) and task.name:
            if task.name in names:
                errors.setdefault(f"{path}.name", []).append(
                    JOB_SUBMIT_TASK_NAME_DUPLICATE.format(name=task.name)
                )
            names.add(task.name)
        instances.append(task)
    return instances, errors


def _policies_checked(fields: dict[str, Any], path: str) -> dict[str, list[str]]:
    """A task's `policies` checked and normalised in place; the errors."""
    if "policies" not in fields:
        return {}
    fields["policies"], errors = policies_parse(fields["policies"], path=f"{path}.policies")
    return errors


def _template_applied(
    task: JobTask, spec: dict[str, Any], template: Any, path: str
) -> dict[str, list[str]]:
    """Check `template` (jobspec.podtemplate) and give `task` the normalised template and
    its summary; the errors, keyed `<path>.pod_template.<template path>`."""
    errors: dict[str, list[str]] = {}
    for key in TEMPLATE_SUMMARY_FIELDS:
        if key in spec:
            errors[f"{path}.{key}"] = [JOB_SUBMIT_GIVEN_BY_TEMPLATE]
    parsed = pod_template_parse(
        template, allow_host_path=host_path_allowed(), prefix=f"{path}.pod_template."
    )
    errors.update(parsed.errors)
    summary = parsed.summary
    task.pod_template = parsed.template
    if isinstance(parsed.template.get("spec"), dict):
        parsed.template["spec"].pop("tolerations", None)  # one place: JobTask.tolerations
    task.image = summary.image
    task.command = summary.command
    task.env = summary.env
    task.gpus = summary.gpus
    task.gpu_milli = summary.gpu_milli
    task.gpu_memory_mib = summary.gpu_memory_mib
    # A template that states no CPU (memory) gets the task's default, written into its first
    # container, so that the pod asks the kubelet for what the scheduler counts.
    for field, resource, stated in (
        ("cpu_millis", "cpu", summary.cpu_millis),
        ("memory_bytes", "memory", summary.memory_bytes),
    ):
        if stated is not None:
            setattr(task, field, stated)
        elif parsed.template.get("spec", {}).get("containers"):
            amount = getattr(task, field)
            first = parsed.template["spec"]["containers"][0]
            requests = first.setdefault("resources", {}).setdefault("requests", {})
            requests[resource] = f"{amount}m" if resource == "cpu" else str(amount)
    task.node_selector = summary.node_selector
    if summary.tolerations is not None:
        if "tolerations" in spec:
            errors[f"{path}.tolerations"] = [JOB_SUBMIT_GIVEN_BY_TEMPLATE]
        task.tolerations = summary.tolerations
    return errors


def _gpus_fields(fields: dict[str, Any]) -> str | None:
    """Store a fractional `gpus` as `gpu_milli` (in place); the refusal of a `gpus` that is
    no number of GPUs (negative, 1.5, 0.0001), or None. Integers are the model's to check."""
    value = fields.get("gpus")
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    if isinstance(value, bool):
        return None  # the model refuses it
    if error := gpus_number_error(value):
        fields["gpus"] = 0
        return error
    number = gpus_decimal(value)
    if number is None:  # gpus_number_error said so already
        return None
    whole, milli = gpus_split(number)
    fields["gpus"] = whole
    if milli:
        fields["gpu_milli"] = milli
    return None


class _GpuCheck:
    """The GPU rules of each task of one submission (jobspec.limits.task_gpu_errors),
    reading the cluster's largest device memory once, if a task asks for GPU memory."""

    def __init__(self, *, sharing: str) -> None:
        self.sharing = sharing
        self.largest: int | None = None

    def add(
        self, over: dict[str, list[str]], *, task: JobTask, gpus_error: str | None, prefix: str
    ) -> None:
        if gpus_error:
            over.setdefault(f"{prefix}gpus", []).insert(0, gpus_error)
        if self.largest is None and task.gpu_memory_mib:
            self.largest = largest_device_mib()
        errors = task_gpu_errors(
            task, sharing=self.sharing, largest_device_mib=self.largest or 0, prefix=prefix
        )
        for key, messages in errors.items():
            over.setdefault(key, []).extend(messages)


def largest_device_mib() -> int:
    """The largest GPU memory (MiB) of any node's device, 0 when none reports it."""
    from django.db.models import Max

    from portal.cluster.models import Node

    return Node.objects.aggregate(largest=Max("gpu_memory_mib"))["largest"] or 0


@dataclass(frozen=True)
class _TaskChecks:
    """The rules one built task is held to: the limits, its model's fields, the GPU rules and
    the tenant's cluster policy."""

    limits: JobLimits
    policy: TenantPolicy
    gpu_check: _GpuCheck

    def errors(
        self, task: JobTask, *, gpus_error: str | None, path: str, in_template: bool = False
    ) -> dict[str, list[str]]:
        """Every fault of `task`, keyed `<path>.<field>`; `in_template`: its tolerations are
        its template's, so the policy's refusal of them is keyed under the template."""
        errors: dict[str, list[str]] = {}
        over = task_limit_errors(task, limits=self.limits, prefix=f"{path}.")
        self.gpu_check.add(over, task=task, gpus_error=gpus_error, prefix=f"{path}.")
        try:
            # A field over its limit has its message already (the column's own range, if
            # any, would only say the same less clearly).
            # A template's summary fields were checked as parts of the template.
            derived = TEMPLATE_SUMMARY_FIELDS if task.pod_template else ()
            task.full_clean(exclude=["job", *derived, *(key.rsplit(".", 1)[1] for key in over)])
        except ValidationError as error:
            for key, messages in prefix_errors(error, f"{path}.").items():
                errors.setdefault(key, []).extend(messages)
        refused = task_policy_errors(
            template=task.pod_template,
            tolerations=task.tolerations,
            policy=self.policy,
            prefix=f"{path}.",
        )
        tolerations = refused.pop(f"{path}.tolerations", None)
        if tolerations and f"{path}.tolerations" not in errors:  # malformed: said already
            where = (
                f"{path}.pod_template.spec.tolerations" if in_template else f"{path}.tolerations"
            )
            refused[where] = tolerations
        for key, messages in (*over.items(), *refused.items()):
            errors.setdefault(key, []).extend(messages)
        return errors


def job_build(
    *,
    name: str,
    tasks: Any,
    priority: int = 0,
    min_available: int | None = None,
    expected_duration_seconds: int | None = None,
    plugins: Any = None,
    policies: Any = None,
    max_retry: Any = None,
    ttl_seconds_after_finished: Any = None,
    max_runtime_seconds: Any = None,
    limits: JobLimits,
    policy: TenantPolicy,
    tenant: Tenant | None = None,
    queue: Queue | None = None,
    submitter: AbstractBaseUser | None = None,
) -> tuple[Job, list[JobTask], dict[str, list[str]]]:
    """The unsaved job and tasks `job_submit` would store, and every fault of them keyed by
    field path; no query (relations left out are not checked: the dry-run render, offline,
    has none). Everything but who may submit where and the tenant's pending-pods cap;
    `policy` is what the tenant's jobs may do on the cluster (portal.jobs.policy)."""
    errors: dict[str, list[str]] = {}
    for path in nul_paths({"name": name, "tasks": tasks, "plugins": plugins, "policies": policies}):
        errors.setdefault(path, []).append(STR_NUL)
    if errors:  # nothing else is worth saying of a value no column can store
        return Job(name=""), [], errors
    task_instances, task_errors = _task_instances(tasks=tasks, limits=limits, policy=policy)
    errors.update(task_errors)
    over = job_limit_errors(
        replicas=[task.replicas for task in task_instances],
        priority=priority,
        expected_duration_seconds=expected_duration_seconds,
        limits=limits,
    )
    for key, messages in over.items():
        errors.setdefault(key, []).extend(messages)
    stored_plugins, plugin_errors = plugins_parse(
        plugins, task_names=[task.name for task in task_instances], path="plugins"
    )
    errors.update(plugin_errors)
    if stored_plugins and isinstance(tasks, list):
        templates = [spec.get("pod_template") if isinstance(spec, dict) else None for spec in tasks]
        errors.update(plugin_mount_errors(stored_plugins, templates))
    stored_policies, policy_errors = policies_parse(policies, path="policies")
    errors.update(policy_errors)
    if max_retry is None:
        max_retry = DEFAULT_MAX_RETRY
    elif (
        isinstance(max_retry, bool)
        or not isinstance(max_retry, int)
        or not 0 <= max_retry <= MAX_RETRY_MAX
    ):
        errors.setdefault("max_retry", []).append(JOB_SUBMIT_BAD_MAX_RETRY)
        max_retry = DEFAULT_MAX_RETRY
    ttl = ttl_seconds_after_finished
    if ttl is not None and (
        isinstance(ttl, bool) or not isinstance(ttl, int) or not 0 <= ttl <= TTL_MAX_SECONDS
    ):
        errors.setdefault("ttl_seconds_after_finished", []).append(JOB_SUBMIT_BAD_TTL)
        ttl = None
    max_runtime = max_runtime_seconds
    if max_runtime is not None and (
        isinstance(max_runtime, bool)
        or not isinstance(max_runtime, int)
        or not 1 <= max_runtime <= RUNTIME_MAX_SECONDS
    ):
        errors.setdefault("max_runtime_seconds", []).append(JOB_SUBMIT_BAD_MAX_RUNTIME)
        max_runtime = None

    # Only valid counts: a role's negative replicas are its own error, not the gang's too.
    total_replicas = sum(
        task.replicas
        for task in task_instances
        if isinstance(task.replicas, int) and task.replicas > 0
    )
    job = Job(
        tenant=tenant,
        queue=queue,
        submitter=submitter,
        name=name,
        priority=priority,
        min_available=(total_replicas or 1) if min_available is None else min_available,
        expected_duration_seconds=expected_duration_seconds,
        plugins=stored_plugins,
        policies=stored_policies,
        max_retry=max_retry,
        ttl_seconds_after_finished=ttl,
        max_runtime_seconds=max_runtime,
        status=Job.Status.PENDING,
        submitted_at=timezone.now(),
        pending_reason=JOB_PENDING_REASON_SUBMITTED,
        # Its objects' names carry this instance: another sharing the namespace never asks
        # for the same ones.
        object_prefix=object_prefix(settings.KUBERNETES_INSTANCE),
    )
    job.pending_reason_at = job.submitted_at
    # Tenant, queue and submitter are stored rows (the caller read them in this transaction):
    # skip full_clean's one existence query per foreign key; the INSERT still enforces them.
    skipped = [
        field
        for field, obj in (("tenant", tenant), ("queue", queue), ("submitter", submitter))
        if obj is None or (obj.pk is not None and not obj._state.adding)
    ]
    try:
        job.full_clean(exclude=[*skipped, *over])
    except ValidationError as error:
        for key, messages in error.message_dict.items():
            errors.setdefault(key, []).extend(messages)
    if (
        "min_available" not in errors
        and not task_errors
        and total_replicas
        and job.min_available > total_replicas
    ):
        errors["min_available"] = [
            JOB_SUBMIT_MIN_AVAILABLE_ABOVE_REPLICAS.format(
                min_available=job.min_available, total=total_replicas
            )
        ]
    return job, task_instances, errors


def job_submit(
    *,
    submitter: AbstractBaseUser,
    queue: Queue,
    name: str,
    tasks: list[dict[str, Any]],
    priority: int = 0,
    min_available: int | None = None,
    expected_duration_seconds: int | None = None,
    plugins: Any = None,
    policies: Any = None,
    max_retry: Any = None,
    ttl_seconds_after_finished: Any = None,
    max_runtime_seconds: Any = None,
) -> Job:
    """Validate and store a pending job with its tasks; the job comes back with its tasks
    loaded (`job.tasks.all()` reads no rows).

    Every problem is reported at once as a ValidationError keyed by field path
    (`name`, `queue`, `tasks[1].gpus`, ...), before anything is written; the limits
    (`jobspec.limits`, with the values in force) are checked here, for every way a job comes in. The tenant's cap
    on pending pods is checked last, with the tenant locked, for an otherwise valid job.
    """
    limits = job_limits()
    errors: dict[str, list[str]] = {}
    if not can_submit_to(submitter, queue):
        errors["queue"] = [
            JOB_SUBMIT_NOT_A_MEMBER.format(tenant=queue.tenant.name, queue=queue.name)
        ]
    elif queue.state != Queue.State.OPEN:
        errors["queue"] = [JOB_SUBMIT_QUEUE_CLOSED.format(queue=queue.name)]
    job, task_instances, job_errors = job_build(
        name=name,
        tasks=tasks,
        priority=priority,
        min_available=min_available,
        expected_duration_seconds=expected_duration_seconds,
        plugins=plugins,
        policies=policies,
        max_retry=max_retry,
        ttl_seconds_after_finished=ttl_seconds_after_finished,
        max_runtime_seconds=max_runtime_seconds,
        limits=limits,
        policy=job_policy(tenant=queue.tenant, queue=queue),
        tenant=queue.tenant,
        queue=queue,
        submitter=submitter,
    )
    for key, messages in job_errors.items():
        errors.setdefault(key, []).extend(messages)
    ceiling = queue.runtime_limit
    if (
        job.max_runtime_seconds is not None
        and ceiling is not None
        and job.max_runtime_seconds > ceiling
    ):
        errors.setdefault("max_runtime_seconds", []).append(
            ABOVE_QUEUE_MAXIMUM.format(limit=ceiling)
        )
    if errors:
        raise ValidationError(errors)
    total_replicas = sum(task.replicas for task in task_instances)

    # Only the writes need the transaction, and they need no savepoint of their own inside
    # a caller's transaction (the API's request): if one fails, the caller's transaction
    # fails with it and nothing is written. Validation errors are raised outside it, so a
    # caller that catches them (the submit form) keeps a usable transaction: the pending-pods
    # refusal leaves the block without writing and is raised after it.
    with transaction.atomic(savepoint=False):
        refusal = _pending_pods_refusal(job=job, adding=total_replicas, limits=limits)
        if refusal is None:
            job.save()
            for task in task_instances:
                task.job = job
            JobTask.objects.bulk_create(task_instances)
            cycle_kick()
    if refusal is not None:
        raise ValidationError({"tasks": [refusal]})
    _tasks_loaded(job, task_instances)
    return job


MANIFEST_QUEUE_DEFAULTED = "spec.queue is not given: the job goes to queue {queue}, {why}"
MANIFEST_NO_JOB = "the file holds no Volcano Job ({skipped})"


@dataclass(frozen=True)
class ManifestSubmission:
    job: Job
    ignored: list[str]  # manifest paths the portal ignores (its scheduler decides)
    # How the manifest was read: its default queue, a generated name, defaults, ignored fields.
    warnings: list[str]


def job_submit_manifest(*, submitter: AbstractBaseUser, manifest: Any) -> ManifestSubmission:
    """Submit a Volcano Job manifest (parsed YAML or JSON): the API and the upload page alike.

    `spec.queue` names a queue the submitter can see, by id or by name; left out, the job goes
    to their default queue (portal.queues.selectors.queue_default), where upstream's webhook
    would put it in `default`. `job_submit` then says whether they may submit there and whether
    it is open. A name from metadata.generateName gets 5 random characters, as the API server
    gives it. Every fault is a ValidationError keyed by the manifest's path
    (`spec.tasks[0].template.spec.containers[0].image`), an unknown queue's together with the
    manifest's own faults."""
    try:
        spec = volcano_job_parse(
            manifest, too_many_tasks=task_count_check(), allow_host_path=host_path_allowed()
        )
    except ManifestError as error:
        errors = dict(error.errors)
        spec_part = manifest.get("spec") if isinstance(manifest, dict) else None
        ref = spec_part.get("queue") if isinstance(spec_part, dict) else None
        unknown = isinstance(ref, str) and ref and queue_lookup(user=submitter, ref=ref) is None
        if unknown and "spec.queue" not in errors:
            errors["spec.queue"] = [QUEUE_NOT_FOUND.format(ref=ref)]
        raise ValidationError(errors) from error
    queue, said = _manifest_queue(submitter, spec)
    name = None
    if spec.generate_name is not None:
        suffix = "".join(secrets.choice(GENERATED_ALPHABET) for _ in range(GENERATED_SUFFIX_LENGTH))
        name = generated_name(spec.generate_name, suffix)
    try:
        job = job_submit(submitter=submitter, queue=queue, **spec.job_fields(name=name))
    except ValidationError as error:
        paths = manifest_errors(error.message_dict, spec.path_of)
        raise ValidationError(paths) from error
    return ManifestSubmission(
        job=job, ignored=spec.ignored, warnings=[*said, *spec_warnings(spec, name=name)]
    )


def _manifest_queue(submitter: AbstractBaseUser, spec: VolcanoJobSpec) -> tuple[Queue, list[str]]:
    """The manifest's queue, and a sentence when it is the submitter's default."""
    if spec.queue is not None:
        queue = queue_lookup(user=submitter, ref=spec.queue)
        if queue is None:
            raise ValidationError({"spec.queue": [QUEUE_NOT_FOUND.format(ref=spec.queue)]})
        return queue, []
    default = queue_default(user=submitter)
    if default.queue is None:
        raise ValidationError({"spec.queue": [default.error]})
    return default.queue, [
        MANIFEST_QUEUE_DEFAULTED.format(queue=default.queue.name, why=default.why)
    ]


@dataclass(frozen=True)
class UploadSubmission:
    submitted: list[ManifestSubmission]
    skipped: list[str]  # a sentence for each document that is no Volcano Job


def job_submit_manifests(*, submitter: AbstractBaseUser, documents: list[Any]) -> UploadSubmission:
    """Submit every Volcano Job of a file (the upload page), all or none: one faulty Job and
    none is stored, every fault of every Job said at once, keyed `document <n>: <path>` when
    the file holds several documents. Other kinds are skipped (jobspec.volcano.documents_split)."""
    split = documents_split(documents)
    if not split.jobs:
        raise ValidationError(
            {"document": [MANIFEST_NO_JOB.format(skipped="; ".join(split.skipped))]}
        )
    submitted: list[ManifestSubmission] = []
    errors: dict[str, list[str]] = {}
    with transaction.atomic():
        for number, document in split.jobs:
            try:
                submitted.append(job_submit_manifest(submitter=submitter, manifest=document))
            except ValidationError as error:
                for path, messages in error.message_dict.items():
                    errors[f"{split.where(number)}{path}"] = messages
        if errors:
            transaction.set_rollback(True)
    if errors:
        raise ValidationError(errors)
    return UploadSubmission(submitted=submitted, skipped=split.skipped)


def _pending_pods_refusal(*, job: Job, adding: int, limits: JobLimits) -> str | None:
    """Why the tenant may not queue `adding` more pods, or None. Locks the tenant row until
    the caller's transaction ends, so concurrent submissions are counted one after another;
    the count is the database's (portal.jobs.pod_count), whatever the queue's length."""
    tenant = job.tenant
    list(Tenant.objects.select_for_update().filter(pk=tenant.pk).order_by().values_list("pk"))
    return pending_pods_error(
        tenant=tenant.name,
        pending=tenant_pending_pods(tenant_id=tenant.pk),
        adding=adding,
        limits=limits,
    )


def _tasks_loaded(job: Job, tasks: list[JobTask]) -> None:
    """Give `job` its just-stored tasks as `prefetch_related("tasks")` would (same order:
    ids ascend in list order), so a caller showing the job reads no rows back."""
    if any(task.pk is None for task in tasks):
        return  # a database that returns no ids from bulk inserts: let it read them
    queryset = job.tasks.all()
    queryset._result_cache = list(tasks)
    queryset._prefetch_done = True
    job._prefetched_objects_cache = {"tasks": queryset}


@transaction.atomic
def job_cancel(*, job: Job, actor: AbstractBaseUser) -> Job:
    """Cancel a job that has not finished: its submitter, a lead of the tenant, or staff."""
    if not can_cancel_job(actor, job):
        raise PermissionDenied(JOB_CANCEL_FORBIDDEN)
    job = Job.objects.select_for_update().get(pk=job.pk)
    if not allows(job.status, Event.CANCEL):
        raise ValidationError({"status": JOB_CANCEL_TERMINAL.format(status=job.status)})
    job = _transition(job=job, event=Event.CANCEL, at=None)
    cycle_kick()
    return job


def _transition(
    *, job: Job, event: Event, at: datetime | None, validate: bool = True, **extra: Any
) -> Job:
    """Apply `event` to the locked `job` (portal.jobs.lifecycle) and save the fields it
    changed, with `extra`; a job leaving pending has no pending reason unless one is given."""
    try:
        change = transition(job.status, event)
    except IllegalTransition as error:
        raise ValidationError({"status": str(error)}) from None
    at = at or timezone.now()
    update_fields = ["updated_at", *extra, *change.apply(job, at)]
    for field, value in extra.items():
        setattr(job, field, value)
    if change.status != Job.Status.PENDING and "pending_reason" not in extra:
        job.pending_reason = ""
        update_fields.append("pending_reason")
    if validate:
        job.full_clean()
    job.save(update_fields=sorted(set(update_fields)))
    return job


def _locked(job: Job) -> Job:
    return Job.objects.select_for_update().get(pk=job.pk)


def job_quarantine(
    *, job_id: int, phase: str, error: str, at: datetime | None = None
) -> Job | None:
    """Stop scheduling a job whose data made a scheduling phase fail; its pods are released.

    Called by the cycle (scheduler/adapters/quarantine.py) in a transaction of its own. Returns
    the quarantined job, or None when there is nothing to do: the job is gone, finished,
    cancelled or already quarantined.
    """
    reason = JOB_QUARANTINED.format(phase=phase, error=error[:QUARANTINE_ERROR_CHARS])
    return _quarantined(job_id=job_id, reason=reason, at=at)


def _quarantined(*, job_id: int, reason: str, at: datetime | None) -> Job | None:
    """Quarantine the job with `reason` and release its pods; None if it cannot be (gone,
    finished, cancelled or quarantined already)."""

    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or not allows(job.status, Event.QUARANTINE):
            return None
        at = at or timezone.now()
        # Not validated: the job's stored data may be what broke the cycle (a value stored
        # before a limit or a validator existed); only the status fields are written.
        job = _transition(
            job=job,
            event=Event.QUARANTINE,
            at=at,
            validate=False,
            pending_reason=reason,
            pending_reason_at=at,
        )
        # Its pods go, as a cancelled job's do: nothing of it is left for a cycle to trip on.
        _placed_pods_release(job_id=job.pk, at=at)
    return job


def job_start_refused(*, job_id: int, error: str, at: datetime | None = None) -> Job | None:
    """The cluster refused the job's pods for good (403: a ResourceQuota, a policy; 422: an
    invalid pod): the job fails with the API server's words (`error`) in its reason, and its
    pods are released, so no part of the gang runs and nothing retries the same refusal forever.

    Returns the failed job, or None when it is gone or already finished."""

    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or not allows(job.status, Event.FAIL):
            return None
        at = at or timezone.now()
        job = _transition(
            job=job,
            event=Event.FAIL,
            at=at,
            validate=False,
            pending_reason=JOB_START_REFUSED.format(error=error)[:JOB_START_REASON_CHARS],
            pending_reason_at=at,
        )
        _placed_pods_release(job_id=job.pk, at=at)
    return job


def _placed_pods_release(*, job_id: int, at: datetime) -> None:
    """The job's bound and running pods are to go (the reconcile deletes them): a job that
    ended or went back to the queue keeps no GPUs, and no half gang is left running."""
    from portal.cluster.models import Placement

    Placement.objects.filter(
        job_id=job_id, state__in=[Placement.State.BOUND, Placement.State.RUNNING]
    ).update(state=Placement.State.RELEASING, updated_at=at)


def job_start_failed(*, job_id: int, attempt: Attempt) -> Job | None:
    """A start of the job's pods failed in a way a later try may not (a namespace quota
    exceeded, a pod name another portal's object holds; portal.jobs.backoff): the attempt is
    kept on the job, its pods are released at once, and it goes back to the queue to wait its
    backoff, saying what happened and when it is tried again; at its cap of failures of that
    kind it fails instead, with the cluster's words.

    Returns the job as changed, or None when it is gone or no longer placed."""

    with transaction.atomic():
        job = Job.objects.select_for_update().filter(pk=job_id).first()
        if job is None or not allows(job.status, Event.RESTART):
            return None
        stored = attempts_with(job.start_attempts, attempt)
        attempts = attempts_of(stored)
        if capped(attempts, attempt.kind, job.max_retry):
            event, reason = Event.FAIL, failed_reason(attempts, job.max_retry)
        else:
            event, reason = Event.RESTART, waiting_reason(attempts, start_backoff(), job.max_retry)
        job = _transition(
            job=job,
            event=event,
            at=attempt.at,
            validate=False,
            pending_reason=reason[:JOB_START_REASON_CHARS],
            pending_reason_at=attempt.at,
            start_attempts=stored,
        )
        _placed_pods_release(job_id=job.pk, at=attempt.at)
    return job


def job_start_retrying(*, job_id: int, error: str, at: datetime) -> None:
    """The job's pods could not be started this time (the API server failed, a gang pod is
    still terminating): it keeps its placements, and its reason says why it has not started."""
    reason = JOB_START_RETRYING.format(error=error)[:JOB_START_REASON_CHARS]
    Job.objects.filter(pk=job_id, status__in=[Job.Status.ADMITTED, Job.Status.RUNNING]).update(
        pending_reason=reason, pending_reason_at=at
    )


def jobs_runtime_limit_end(*, now: datetime) -> list[int]:
    """End every started job that has run for its run-time limit (its own, else its queue's,
    else its tenant's maximum: the tightest set): it fails, saying so, and its pods are
    released. A job within its queue's preemption notice of its limit has its pods told the
    limit's end as their deadline first (portal.cluster.services.placements_notice_give).
    Called by the scheduling cycle; the start is stored, so a restarted worker ends the same
    jobs. Returns their ids."""

    limited = (
        Job.objects.filter(
            status__in=[Job.Status.ADMITTED, Job.Status.RUNNING], started_at__isnull=False
        )
        .filter(
            Q(max_runtime_seconds__isnull=False)
            | Q(queue__max_runtime_seconds__isnull=False)
            | Q(queue__tenant__max_runtime_seconds__isnull=False)
        )
        .values_list(
            "id",
            "started_at",
            "queue__preemption_notice_seconds",
            "max_runtime_seconds",
            "queue__max_runtime_seconds",
            "queue__tenant__max_runtime_seconds",
        )
    )
    due, told = [], {}
    for job_id, started, notice, *limits in limited:
        limit = effective_limit(*limits)
        # started_at is never null here (filtered above); the check is for the type checker
        if limit is None or started is None:
            continue
        end = started + timedelta(seconds=limit)
        if end <= now:
            due.append((job_id, started, limit))
        elif notice and end - timedelta(seconds=notice) <= now:
            told[job_id] = end
    if told:
        _runtime_limit_notices_give(told, now)
    ended = []
    for job_id, started, limit in due:
        with transaction.atomic():
            job = Job.objects.select_for_update().filter(pk=job_id).first()
            if job is None or not allows(job.status, Event.FAIL):
                continue
            reason = JOB_RUNTIME_LIMIT_REACHED.format(at=now, limit=limit, started=started)
            if (given := _notice_given_at(job_id)) is not None:
                reason += JOB_RUNTIME_LIMIT_NOTICE.format(given=given)
            _transition(
                job=job,
                event=Event.FAIL,
                at=now,
                validate=False,
                pending_reason=reason,
                pending_reason_at=now,
            )
            _placed_pods_release(job_id=job_id, at=now)
            ended.append(job_id)
    return ended


def _runtime_limit_notices_give(ends: dict[int, datetime], now: datetime) -> None:
    """The placed pods of jobs within their notice of their limit, not told yet, are told
    that they are deleted at the limit's end (one query when all were told already)."""
    from portal.cluster.models import Placement
    from portal.cluster.services import placements_notice_give

    untold: dict[int, list[int]] = {}
    for placement_id, job_id in Placement.objects.filter(
        job_id__in=ends,
        state__in=[Placement.State.BOUND, Placement.State.RUNNING],
        notice_deadline__isnull=True,
    ).values_list("id", "job_id"):
        untold.setdefault(job_id, []).append(placement_id)
    for job_id, ids in sorted(untold.items()):
        placements_notice_give(ids=ids, deadline=ends[job_id], at=now)


def _notice_given_at(job_id: int) -> datetime | None:
    """When the job's placed pods were told of their deadline, if they were."""
    from portal.cluster.models import Placement

    return (
        Placement.objects.filter(
            job_id=job_id,
            state__in=[Placement.State.BOUND, Placement.State.RUNNING],
            notice_given_at__isnull=False,
        )
        .order_by("notice_given_at")
        .values_list("notice_given_at", flat=True)
        .first()
    )


@transaction.atomic
def job_quarantine_release(*, job: Job, actor: AbstractBaseUser) -> Job:
    """A site admin sends a quarantined job back to pending (after the cause was fixed)."""
    if not can_release_job(actor, job):
        raise PermissionDenied(JOB_RELEASE_FORBIDDEN)
    job = _locked(job)
    if not allows(job.status, Event.RELEASE):
        raise ValidationError({"status": JOB_RELEASE_NOT_QUARANTINED.format(status=job.status)})
    if problems := job_policy_problems(job):
        raise ValidationError(
            {"status": JOB_RELEASE_POLICY.format(tenant=job.tenant.name, problems=problems)}
        )
    at = timezone.now()
    job = _transition(
        job=job,
        event=Event.RELEASE,
        at=at,
        pending_reason=JOB_RELEASED.format(actor=actor.get_username()),
        pending_reason_at=at,
    )
    cycle_kick()
    return job


def job_policy_problems(job: Job, *, tenant_names: list[str] | None = None) -> str:
    """What a stored job asks for that its tenant's cluster policy now refuses, in one line
    ("" when nothing): jobs stored before a rule existed, or before an admin narrowed the
    tenant's policy."""
    policy = job_policy(tenant=job.tenant, queue=job.queue, tenant_names=tenant_names)
    errors: dict[str, list[str]] = {}
    for index, task in enumerate(job.tasks.all()):
        errors |= task_policy_errors(
            template=task.pod_template,
            tolerations=task.tolerations,
            policy=policy,
            prefix=f"tasks[{index}].",
        )
    text = "; ".join(
        f"{key}: {message}" for key, messages in errors.items() for message in messages
    )
    if len(text) > POLICY_PROBLEMS_CHARS:
        text = text[: POLICY_PROBLEMS_CHARS - 1].rstrip() + "…"
    return text


def jobs_policy_hold(
    *, tenant_ids: list[int] | None = None, queue_ids: list[int] | None = None
) -> list[int]:
    """Quarantine every job of these tenants (or queues; None and None: every job) that the
    scheduler still works on and that its tenant's cluster policy refuses, its reason saying
    what to change; the ids of those held. Called when an admin narrows a policy and once for
    the jobs stored before the policy existed (migration jobs 0016). Nothing is deleted."""
    jobs = Job.objects.filter(status__in=sorted(SCHEDULED)).select_related("tenant", "queue")
    if tenant_ids is not None:
        jobs = jobs.filter(tenant_id__in=tenant_ids)
    if queue_ids is not None:
        jobs = jobs.filter(queue_id__in=queue_ids)
    names = list(Tenant.objects.values_list("name", flat=True))
    held = []
    for job in jobs.prefetch_related("tasks").order_by("id").iterator(chunk_size=500):
        problems = job_policy_problems(job, tenant_names=names)
        if not problems:
            continue
        reason = JOB_POLICY_HELD.format(tenant=job.tenant.name, problems=problems)
        if _quarantined(job_id=job.pk, reason=reason, at=None) is not None:
            held.append(job.pk)
    return held
