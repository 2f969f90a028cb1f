from datetime import datetime

from django.core.validators import MinValueValidator
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Greatest
from django.utils import timezone

from jobspec.gpushare import MILLI_PER_GPU, gpus_number, held_text
from portal.common.models import BaseModel
from portal.common.validators import validate_str_dict, validate_str_list
from portal.jobs.models import Job, JobTask

DEFAULT_GPU_RESOURCE_NAME = "nvidia.com/gpu"
# The node label the scheduler reads a node's GPU model from, and job forms select a model by.
GPU_MODEL_LABEL = "gpu-model"


NOTICE_GIVEN = "notice given {given:%H:%M:%S}, deadline {deadline:%H:%M:%S}"
NOTICE_ENDED = ", {end} {at:%H:%M:%S}"


def whole_second(at: datetime) -> datetime:
    return at.replace(microsecond=0)


def whole_seconds_now() -> datetime:
    return whole_second(timezone.now())


class Node(BaseModel):
    """A cluster node's inventory, from the YAML file (simulated) or the Kubernetes API."""

    name = models.CharField(max_length=253, unique=True)
    gpu_resource_name = models.CharField(max_length=253, default=DEFAULT_GPU_RESOURCE_NAME)
    gpu_count = models.PositiveIntegerField(default=0)
    gpu_model = models.CharField(max_length=100, blank=True)
    # Memory of each GPU device (MiB; 0: not reported) and the devices' UUIDs by index (empty:
    # not reported), for shared GPUs: a memory request's cost and the sharing annotations.
    gpu_memory_mib = models.PositiveIntegerField(default=0)
    gpu_uuids = models.JSONField(default=list, blank=True, validators=[validate_str_list])
    cpu_millis = models.PositiveBigIntegerField(default=0)
    memory_bytes = models.PositiveBigIntegerField(default=0)
    labels = models.JSONField(default=dict, blank=True, validators=[validate_str_dict])
    topology_labels = models.JSONField(default=dict, blank=True, validators=[validate_str_dict])
    schedulable = models.BooleanField(default=True)
    pods_capacity = models.PositiveIntegerField(default=110)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # What the Kubernetes API reports beyond the inventory (the simulated cluster keeps the
    # defaults): taints as {key, value, effect} items, the kubelet's Ready condition, whether
    # the node still exists, and what pods the portal does not own request on it.
    taints = models.JSONField(default=list, blank=True)
    ready = models.BooleanField(default=True)
    in_cluster = models.BooleanField(default=True)
    used_by_others = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Placement(BaseModel):
    """The scheduler's decision: replica `replica` of `task` runs as `pod_name` on a node."""

    class State(models.TextChoices):
        BOUND = "bound", "Bound"
        RUNNING = "running", "Running"
        RELEASING = "releasing", "Releasing"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        DELETED = "deleted", "Deleted"

    class NoticeEnd(models.TextChoices):
        """How a pod under a preemption notice ended (docs/design/preemption-notice.md)."""

        ITSELF = "itself", "ended by itself"
        DEADLINE = "deadline", "deleted at the deadline"
        EARLY = "early", "deleted before the deadline"

    ACTIVE_STATES = (State.BOUND, State.RUNNING, State.RELEASING)
    ENDED_STATES = (State.SUCCEEDED, State.FAILED, State.DELETED)

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="placements")
    task = models.ForeignKey(JobTask, on_delete=models.CASCADE, related_name="placements")
    replica = models.PositiveIntegerField()
    node = models.ForeignKey(
        Node, on_delete=models.SET_NULL, null=True, blank=True, related_name="placements"
    )
    node_name = models.CharField(max_length=253)
    pod_name = models.CharField(max_length=253, unique=True)
    # The namespace the pod was made in (portal.cluster.namespaces); blank on placements from
    # before it was stored, which were all made in KUBERNETES_NAMESPACE.
    namespace = models.CharField(max_length=63, blank=True, default="")
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.BOUND, db_index=True
    )
    gpus = models.PositiveIntegerField(default=0)  # whole GPUs (0 for a share of one)
    # What the pod holds: milli-GPU in all (1000 per whole GPU; a share costs its fraction)
    # and the device indices on its node (empty: not known, e.g. before devices existed).
    gpu_milli = models.PositiveIntegerField(default=0)
    gpu_devices = models.JSONField(default=list, blank=True)
    # Whole seconds, so that the usage ledger's integer amounts add up to these durations
    # exactly. Held from the bind (the node's GPUs are reserved from then on) until the
    # placement leaves the active states.
    started_at = models.DateTimeField(default=whole_seconds_now)
    ended_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # How the pod ended, as observed before it was deleted (kept after it is): its main
    # container's exit code and the reason (OOMKilled, Error, Evicted, Completed, ...).
    exit_code = models.IntegerField(null=True, blank=True)
    exit_reason = models.CharField(max_length=128, blank=True, default="")
    # The preemption notice (its queue's preemption_notice_seconds): when the pod was told,
    # the instant it is deleted at (its portal.gpu/preemption-deadline annotation), and how
    # it ended, as observed. Stored, so a restarted worker keeps the same deadline.
    notice_given_at = models.DateTimeField(null=True, blank=True)
    notice_deadline = models.DateTimeField(null=True, blank=True)
    notice_ended_at = models.DateTimeField(null=True, blank=True)
    notice_end = models.CharField(max_length=16, choices=NoticeEnd.choices, blank=True, default="")

    class Meta:
        ordering = ["job_id", "task_id", "replica", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["task", "replica"],
                condition=Q(state__in=["bound", "running", "releasing"]),
                name="uniq_active_placement_task_replica",
                violation_error_message="This task replica already has an active placement.",
            )
        ]
        indexes = [models.Index(fields=["node_name", "state"], name="placement_node_state_idx")]

    def __str__(self) -> str:
        return f"{self.pod_name} on {self.node_name} ({self.state})"

    @property
    def milli_held(self) -> int:
        """Milli-GPU the pod holds (a row from before fractions has only `gpus`)."""
        return max(self.gpu_milli, self.gpus * MILLI_PER_GPU)

    @property
    def gpus_held(self) -> int | float:
        return gpus_number(self.milli_held)

    @property
    def gpus_held_text(self) -> str:
        """ "0.25 of GPU 3", "2 on GPUs 0, 1": what the job page shows."""
        return held_text(self.milli_held, self.gpu_devices or ())

    @property
    def notice_text(self) -> str:
        """ "notice given 12:00:00, deadline 12:05:00, ended by itself 12:03:10" (UTC), from
        the stored notice; "" for a pod deleted without one."""
        if self.notice_deadline is None or self.notice_given_at is None:
            return ""
        text = NOTICE_GIVEN.format(given=self.notice_given_at, deadline=self.notice_deadline)
        if self.notice_end and self.notice_ended_at is not None:
            end = self.NoticeEnd(self.notice_end).label
            text += NOTICE_ENDED.format(end=end, at=self.notice_ended_at)
        return text

    @property
    def exit_text(self) -> str:
        """ "exit code 137 (OOMKilled)", "Evicted", or "" while the pod has not ended."""
        code = "" if self.exit_code is None else f"exit code {self.exit_code}"
        if code and self.exit_reason:
            return f"{code} ({self.exit_reason})"
        return code or self.exit_reason


def placement_milli(prefix: str = "") -> Greatest:
    """The milli-GPU a placement holds, as a query expression (`prefix`: the relation path
    to the placement, e.g. "placements__"); see Placement.milli_held."""
    return Greatest(F(f"{prefix}gpu_milli"), F(f"{prefix}gpus") * MILLI_PER_GPU)


class SimulatedPod(models.Model):
    """A pod of the simulated cluster backend (what a kubelet would report)."""

    class Phase(models.TextChoices):
        PENDING = "Pending", "Pending"
        RUNNING = "Running", "Running"
        SUCCEEDED = "Succeeded", "Succeeded"
        FAILED = "Failed", "Failed"

    name = models.CharField(max_length=253, unique=True)
    namespace = models.CharField(max_length=63, default="gpu-jobs")
    node_name = models.CharField(max_length=253, blank=True, db_index=True)
    labels = models.JSONField(default=dict, blank=True)
    annotations = models.JSONField(default=dict, blank=True)
    requests = models.JSONField(default=dict, blank=True)
    phase = models.CharField(max_length=16, choices=Phase.choices, default=Phase.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    run_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=[MinValueValidator(0)]
    )
    # When a pod whose deletion was requested disappears (end of its grace period).
    delete_after = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # What the kubelet would say of a failed pod (OOMKilled, Evicted); empty: Error.
    reason = models.CharField(max_length=128, blank=True, default="")
    # The pod's body as the Kubernetes backend would send it (containers with their env,
    # volumes, host names: jobspec/podspec.py), so what a job's pods would
    # run with can be seen without a cluster.
    spec = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} ({self.phase})"
