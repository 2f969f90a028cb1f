from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from jobspec.gpushare import MILLI_PER_GPU, gpus_number, held_text
from portal.jobs.models import Job
from portal.queues.models import Queue
from portal.tenants.models import Tenant


class SchedulerConfig(models.Model):
    """A version of the Volcano-format scheduler conf. Exactly one version is active."""

    version = models.PositiveIntegerField(unique=True)
    text = models.TextField()
    active = models.BooleanField(default=False)
    comment = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="scheduler_configs",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["active"],
                condition=Q(active=True),
                name="uniq_active_scheduler_config",
                violation_error_message="Another scheduler config is already active.",
            )
        ]

    def __str__(self) -> str:
        return f"v{self.version}{' (active)' if self.active else ''}"


class CycleRun(models.Model):
    """One scheduling cycle: timings and counts."""

    started_at = models.DateTimeField(default=timezone.now, db_index=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    snapshot_ms = models.FloatField(null=True, blank=True)
    core_ms = models.FloatField(null=True, blank=True)
    persist_ms = models.FloatField(null=True, blank=True)
    reconcile_ms = models.FloatField(null=True, blank=True)
    binds = models.PositiveIntegerField(default=0)
    evictions = models.PositiveIntegerField(default=0)
    pending_jobs = models.PositiveIntegerField(default=0)
    # The rescheduling plugin was due in this cycle: the next snapshot's last_rescheduling.
    rescheduling_ran = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            # The latest cycle that ran rescheduling, read by every snapshot.
            models.Index(
                fields=["-id"], condition=Q(rescheduling_ran=True), name="cyclerun_resched_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"cycle {self.pk} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class PreemptionEvent(models.Model):
    """One eviction: who lost which GPUs, to whom, why."""

    class Action(models.TextChoices):
        PREEMPT = "preempt", "Preempt"
        RECLAIM = "reclaim", "Reclaim"
        RESCHEDULING = "rescheduling", "Rescheduling"
        ADMIN = "admin", "Admin"

    victim_job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="preemptions")
    victim_task_name = models.CharField(max_length=63)
    victim_queue = models.ForeignKey(
        Queue, on_delete=models.CASCADE, related_name="preemptions_suffered"
    )
    victim_tenant = models.ForeignKey(
        Tenant, on_delete=models.CASCADE, related_name="preemptions_suffered"
    )
    node_name = models.CharField(max_length=253)
    preemptor_job = models.ForeignKey(
        Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="preemptions_caused"
    )
    preemptor_queue = models.ForeignKey(
        Queue,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="preemptions_caused",
    )
    action = models.CharField(max_length=16, choices=Action.choices)
    gpus_freed = models.PositiveIntegerField(default=0)  # whole GPUs
    # What the victim held: milli-GPU (a share of a card counts its fraction) and the card
    # indices on the node (empty: not known).
    gpu_milli_freed = models.PositiveIntegerField(default=0)
    gpu_devices = models.JSONField(default=list, blank=True)
    cycle = models.ForeignKey(
        CycleRun, on_delete=models.SET_NULL, null=True, blank=True, related_name="preemptions"
    )
    occurred_at = models.DateTimeField(default=timezone.now)
    sentence = models.TextField(blank=True)
    # The victim's placement: its preemption notice, and how the pod ended under it.
    placement = models.ForeignKey(
        "cluster.Placement",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="preemptions",
    )

    class Meta:
        ordering = ["-occurred_at", "-id"]
        indexes = [
            models.Index(fields=["occurred_at"], name="preemption_occurred_idx"),
            models.Index(fields=["action"], name="preemption_action_idx"),
            models.Index(fields=["victim_queue"], name="preemption_victim_queue_idx"),
            # The history's order, unfiltered and filtered by action.
            models.Index(fields=["-occurred_at", "-id"], name="preemption_occurred_id_idx"),
            models.Index(
                fields=["action", "-occurred_at", "-id"], name="preemption_action_occ_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.victim_job.name}/{self.victim_task_name} on {self.node_name}"

    @property
    def notice_text(self) -> str:
        """The victim's preemption notice and how its pod ended ("" without one)."""
        return self.placement.notice_text if self.placement is not None else ""

    @property
    def gpus_freed_number(self) -> int | float:
        """GPUs the victim held: 2, or 0.25 for a share of a card."""
        return gpus_number(max(self.gpu_milli_freed, self.gpus_freed * MILLI_PER_GPU))

    @property
    def gpus_freed_text(self) -> str:
        """ "0.25 of GPU 3", "8 on GPUs 0, 1, ...": what the pages show."""
        milli = max(self.gpu_milli_freed, self.gpus_freed * MILLI_PER_GPU)
        return held_text(milli, self.gpu_devices or ())


class QueueUsageSample(models.Model):
    """Per-queue resource use at one instant (for the dashboards)."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="usage_samples")
    at = models.DateTimeField(default=timezone.now)
    # GPUs in cards; a share of a card counts its fraction (milli-GPU / 1000, exact to 3
    # decimals).
    gpus_allocated = models.FloatField(default=0)
    gpus_deserved = models.FloatField(default=0)
    gpus_pending = models.FloatField(default=0)
    cpu_millis_allocated = models.PositiveBigIntegerField(default=0)
    memory_bytes_allocated = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["queue", "at"], name="usage_queue_at_idx"),
            # Dashboard time ranges over all queues; PostgreSQL answers them from the index
            # alone (the include is ignored elsewhere).
            models.Index(fields=["at"], name="usage_at_idx", include=["queue", "gpus_allocated"]),
        ]

    def __str__(self) -> str:
        return f"{self.queue.name} at {self.at:%Y-%m-%d %H:%M:%S}"


class QueueUsageRollup(models.Model):
    """Usage samples of one queue aggregated per hour or day (read by the dashboards' longer
    ranges instead of the minute samples). Maintained when samples are written
    (`scheduler.adapters.persist`) and rebuilt by `manage.py usage_rollup_rebuild`."""

    class Resolution(models.TextChoices):
        HOUR = "hour", "Hour"
        DAY = "day", "Day"

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="usage_rollups")
    resolution = models.CharField(max_length=4, choices=Resolution.choices)
    bucket = models.DateTimeField()
    gpus_allocated_avg = models.FloatField(default=0)
    gpus_allocated_max = models.FloatField(default=0)
    gpus_deserved_avg = models.FloatField(default=0)
    gpus_pending_avg = models.FloatField(default=0)
    samples = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["resolution", "bucket", "queue_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "resolution", "bucket"], name="uniq_usage_rollup_bucket"
            )
        ]
        indexes = [
            models.Index(fields=["resolution", "bucket"], name="usage_rollup_res_bucket_idx")
        ]

    def __str__(self) -> str:
        return f"{self.queue.name} {self.resolution} {self.bucket:%Y-%m-%d %H:%M}"
