"""The quota fields tenants and queues share and their rules (portal.scheduling.mapping gives
them to the core).

The scheduler sees the tree root (the cluster) -> tenant -> queue: a tenant is a parent queue of
the hierarchical proportion (docs/design/hierarchical-proportion.md), named ``tenant <name>`` so
it can never clash with a queue (names are DNS labels, which have no space) and reads as words
in a pending reason.
"""

import json
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from portal.common import units

WEIGHT_MIN = 1
WEIGHT_MAX = 65535

# Resource suffixes a quota limits. Each has guarantee_, capability_ and borrowing_limit_.
RESOURCES = ("gpus", "cpu_millis", "memory_bytes")
# How an amount of each reads in a message: in the units the forms take (cores, GiB), not the
# stored ones (millicores, bytes).
RESOURCE_TEXT = {"gpus": units.gpus, "cpu_millis": units.cores, "memory_bytes": units.gib}
# The fields an owner changes; every change is audited.
QUOTA_FIELDS = (
    "weight",
    *(f"guarantee_{r}" for r in RESOURCES),
    *(f"capability_{r}" for r in RESOURCES),
    *(f"borrowing_limit_{r}" for r in RESOURCES),
    "reclaimable",
)
# What each field is called on the pages (the forms' labels, the change history), in the
# units the forms take.
LIMIT_KINDS = {
    "guarantee": "Guarantee",
    "capability": "Capability",
    "borrowing_limit": "Borrowing limit",
}
RESOURCE_UNITS = {"gpus": "GPUs", "cpu_millis": "CPU cores", "memory_bytes": "memory, GiB"}
QUOTA_LABELS = {
    "weight": "Weight",
    "reclaimable": "Reclaimable",
    **{
        f"{kind}_{r}": f"{kind_text} ({RESOURCE_UNITS[r]})"
        for kind, kind_text in LIMIT_KINDS.items()
        for r in RESOURCES
    },
}

GUARANTEE_ABOVE_CAPABILITY = "guarantee ({guarantee}) may not exceed capability ({capability})"
# A space, not a slash: the name appears in pending reasons ("queue nlp-train is in tenant
# nlp, ..."), and a DNS label has no space either.
TENANT_NODE_PREFIX = "tenant "


class QuotaFields(models.Model):
    """Volcano proportion semantics plus Kueue's borrowing limit; empty caps are unlimited."""

    weight = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(WEIGHT_MIN), MaxValueValidator(WEIGHT_MAX)]
    )
    guarantee_gpus = models.PositiveIntegerField(default=0)
    guarantee_cpu_millis = models.PositiveBigIntegerField(default=0)
    guarantee_memory_bytes = models.PositiveBigIntegerField(default=0)
    capability_gpus = models.PositiveIntegerField(null=True, blank=True)
    capability_cpu_millis = models.PositiveBigIntegerField(null=True, blank=True)
    capability_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    borrowing_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    borrowing_limit_cpu_millis = models.PositiveBigIntegerField(null=True, blank=True)
    borrowing_limit_memory_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    reclaimable = models.BooleanField(default=True)

    class Meta:
        abstract = True

    def clean(self) -> None:
        errors: dict[str, str] = {}
        for resource in RESOURCES:
            guarantee = getattr(self, f"guarantee_{resource}")
            capability = getattr(self, f"capability_{resource}")
            if guarantee is None or capability is None:
                continue
            if guarantee > capability:
                errors[f"guarantee_{resource}"] = GUARANTEE_ABOVE_CAPABILITY.format(
                    guarantee=amount(resource, guarantee), capability=amount(resource, capability)
                )
        if errors:
            raise ValidationError(errors)


class QuotaChangeFields(models.Model):
    """One changed field of a quota, old -> new, when (the owner and the author are the
    concrete model's foreign keys)."""

    changed_at = models.DateTimeField(default=timezone.now, db_index=True)
    field = models.CharField(max_length=64)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)

    class Meta:
        abstract = True
        ordering = ["-changed_at", "-id"]


def changes_record(
    *, model: type, owner: str, row: Any, before: dict[str, Any], fields: list[str], actor: Any
) -> None:
    """One ``model`` row (``owner`` = ``row``) per changed field, all at one instant."""
    now = timezone.now()
    changed_by = actor if actor is not None and actor.is_authenticated else None
    model.objects.bulk_create(
        [
            model(
                **{owner: row},
                changed_by=changed_by,
                changed_at=now,
                field=field,
                old_value=as_text(before[field]),
                new_value=as_text(getattr(row, field)),
            )
            for field in fields
        ]
    )


def audited_save(
    *, model: type, owner: str, row: Any, fields: Sequence[str], changes: dict[str, Any], actor: Any
) -> list[str]:
    """Set ``changes`` on ``row`` (locked by the caller), check it, save the ``fields`` that
    changed and record each (``changes_record``); the fields changed."""
    before = {field: getattr(row, field) for field in fields}
    for field, value in changes.items():
        setattr(row, field, value)
    row.full_clean()
    changed = [field for field in fields if getattr(row, field) != before[field]]
    if changed:
        row.save(update_fields=[*changed, "updated_at"])
        changes_record(
            model=model, owner=owner, row=row, before=before, fields=changed, actor=actor
        )
    return changed


def as_text(value: Any) -> str:
    """An audit row's rendering of a field value ('' for unlimited)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):  # the cluster policy's lists
        return json.dumps(value, sort_keys=True)
    return str(value)


def tenant_node_name(tenant_name: str) -> str:
    return f"{TENANT_NODE_PREFIX}{tenant_name}"


def amount(resource: str, value: int | float) -> str:
    """A stored amount of ``resource`` as people read it: "32 GPUs", "8 cores", "64 GiB"."""
    return RESOURCE_TEXT[resource](value)


def named_parts(resource: str, parts: list[tuple[str, int]]) -> str:
    """``nlp-train 32 GPUs + nlp-dev 16 GPUs``: the non-zero parts of a sum, or ``none``."""
    return " + ".join(f"{name} {amount(resource, v)}" for name, v in parts if v) or "none"


def sum_parts(resource: str, parts: list[tuple[str, int]]) -> str:
    """``48 GPUs (nlp-train 32 GPUs + nlp-dev 16 GPUs)``: a total and the parts that make it."""
    total = sum(value for _, value in parts)
    text = amount(resource, total)
    return f"{text} ({named_parts(resource, parts)})" if total else text
