from django.core.management.base import BaseCommand, CommandError

from portal.ops.backup import backup_restore


class Command(BaseCommand):
    help = (
        "Load a backup_dump file into a freshly migrated, empty database "
        "(refuses a database that holds data)."
    )

    def add_arguments(self, parser):
        parser.add_argument("path", help="a file written by backup_dump")

    def handle(self, *args, path, **options):
        try:
            backup_restore(path=path)
        except ValueError as error:
            raise CommandError(str(error)) from error
        self.stdout.write(f"restored {path}")
