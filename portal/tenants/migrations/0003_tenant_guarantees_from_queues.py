"""Existing tenants get the guarantees their queues already split: the sum of each tenant's
queue guarantees, so the rule 'a tenant's queues guarantee no more than the tenant' holds from
the start and no running cluster changes shares."""

from django.db import migrations
from django.db.models import Sum

RESOURCES = ("gpus", "cpu_millis", "memory_bytes")


def guarantees_from_queues(apps, schema_editor):
    tenant_model = apps.get_model("tenants", "Tenant")
    queue_model = apps.get_model("queues", "Queue")
    sums = queue_model.objects.values("tenant_id").annotate(
        **{f"guarantee_{r}": Sum(f"guarantee_{r}") for r in RESOURCES}
    )
    for row in sums:
        tenant_model.objects.filter(pk=row["tenant_id"]).update(
            **{f"guarantee_{r}": row[f"guarantee_{r}"] or 0 for r in RESOURCES}
        )


class Migration(migrations.Migration):
    dependencies = [
        ("queues", "0001_initial"),
        ("tenants", "0002_tenant_quota_fields_changes_and_usage"),
    ]

    operations = [migrations.RunPython(guarantees_from_queues, migrations.RunPython.noop)]
