"""A tenant's pending pods kept by the database (portal/jobs/pod_count.py): the delta table,
its triggers, and one row per tenant for the jobs already there."""

from django.db import migrations, models

from portal.jobs import pod_count

# Frozen here, as a migration must be; tests/portal/jobs/test_pod_count.py holds them equal
# to portal.jobs.lifecycle.SCHEDULED and pod_count.PLACED_STATES (a change needs a migration).
SCHEDULED = ("admitted", "pending", "preempted", "running")
PLACED = ("bound", "releasing", "running", "succeeded")


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    for statement in pod_count.trigger_statements(vendor, scheduled=SCHEDULED, placed=PLACED):
        schema_editor.execute(statement)
    if pod_count.counted_by_database(vendor):
        schema_editor.execute(pod_count.backfill_statement(scheduled=SCHEDULED, placed=PLACED))


def uninstall(apps, schema_editor):
    for statement in pod_count.drop_statements(schema_editor.connection.vendor):
        schema_editor.execute(statement)


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0007_placement_namespace"),
        ("jobs", "0010_job_ttl"),
        ("tenants", "0004_usage_gpus_fractional"),
    ]

    operations = [
        migrations.CreateModel(
            name="TenantPodDelta",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("replicas", models.BigIntegerField(default=0)),
                ("placed", models.BigIntegerField(default=0)),
                (
                    "tenant",
                    models.ForeignKey(
                        db_constraint=False,
                        on_delete=models.deletion.DO_NOTHING,
                        related_name="+",
                        to="tenants.tenant",
                    ),
                ),
            ],
        ),
        migrations.RunPython(install, uninstall),
    ]
