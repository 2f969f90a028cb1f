"""Generic helpers for services."""

from typing import Any, TypeVar

from django.db import models
from django.utils import timezone

DModel = TypeVar("DModel", bound=models.Model)


def model_update(
    *,
    instance: DModel,
    fields: list[str],
    data: dict[str, Any],
    auto_updated_at: bool = True,
) -> tuple[DModel, bool]:
    """Set `fields` on `instance` from `data` and save only what changed.

    Fields missing from `data` are left alone. Returns the instance and whether it changed.
    `full_clean()` runs before the save, so invalid values raise ValidationError.
    """
    has_updated = False
    update_fields: list[str] = []
    model_fields = {field.name: field for field in instance._meta.get_fields()}

    for field in fields:
        if field not in data:
            continue
        if getattr(instance, field) != data[field]:
            has_updated = True
            update_fields.append(field)
            setattr(instance, field, data[field])

    if has_updated:
        if auto_updated_at and "updated_at" in model_fields and "updated_at" not in update_fields:
            update_fields.append("updated_at")
            instance.updated_at = timezone.now()
        instance.full_clean()
        instance.save(update_fields=update_fields)

    return instance, has_updated


def prefix_errors(error: Exception, prefix: str) -> dict[str, list[str]]:
    """Turn a ValidationError's message dict into one keyed by `prefix` + field name."""
    message_dict = getattr(error, "message_dict", None)
    if message_dict is None:
        return {prefix.rstrip("."): list(getattr(error, "messages", [str(error)]))}
    result: dict[str, list[str]] = {}
    for field, messages in message_dict.items():
        key = prefix.rstrip(".") if field == "__all__" else f"{prefix}{field}"
        result.setdefault(key, []).extend(messages)
    return result
