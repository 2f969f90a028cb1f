from collections.abc import Collection, Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q

from jobspec.gpushare import milli_cost
from jobspec.labels import pod_name
from portal.common.services import model_update, prefix_errors
from portal.jobs.models import JobTask

from .models import Node, Placement
from .namespaces import placing_namespaces

NODE_FIELDS = (
    "name",
    "gpu_resource_name",
    "gpu_count",
    "gpu_model",
    "gpu_memory_mib",
    "gpu_uuids",
    "cpu_millis",
    "memory_bytes",
    "labels",
    "topology_labels",
    "schedulable",
    "pods_capacity",
    "taints",
    "ready",
    "used_by_others",
)
NODE_UNKNOWN_FIELD = "unknown field; expected one of: {expected}"
NODE_NAME_REQUIRED = "a node needs a name"
NODE_NAME_DUPLICATE = "node {name} is listed twice"
NODE_NOT_A_MAPPING = "each node must be a mapping"
INVENTORY_INVALID = "the inventory must be a mapping with a 'nodes' list"
PLACEMENT_REPLICA_OUT_OF_RANGE = "replica must be between 0 and {max_replica}"


def node_inventory_load(*, path: str | Path) -> list[dict[str, Any]]:
    """Read a YAML inventory file (`nodes: [...]`) into node dicts."""
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise ValidationError({"nodes": INVENTORY_INVALID})
    return data["nodes"]


SEEN_RESOLUTION = timedelta(minutes=1)


def node_seen_mark(
    *,
    at: datetime,
    names: Iterable[str] | None = None,
    in_cluster: bool | None = None,
    resolution: timedelta = SEEN_RESOLUTION,
) -> int:
    """Record that the cluster reported these nodes (None: every node, or with `in_cluster`
    every node in the cluster, which after a sync of the cluster's list is the list) at `at`.

    Rows are written once per `resolution` at most: the cycle calls this every few seconds,
    and "last seen" a minute ago is as good as now. Returns the rows written."""
    nodes = Node.objects.filter(Q(last_seen_at__isnull=True) | Q(last_seen_at__lt=at - resolution))
    if names is not None:
        nodes = nodes.filter(name__in=list(names))
    if in_cluster is not None:
        nodes = nodes.filter(in_cluster=in_cluster)
    return nodes.update(last_seen_at=at)


@transaction.atomic
def node_inventory_sync(  # noqa: C901, PLR0912 - one branch per field of the node form
    *,
    nodes: list[dict[str, Any]],
    seen_at: datetime | None = None,
    absent_gone: bool = False,
    current: Collection[str] = frozenset(),
) -> dict[str, list[str]]:
    """Upsert `nodes` by name and mark nodes missing from the list unschedulable, or, with
    `absent_gone` (the list is the cluster's own), gone from the cluster: the snapshot then
    leaves them out of capacity altogether. A node listed again is back.

    Rows are written only when something changed, so syncing the same inventory twice
    is a no-op. `seen_at` (an observation time) is stored as `last_seen_at` when given.
    `current` names nodes the caller lists without a spec because their rows hold it already
    (it wrote them and no one has since): they count as listed but are neither read nor
    compared, which is most of the cost at thousands of nodes.
    Returns the names created, updated and marked unschedulable.
    """
    errors: dict[str, list[str]] = {}
    seen: set[str] = set()
    for index, spec in enumerate(nodes):
        path = f"nodes[{index}]"
        if not isinstance(spec, dict):
            errors[path] = [NODE_NOT_A_MAPPING]
            continue
        for key in spec:
            if key not in NODE_FIELDS:
                errors[f"{path}.{key}"] = [
                    NODE_UNKNOWN_FIELD.format(expected=", ".join(NODE_FIELDS))
                ]
        name = spec.get("name")
        if not name:
            errors[f"{path}.name"] = [NODE_NAME_REQUIRED]
        elif name in seen:
            errors[f"{path}.name"] = [NODE_NAME_DUPLICATE.format(name=name)]
        else:
            seen.add(name)
    if errors:
        raise ValidationError(errors)
    seen.update(current)

    result: dict[str, list[str]] = {"created": [], "updated": [], "unschedulable": [], "gone": []}
    rows = Node.objects.select_for_update().order_by("name")
    if current:
        # Only rows that may differ: listed ones not vouched for, and absent ones whose
        # absence is not recorded yet (a row already gone or unschedulable stays so).
        present = dict(
            Node.objects.values_list("name", "in_cluster" if absent_gone else "schedulable")
        )
        rows = rows.filter(
            name__in=[
                name
                for name, still in present.items()
                if name not in current and (still or name in seen)
            ]
        )
    existing = {node.name: node for node in rows}
    for index, spec in enumerate(nodes):
        data = {key: value for key, value in spec.items() if key in NODE_FIELDS}
        data.setdefault("schedulable", True)
        data["in_cluster"] = True
        if seen_at is not None:
            data["last_seen_at"] = seen_at
        node = existing.get(data["name"])
        try:
            if node is None:
                node = Node(**data)
                node.full_clean()
                node.save()
                result["created"].append(node.name)
            else:
                _, changed = model_update(instance=node, fields=[*data], data=data)
                if changed:
                    result["updated"].append(node.name)
        except ValidationError as error:
            raise ValidationError(prefix_errors(error, f"nodes[{index}].")) from error

    absent = {"in_cluster": False} if absent_gone else {"schedulable": False}
    for name, node in existing.items():
        if name in seen:
            continue
        _, changed = model_update(instance=node, fields=[*absent], data=absent)
        if changed:
            result["gone" if absent_gone else "unschedulable"].append(name)
    return result


class _JobLike(Protocol):
    id: int
    name: str
    object_prefix: str


class _TaskLike(Protocol):
    name: str


def placement_pod_name(*, job: _JobLike, task: _TaskLike, replica: int, attempt: int = 0) -> str:
    """The pod name of a placement: the id-based name of `labels.pod_name`, under the job's
    object prefix (a job from before names carried the instance has none: its new placements
    are named as its old ones).

    Takes a Job and a JobTask, or any rows with those attributes (the scheduling cycle passes
    the plain rows of its snapshot)."""
    return pod_name(job.id, task.name, replica, attempt, prefix=job.object_prefix)


@transaction.atomic
def placement_create(
    *, task: JobTask, replica: int, node: Node, state: str = Placement.State.BOUND
) -> Placement:
    """Record that `replica` of `task` is placed on `node` (one active placement per replica)."""
    job = task.job
    if replica < 0 or replica >= task.replicas:
        raise ValidationError(
            {"replica": PLACEMENT_REPLICA_OUT_OF_RANGE.format(max_replica=task.replicas - 1)}
        )
    attempt = Placement.objects.filter(task=task, replica=replica).count()
    placement = Placement(
        job=job,
        task=task,
        replica=replica,
        node=node,
        node_name=node.name,
        namespace=placing_namespaces({job.id: job.tenant.name})[job.id],
        pod_name=placement_pod_name(job=job, task=task, replica=replica, attempt=attempt),
        state=state,
        gpus=task.gpus,
        gpu_milli=milli_cost(
            gpus=task.gpus,
            gpu_milli=task.gpu_milli,
            gpu_memory_mib=task.gpu_memory_mib,
            device_memory_mib=node.gpu_memory_mib,
        ),
    )
    placement.full_clean()
    placement.save()
    return placement


@transaction.atomic
def placement_set_state(*, placement: Placement, state: str) -> Placement:
    placement, _ = model_update(instance=placement, fields=["state"], data={"state": state})
    return placement


def placements_notice_give(*, ids: Collection[int], deadline: datetime, at: datetime) -> int:
    """Tell the placements `ids` that their pods are deleted at `deadline` (the preemption
    notice, docs/design/preemption-notice.md), unless told of an earlier deadline already:
    a notice is never pushed back. Returns how many were told."""
    return (
        Placement.objects.filter(id__in=ids)
        .filter(Q(notice_deadline__isnull=True) | Q(notice_deadline__gt=deadline))
        .update(notice_given_at=at, notice_deadline=deadline, updated_at=at)
    )
