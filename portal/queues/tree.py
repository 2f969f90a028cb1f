"""The quota tree as the scheduler core sees it: every queue, and under a hierarchical
proportion (the shipped conf) each tenant as the parent queue of its queues.

One mapping for the scheduling cycle's snapshot (scheduler.adapters.snapshot) and the edit
pages' preview (portal.queues.preview): what the preview shows is what the cycle computes.
"""

from collections.abc import Iterable
from typing import Any

from portal.tenants.models import Tenant
from portal.tenants.quota import QUOTA_FIELDS, quota_info, tenant_node_name
from scheduler.core.config import SchedulerConf
from scheduler.core.types import QueueInfo

from .models import Queue

QUEUE_FIELDS = (*QUOTA_FIELDS, "priority", "state")
TREE_PLUGIN = "proportion"


def wants_tree(conf: SchedulerConf) -> bool:
    """Does the conf divide tenants' shares among their queues (proportion, enableHierarchy)?
    Other confs see the queues alone, as before tenants had quotas."""
    option = conf.plugin(TREE_PLUGIN)
    return option is not None and option.enabled("enableHierarchy")


def tree_queue_infos(
    queues: Iterable[Queue],
    *,
    tree: bool,
    tenants: Iterable[Tenant] = (),
    edits: dict[tuple[str, int], dict[str, Any]] | None = None,
    usage: dict[int, tuple] | None = None,
) -> tuple[QueueInfo, ...]:
    """QueueInfos for ``queues`` (their tenant loaded) and, with ``tree``, their tenants plus
    any of ``tenants``. ``edits`` swaps in proposed values: ("queue" | "tenant", pk) -> fields.
    ``usage``: queue id -> its past use (UsageRecords), for the fairshare plugin."""
    edits = edits or {}
    usage = usage or {}
    parents: dict[int, Tenant] = {tenant.pk: tenant for tenant in tenants}
    infos = []
    for queue in queues:
        values = _values(queue, QUEUE_FIELDS, edits.get(("queue", queue.pk)))
        parents.setdefault(queue.tenant_id, queue.tenant)
        infos.append(
            quota_info(
                values,
                name=queue.name,
                parent=tenant_node_name(queue.tenant.name) if tree else None,
                priority=values["priority"],
                state="Open" if values["state"] == Queue.State.OPEN else "Closed",
                usage=usage.get(queue.pk, ()),
            )
        )
    if tree:
        for tenant in sorted(parents.values(), key=lambda t: t.name):
            values = _values(tenant, QUOTA_FIELDS, edits.get(("tenant", tenant.pk)))
            infos.append(quota_info(values, name=tenant_node_name(tenant.name)))
    return tuple(infos)


def _values(row: Any, fields: tuple[str, ...], edit: dict[str, Any] | None) -> dict[str, Any]:
    values = {field: getattr(row, field) for field in fields}
    if edit:
        values.update({k: v for k, v in edit.items() if k in fields})
    return values
