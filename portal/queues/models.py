import sys
from array import array
from collections.abc import Iterable

from django.conf import settings
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

    class Meta:
        ordering = ["tenant__name", "name"]

    def __str__(self) -> str:
        return self.name


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
