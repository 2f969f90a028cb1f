import portal.cluster.models
from django.db import migrations, models
from django.db.models import F

ENDED_STATES = ("succeeded", "failed", "deleted")


def from_timestamps(apps, schema_editor):
    """Placements made before these fields: started at their creation, ended (if they have)
    at their last update, the best the rows tell."""
    Placement = apps.get_model("cluster", "Placement")
    Placement.objects.update(started_at=F("created_at"))
    Placement.objects.filter(state__in=ENDED_STATES).update(ended_at=F("updated_at"))


class Migration(migrations.Migration):

    dependencies = [
        ("cluster", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="placement",
            name="ended_at",
            field=models.DateTimeField(blank=True, db_index=True, null=True),
        ),
        migrations.AddField(
            model_name="placement",
            name="started_at",
            field=models.DateTimeField(default=portal.cluster.models.whole_seconds_now),
        ),
        migrations.RunPython(from_timestamps, migrations.RunPython.noop, elidable=True),
    ]
