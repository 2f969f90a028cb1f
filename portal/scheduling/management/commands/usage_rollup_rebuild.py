from datetime import timedelta

from django.core.management.base import BaseCommand
from django.utils import timezone

from portal.scheduling.rollups import usage_rollups_rebuild


class Command(BaseCommand):
    help = "Recompute the hourly and daily usage rollups from the per-minute usage samples."

    def add_arguments(self, parser):
        parser.add_argument(
            "--days",
            type=int,
            default=None,
            help="only the last N days (default: every sample)",
        )

    def handle(self, *args, days=None, **options):
        since = timezone.now() - timedelta(days=days) if days is not None else None
        counts = usage_rollups_rebuild(since=since)
        self.stdout.write(f"usage rollups rebuilt: {counts['hour']} hourly, {counts['day']} daily")
