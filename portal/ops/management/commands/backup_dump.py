from django.core.management.base import BaseCommand

from portal.ops.backup import backup_dump


class Command(BaseCommand):
    help = "Write every row the portal holds to a JSON file (restore with backup_restore)."

    def add_arguments(self, parser):
        parser.add_argument("output", help="file to write, e.g. portal-2026-12-01.json")

    def handle(self, *args, output, **options):
        backup_dump(output=output)
        self.stdout.write(f"backup written to {output}")
