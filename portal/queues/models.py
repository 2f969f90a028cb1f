import sys
from array import array
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from portal.common.models import BaseModel
from portal.common.validators import validate_dns_label
from portal.tenants.models import ClusterAllowances, Tenant
from portal.tenants.quota import (  # noqa: F401 - the queue's names for the shared rules
    GUARANTEE_ABOVE_CAPABILITY,
    RESOURCES,
    WEIGHT_MAX,
    WEIGHT_MIN,
    QuotaChangeFields,
    QuotaFields,
)
from portal.tenants.runtime_limits import (
    ABOVE_TENANT_MAXIMUM,
    MIN_ABOVE_MAX,
    MIN_RUNTIME_VALIDATORS,
    NOTICE_VALIDATORS,
    RUNTIME_LIMIT_VALIDATORS,
    effective_limit,
)


class Queue(QuotaFields, ClusterAllowances, BaseModel):
    """A tenant's share of the cluster (Volcano proportion semantics + a borrowing limit), split
    from its tenant's quota by the tenant's leads."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed"

    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="queues")
    name = models.CharField(max_length=63, unique=True, validators=[validate_dns_label])
    priority = models.IntegerField(default=0)
    state = models.CharField(max_length=10, choices=State.choices, default=State.OPEN)
    # Run-time limits and preemption timings (portal.tenants.runtime_limits): the longest a
    # job may run (empty: the tenant's maximum), how long a pod runs before it may be preempted
    # or reclaimed, and the notice a victim gets before its pods are deleted.
    max_runtime_seconds = models.PositiveIntegerField(
        null=True, blank=True, validators=RUNTIME_LIMIT_VALIDATORS
    )
    min_runtime_seconds = models.PositiveIntegerField(default=0, validators=MIN_RUNTIME_VALIDATORS)
    preemption_notice_seconds = models.PositiveIntegerField(default=0, validators=NOTICE_VALIDATORS)

    class Meta:
        ordering = ["tenant__name", "name"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors: dict[str, str] = {}
        try:
            super().clean()
        except ValidationError as error:
            errors.update({k: "; ".join(v) for k, v in error.message_dict.items()})
        tenant_max = self.tenant.max_runtime_seconds if self.tenant_id else None
        limit = self.max_runtime_seconds
        if tenant_max is not None and limit is not None and limit > tenant_max:
            errors["max_runtime_seconds"] = ABOVE_TENANT_MAXIMUM.format(limit=tenant_max)
        ceiling = self.runtime_limit
        if ceiling is not None and self.min_runtime_seconds > ceiling:
            errors["min_runtime_seconds"] = MIN_ABOVE_MAX.format(limit=ceiling)
        if errors:
            raise ValidationError(errors)

    @property
    def runtime_limit(self) -> int | None:
        """The longest a job of this queue may run: its own limit within the tenant's."""
        tenant_max = self.tenant.max_runtime_seconds if self.tenant_id else None
        return effective_limit(self.max_runtime_seconds, tenant_max)


class QueueChange(QuotaChangeFields):
    """Audit row: one changed field of a queue, written by `queue_update`."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="queue_changes",
    )

    class Meta(QuotaChangeFields.Meta):
        pass

    def __str__(self) -> str:
        return f"{self.queue.name}.{self.field}: {self.old_value} -> {self.new_value}"


class QueueOrder(models.Model):
    """The order the last scheduling cycle put a queue's waiting jobs in, first first: the line
    a job's position and its reason's "N jobs come first" count in.

    One row per queue, the job ids packed as 8-byte little-endian integers (a 100,000-job line
    is one 800 kB value, not 100,000 rows), rewritten only when ``digest`` says it changed
    (portal.queues.services.queue_orders_record, its only writer)."""

    queue = models.OneToOneField(
        Queue, on_delete=models.CASCADE, primary_key=True, related_name="order"
    )
    job_ids = models.BinaryField()
    digest = models.CharField(max_length=32)
    recorded_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.queue_id}: {len(self.job_ids) // 8} jobs waiting"

    @staticmethod
    def pack(job_ids: Iterable[int]) -> bytes:
        packed = array("q", job_ids)
        if sys.byteorder == "big":
            packed.byteswap()
        return packed.tobytes()

    @staticmethod
    def unpack(data: bytes | memoryview) -> "array[int]":
        ids = array("q")
        ids.frombytes(bytes(data))
        if sys.byteorder == "big":
            ids.byteswap()
        return ids
