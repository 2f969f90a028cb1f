from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from portal.common.models import BaseModel
from portal.common.validators import validate_dns_label
from portal.tenants.models import Tenant

WEIGHT_MIN = 1
WEIGHT_MAX = 65535

# Resource suffixes a queue limits. Each has guarantee_, capability_ and borrowing_limit_.
RESOURCES = ("gpus", "cpu_millis", "memory_bytes")
RESOURCE_UNITS = {"gpus": "GPUs", "cpu_millis": "millicores", "memory_bytes": "bytes"}

GUARANTEE_ABOVE_CAPABILITY = "guarantee ({guarantee}) may not exceed capability ({capability})"


class Queue(BaseModel):
    """A tenant's share of the cluster (Volcano proportion semantics + a borrowing limit)."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="queues")
    name = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    weight = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(WEIGHT_MIN), MaxValueValidator(WEIGHT_MAX)]
    )
    guarantee_gpus = models.PositiveIntegerField(default=0)
    guarantee_cpu_millis = models.PositiveBigIntegerField(default=0)
    guarantee_memory_bytes = models.PositiveBigIntegerField(default=0)
    # Empty capability / borrowing limit means unlimited.
    capability_gpus = models.PositiveIntegerField(null=True, blank=True)
    capability_cpu_millis = models.PositiveBigIntegerField(null=True, blank=True)
    capability_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    borrowing_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    borrowing_limit_cpu_millis = models.PositiveBigIntegerField(null=True, blank=True)
    borrowing_limit_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    reclaimable = models.BooleanField(default=True)
    priority = models.IntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)

    class Meta:
        ordering = ["tenant__name", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for resource in RESOURCES:
            guarantee = getattr(self, f"guarantee_{resource}")
            capability = getattr(self, f"capability_{resource}")
            if guarantee is None or capability is None:
                continue
            if guarantee > capability:
                errors[f"guarantee_{resource}"] = GUARANTEE_ABOVE_CAPABILITY.format(
                    guarantee=guarantee, capability=capability
                )
        if errors:
            raise ValidationError(errors)


class QueueChange(models.Model):
    """Audit row: one changed field of a queue, written by `queue_update`."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="queue_changes",
    )
    changed_at = models.DateTimeField(default=timezone.now, db_index=True)
    field = models.CharField(max_length=64)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        return f"{self.queue.name}.{self.field}: {self.old_value} -> {self.new_value}"
