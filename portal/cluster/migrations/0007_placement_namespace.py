from django.conf import settings
from django.db import migrations, models


def active_placements_remember_their_namespace(apps, schema_editor):
    """Every pod so far was made in KUBERNETES_NAMESPACE: the running ones keep it even if
    that setting changes later."""
    Placement = apps.get_model("cluster", "Placement")
    Placement.objects.filter(state__in=["bound", "running", "releasing"]).update(
        namespace=settings.KUBERNETES_NAMESPACE
    )


class Migration(migrations.Migration):
    dependencies = [
        ("cluster", "0006_placement_exit"),
    ]

    operations = [
        migrations.AddField(
            model_name="placement",
            name="namespace",
            field=models.CharField(blank=True, default="", max_length=63),
        ),
        migrations.RunPython(active_placements_remember_their_namespace, migrations.RunPython.noop),
    ]
