"""{% load quota_ui %} {{ change.field|quota_label }}: a quota or queue field as the edit forms
call it ("Guarantee (CPU cores)"), not its stored name (guarantee_cpu_millis)."""

from django import template

from portal.tenants.quota import QUOTA_LABELS

register = template.Library()


@register.filter
def quota_label(field: str) -> str:
    # A queue's own fields (priority, state) are single words.
    return QUOTA_LABELS.get(field, str(field).replace("_", " ").capitalize())
