"""The usage ledger: what each tenant, queue and user consumed per month, kept forever.

Credited by every scheduling cycle as it persists (scheduler/adapters/ledger.py), never
recomputed from samples or placements and never pruned (portal/ops/retention.py names the
tables it prunes; this is not one of them), so a month's figures stay what they were.
Amounts are integers: GPU use in milli-GPU-seconds (1000 = one GPU for one second, so
fractional GPUs count exactly), CPU in millicore-seconds.
"""

from datetime import date

from django.conf import settings
from django.db import models

from portal.queues.models import Queue
from portal.tenants.models import Tenant

MILLI_PER_UNIT = 1000
SECONDS_PER_HOUR = 3600


class LedgerEntry(models.Model):
    """One tenant/queue/user's use in one UTC month; a cycle adds to it (and the demo seed
    books its past once, by the same rules), nothing else writes."""

    month = models.DateField(help_text="First day of the UTC month")
    # PROTECT: a permanent record keeps what it names; jobs already protect these rows.
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+")
    queue = models.ForeignKey(Queue, on_delete=models.PROTECT, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    gpu_milli_seconds_within = models.PositiveBigIntegerField(default=0)
    gpu_milli_seconds_borrowed = models.PositiveBigIntegerField(default=0)
    cpu_milli_seconds_within = models.PositiveBigIntegerField(default=0)
    cpu_milli_seconds_borrowed = models.PositiveBigIntegerField(default=0)
    # Work thrown away by evictions: each evicted placement from its start to its eviction.
    # Part of the use above, not in addition to it.
    gpu_milli_seconds_lost = models.PositiveBigIntegerField(default=0)
    cpu_milli_seconds_lost = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    AMOUNTS = (
        "gpu_milli_seconds_within",
        "gpu_milli_seconds_borrowed",
        "cpu_milli_seconds_within",
        "cpu_milli_seconds_borrowed",
        "gpu_milli_seconds_lost",
        "cpu_milli_seconds_lost",
    )

    class Meta:
        ordering = ["month", "tenant_id", "queue_id", "user_id"]
        constraints = [
            models.UniqueConstraint(
                fields=["month", "queue", "user"], name="uniq_ledger_month_queue_user"
            )
        ]
        indexes = [models.Index(fields=["month", "tenant"], name="ledger_month_tenant_idx")]

    def __str__(self) -> str:
        return f"{self.month:%Y-%m} {self.queue_id}/{self.user_id}"


class LedgerClock(models.Model):
    """How far the ledger has booked: one row. Every active placement is booked up to
    `booked_until`; the next cycle books from there to its own time."""

    booked_until = models.DateTimeField()

    def __str__(self) -> str:
        return f"booked until {self.booked_until:%Y-%m-%d %H:%M:%S}"


def month_start(day: date) -> date:
    return day.replace(day=1)
