from dataclasses import asdict

from django.conf import settings
from django.core.management.base import BaseCommand
from django.utils import timezone

from portal.ops.retention import retention_run


class Command(BaseCommand):
    help = (
        "Prune usage samples (after rolling them up), preemption events and cycle records "
        "older than their retention ages (what beat runs every RETENTION_INTERVAL_SECONDS)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--sample-days", type=int, default=settings.USAGE_SAMPLE_RETENTION_DAYS)
        parser.add_argument(
            "--preemption-event-days", type=int, default=settings.PREEMPTION_EVENT_RETENTION_DAYS
        )
        parser.add_argument("--cycle-run-days", type=int, default=settings.CYCLE_RUN_RETENTION_DAYS)

    def handle(self, *args, sample_days, preemption_event_days, cycle_run_days, **options):
        report = retention_run(
            now=timezone.now(),
            sample_days=sample_days,
            preemption_event_days=preemption_event_days,
            cycle_run_days=cycle_run_days,
        )
        for key, value in asdict(report).items():
            if key == "days_rolled_up":
                value = f"{len(value)} ({value[0]} .. {value[-1]})" if value else 0
            self.stdout.write(f"{key}: {value}")
