from django.conf import settings
from django.db import models
from django.utils import timezone

from jobspec.podsecurity import BASELINE, PRIVILEGED, RESTRICTED
from portal.common.models import BaseModel
from portal.common.validators import validate_dns_label
from portal.jobs.validators import validate_priority_class_names, validate_tolerations

from .quota import QuotaChangeFields, QuotaFields
from .runtime_limits import RUNTIME_LIMIT_VALIDATORS


class ClusterAllowances(models.Model):
    """What a site admin lets a tenant's (or a queue's) jobs do on the cluster beyond the
    default (jobspec.tenancy): taints they may tolerate, priority classes they may use. Both
    lists add to each other: a queue's job may use the tenant's and the queue's."""

    # Kubernetes tolerations (the API's field names) that cover what a job may tolerate,
    # beyond the GPU resource names' NoSchedule taints. `{"operator": "Exists"}`: any taint.
    allowed_tolerations = models.JSONField(
        default=list, blank=True, validators=[validate_tolerations]
    )
    # PriorityClass names; empty: any but system-*.
    allowed_priority_classes = models.JSONField(
        default=list, blank=True, validators=[validate_priority_class_names]
    )

    class Meta:
        abstract = True


class Tenant(QuotaFields, ClusterAllowances, BaseModel):
    """A team that owns queues: its quota is set by site admins and split among its queues by
    its leads. Members are researchers or leads."""

    class SecurityLevel(models.TextChoices):
        """Kubernetes Pod Security Standards levels (jobspec.podsecurity)."""

        BASELINE = BASELINE, "baseline"
        RESTRICTED = RESTRICTED, "restricted"
        PRIVILEGED = PRIVILEGED, "privileged"

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    display_name = models.CharField(max_length=200, blank=True)
    # The queue a member's Volcano manifest without spec.queue goes to, unless their
    # membership names their own (portal.queues.selectors.queue_default); a lead sets it.
    default_queue = models.ForeignKey(
        "queues.Queue", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # What its jobs' pods may do to their node: checked at submit, and by the namespace's
    # pod-security.kubernetes.io/enforce label. Set by site admins.
    security_level = models.CharField(
        max_length=16, choices=SecurityLevel.choices, default=SecurityLevel.BASELINE
    )
    # Set by site admins: no queue of the tenant lets a job run longer (empty: no maximum).
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=RUNTIME_LIMIT_VALIDATORS
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.display_name or self.name


class Membership(BaseModel):
    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        LEAD = "lead", "Lead"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.RESEARCHER)
    # This member's default queue (one of the tenant's), before the tenant's own; a lead sets it.
    default_queue = models.ForeignKey(
        "queues.Queue", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["tenant__name", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "tenant"], name="uniq_membership_user_tenant")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.tenant.name} ({self.role})"


class TenantChange(QuotaChangeFields):
    """Audit row: one changed quota field of a tenant, written by `tenant_update`."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="tenant_changes",
    )

    class Meta(QuotaChangeFields.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.tenant.name}.{self.field}: {self.old_value} -> {self.new_value}"


class TenantUsageSample(models.Model):
    """A tenant's share at one instant, as the cycle computed it: its deserved GPUs (the part
    of the cluster the hierarchical proportion gave it) next to what it held. Written with the
    queues' usage samples, so use can later be split into within-share and borrowed."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="usage_samples")
    at = models.DateTimeField(default=timezone.now)
    gpus_allocated = models.FloatField(default=0)  # shares of a card count their fraction
    gpus_deserved = models.FloatField(default=0)
    cpu_millis_allocated = models.PositiveBigIntegerField(default=0)
    cpu_millis_deserved = models.FloatField(default=0)
    memory_bytes_allocated = models.PositiveBigIntegerField(default=0)
    memory_bytes_deserved = models.FloatField(default=0)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["tenant", "at"], name="tenant_usage_tenant_at_idx")]

    def __str__(self) -> str:
        return f"{self.tenant.name} at {self.at:%Y-%m-%d %H:%M:%S}"
