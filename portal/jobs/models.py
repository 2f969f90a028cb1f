from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.utils import timezone
from django.utils.functional import cached_property

from jobspec.gpushare import GpuAsk, gpu_ask, gpus_number, milli_asked, pod_gpu_ask, request_text
from jobspec.labels import job_object_name
from jobspec.limits import IMAGE_MAX_CHARS, NAME_MAX_CHARS
from portal.common.models import BaseModel
from portal.common.validators import (
    validate_dict,
    validate_dns_label,
    validate_str_dict,
    validate_str_list,
)
from portal.jobs.validators import (
    validate_env_names,
    validate_image,
    validate_node_selector,
    validate_tolerations,
)
from portal.queues.models import Queue
from portal.tenants.models import Tenant
from portal.tenants.runtime_limits import RUNTIME_LIMIT_VALIDATORS

from . import lifecycle

GiB = 1024**3
# What a pod asks for when its job does not say: one default for the form, the API, a Volcano
# manifest without resources and the CLI alike (the form shows it as its initial value).
TASK_DEFAULT_CPU_MILLIS = 8000
TASK_DEFAULT_MEMORY_BYTES = 64 * GiB


class Job(BaseModel):
    """A gang of pods (tasks x replicas) submitted to a queue."""

    class Status(models.TextChoices):
        # The values and what moves a job between them: portal.jobs.lifecycle.
        PENDING = lifecycle.Status.PENDING.value, "Pending"
        ADMITTED = lifecycle.Status.ADMITTED.value, "Admitted"
        RUNNING = lifecycle.Status.RUNNING.value, "Running"
        SUCCEEDED = lifecycle.Status.SUCCEEDED.value, "Succeeded"
        FAILED = lifecycle.Status.FAILED.value, "Failed"
        PREEMPTED = lifecycle.Status.PREEMPTED.value, "Preempted"
        CANCELLED = lifecycle.Status.CANCELLED.value, "Cancelled"
        # The scheduler failed on this job's data and stopped working on it; pending_reason
        # says why.
        QUARANTINED = lifecycle.Status.QUARANTINED.value, "Quarantined"

    class PendingKind(models.TextChoices):
        NEVER = "never", "Can never run as submitted"
        WAITS = "waits", "Waits"

    TERMINAL_STATUSES = lifecycle.TERMINAL

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="jobs")
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="jobs")
    submitter = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs"
    )
    name = models.CharField(max_length=NAME_MAX_CHARS, validators=[validate_dns_label])
    priority = models.IntegerField(default=0)
    min_available = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    expected_duration_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(1)]
    )
    # The longest this job may run, within its queue's limit (empty: the queue's); the cycle
    # ends it when reached, after its queue's preemption notice.
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=RUNTIME_LIMIT_VALIDATORS
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    submitted_at = models.DateTimeField(default=timezone.now, db_index=True)
    admitted_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    pending_reason = models.TextField(blank=True)
    # Whether the last cycle found the job can never run as submitted or waits (blank: no
    # reason from a cycle); the values of scheduler.core.types.PendingKind.
    pending_kind = models.CharField(
        max_length=8, choices=PendingKind.choices, blank=True, default=""
    )
    pending_reason_at = models.DateTimeField(null=True, blank=True)
    preemption_count = models.PositiveIntegerField(default=0)
    # Volcano job plugins and their arguments (jobspec.job_plugins: svc, env, pytorch, ssh, ...),
    # e.g. {"svc": [], "pytorch": ["--master=master", "--port=23456"]}.
    plugins = models.JSONField(default=dict, blank=True, validators=[validate_dict])
    # Lifecycle policies (jobspec.policies): what a failed, evicted or vanished pod, or a
    # completed task, does to the job; restarts are bounded by max_retry.
    policies = models.JSONField(default=list, blank=True)
    max_retry = models.PositiveIntegerField(default=3)
    retry_count = models.PositiveIntegerField(default=0)
    # Each restart: {"at": ISO time, "pod": name, "event": ..., "action": ..., "reason": ...}.
    retries = models.JSONField(default=list, blank=True)
    # Delayed policy actions (a policy's `timeout`) waiting for their time, in the shape
    # portal.jobs.delays keeps them; policy_due_at is the earliest one's (None: none waits).
    policy_delays = models.JSONField(default=list, blank=True)
    policy_due_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # Each failed start of its pods, the last 20 (portal.jobs.backoff.Attempt): {"at", "kind",
    # "node", "pod", "words", "quota"}; every backoff of the job is derived from it.
    start_attempts = models.JSONField(default=list, blank=True)
    # Volcano's ttlSecondsAfterFinished: the finished job's pods and objects are deleted this
    # long after it ends (None: after FINISHED_POD_RETENTION_SECONDS from each pod's end).
    ttl_seconds_after_finished = models.PositiveIntegerField(null=True, blank=True)
    # What its objects' names start with, `gp-<instance tag>` (jobspec.labels.object_prefix),
    # given at submission; empty for a job from before names carried the instance, which
    # keeps the names it started with, `gp-<job id>`.
    object_prefix = models.CharField(max_length=16, blank=True, default="", editable=False)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["queue", "status"], name="job_queue_status_idx"),
            # The job list's default order, unfiltered and filtered by status (index scans
            # instead of sorting every matching row).
            models.Index(fields=["-submitted_at", "-id"], name="job_submitted_id_idx"),
            models.Index(
                fields=["status", "-submitted_at", "-id"], name="job_status_submitted_idx"
            ),
            # Pending wait-time quartiles per queue (dashboard) from the index alone.
            models.Index(
                fields=["status", "queue", "submitted_at"], name="job_status_queue_sub_idx"
            ),
            # The job list's "never runnable" filter, in its default order.
            models.Index(
                fields=["pending_kind", "-submitted_at", "-id"], name="job_pending_kind_sub_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.queue.name})"

    @property
    def object_name(self) -> str:
        """Its owner object's name, and the start of its other objects' and pods' names."""
        return job_object_name(self.pk, self.object_prefix)

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL_STATUSES

    @property
    def total_replicas(self) -> int:
        return sum(task.replicas for task in self.tasks.all())

    @cached_property
    def gpu_ask(self) -> GpuAsk:
        """What the job asks of GPUs in all, as the pages, the API and the CLI show it
        (jobspec.gpushare.GpuAsk: a GPU-memory request at the cycle's cost, and what it
        asked). Lists set it for all their jobs with one read (selectors.job_gpu_asks)."""
        from .selectors import card_memory_for

        tasks = list(self.tasks.all())
        return gpu_ask(tasks, card_memory_for(tasks))


class JobTask(models.Model):
    """One role of a job (master, worker, ...): `replicas` identical pods."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="tasks")
    name = models.CharField(max_length=NAME_MAX_CHARS, validators=[validate_dns_label])
    replicas = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    image = models.CharField(max_length=IMAGE_MAX_CHARS, validators=[validate_image])
    command = models.JSONField(default=list, blank=True, validators=[validate_str_list])
    env = models.JSONField(
        default=dict, blank=True, validators=[validate_str_dict, validate_env_names]
    )
    # Whole GPUs per pod, or a share of one device (jobspec.gpushare): thousandths of its
    # compute and/or MiB of its memory. Never both; jobspec.limits says why not.
    gpus = models.PositiveIntegerField(default=0)
    gpu_milli = models.PositiveIntegerField(default=0)
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    cpu_millis = models.PositiveBigIntegerField(default=TASK_DEFAULT_CPU_MILLIS)
    memory_bytes = models.PositiveBigIntegerField(default=TASK_DEFAULT_MEMORY_BYTES)
    node_selector = models.JSONField(
        default=dict, blank=True, validators=[validate_str_dict, validate_node_selector]
    )
    # Kubernetes tolerations of the task's pods (items with the API's field names).
    tolerations = models.JSONField(default=list, blank=True, validators=[validate_tolerations])
    # The task's pod template (jobspec.podtemplate, normalised; `valueFrom` stays a
    # reference). Empty: the pod is built from the fields above, one container. When set, the
    # fields above summarise it (first container's image and command, the pod's resources as
    # the kubelet sums them) for the scheduler and the pages; the pod is built from it.
    pod_template = models.JSONField(default=dict, blank=True, validators=[validate_dict])
    # The task's own lifecycle policies (jobspec.policies), consulted before the job's.
    policies = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["job_id", "id"]
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="uniq_jobtask_job_name")
        ]

    def __str__(self) -> str:
        return f"{self.job.name}/{self.name} x{self.replicas}"

    @property
    def gpus_requested(self) -> int | float:
        """GPUs per pod as the request says them: 2, or 0.25 for a share of one device (a
        GPU-memory request is in gpu_memory_mib)."""
        return gpus_number(milli_asked(self))

    @cached_property
    def gpu_ask(self) -> GpuAsk:
        """What one pod asks of GPUs, as Job.gpu_ask counts it."""
        from .selectors import card_memory_for

        return pod_gpu_ask(self, card_memory_for([self]))

    @property
    def gpu_request_text(self) -> str:
        return request_text(
            gpus=self.gpus, gpu_milli=self.gpu_milli, gpu_memory_mib=self.gpu_memory_mib
        )


class TenantPodDelta(models.Model):
    """Changes to a tenant's pending pods, written by the database itself (triggers on jobs,
    tasks and placements: portal/jobs/pod_count.py), never by Python: every writer of a job's
    status, a task's replicas or a placement's state is counted, bulk and raw SQL included.
    A tenant's pending pods are max(0, sum(replicas) - sum(placed)) of its rows; the cycle
    folds them into one row per tenant (`tenant_pod_deltas_fold`), so reading them costs what
    changed since, not the length of the tenant's queue."""

    # No constraint: a tenant's delta rows must not hold back its deletion (its jobs go first,
    # and their triggers append rows for it); the fold drops a deleted tenant's rows.
    tenant = models.ForeignKey(
        Tenant, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    # Replicas of the tenant's jobs the scheduler still schedules (portal.jobs.lifecycle
    # SCHEDULED), and how many of those hold a placement (active or succeeded).
    replicas = models.BigIntegerField(default=0)
    placed = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"tenant {self.tenant_id}: {self.replicas:+} replicas, {self.placed:+} placed"


class StartEstimate(models.Model):
    """When a pending job is estimated to start, from the last plan-ahead run (a forward
    simulation of the scheduler on a copy of the cycle's snapshot, scheduler.core.plan).

    One row per job pending in that snapshot; each run rewrites them all
    (portal.jobs.estimates.start_estimates_record, their only writer). ``likely`` is null when
    only a range can be said (a run time nobody could estimate comes first); ``latest`` is
    null when even the latest case does not start the job before ``until``."""

    class Outlook(models.TextChoices):
        # The values of scheduler.core.plan.Outlook.
        STARTS = "starts", "Starts within the horizon"
        LATER = "later", "Not within the horizon"
        NEVER = "never", "Can never run as submitted"

    job = models.OneToOneField(
        Job, on_delete=models.CASCADE, primary_key=True, related_name="start_estimate"
    )
    outlook = models.CharField(max_length=8, choices=Outlook.choices)
    earliest = models.DateTimeField(null=True, blank=True)
    likely = models.DateTimeField(null=True, blank=True)
    latest = models.DateTimeField(null=True, blank=True)
    # How far the plan looked (the snapshot's time plus the horizon, unless its cost bound
    # stopped it sooner): "not within" is said up to this time.
    until = models.DateTimeField()
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.job_id}: {self.outlook}"
