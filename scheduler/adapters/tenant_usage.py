"""Each tenant's share as the cycle computed it, written next to the queues' usage samples.

Under a hierarchical proportion the core reports every tenant as a parent queue
(``tenant <name>``) with its deserved share and allocation; a flat conf reports none, and then
nothing is written. Kept per tenant and instant so that use can later be split into what was
within the tenant's share and what was borrowed.
"""

from __future__ import annotations

import math
from datetime import datetime

from jobspec.gpushare import gpus_sample
from scheduler.adapters.portal_port import TenantUsageSample, tenant_node_name
from scheduler.adapters.snapshot import SnapshotBundle
from scheduler.core.types import CycleResult

BATCH = 1000


def tenant_usage_persist(*, bundle: SnapshotBundle, result: CycleResult, now: datetime) -> None:
    tenants = {tenant_node_name(q.tenant.name): q.tenant for q in bundle.index.queues.values()}
    samples = []
    for name, tenant in sorted(tenants.items()):
        share = result.queues.get(name)
        if share is None:
            continue
        samples.append(
            TenantUsageSample(
                tenant=tenant,
                at=now,
                gpus_allocated=gpus_sample(share.allocated.get("gpu")),
                gpus_deserved=_finite(share.deserved.get("gpu")),
                cpu_millis_allocated=int(share.allocated.get("cpu")),
                cpu_millis_deserved=_finite(share.deserved.get("cpu")),
                memory_bytes_allocated=int(share.allocated.get("memory")),
                memory_bytes_deserved=_finite(share.deserved.get("memory")),
            )
        )
    TenantUsageSample.objects.bulk_create(samples, batch_size=BATCH)


def _finite(value: float) -> float:
    return value if math.isfinite(value) else 0.0
