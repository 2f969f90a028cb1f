"""Logical backup and restore through Django's serializers (any database; docs/operations.md
also gives the pg_dump path for PostgreSQL).

What a dump leaves out, and why: content types and permissions (every `migrate` recreates
them, under other ids; rows refer to them by natural key), sessions (logins expire anyway).
Every other row keeps its id, so links and API ids stay valid after a restore.
"""

from __future__ import annotations

from django.apps import apps
from django.core.management import call_command
from django.db import transaction

DUMP_EXCLUDES = ("contenttypes", "auth.permission", "sessions")
# Tables `migrate` fills by itself: a freshly migrated database has rows in them.
MIGRATE_FILLS = ("contenttypes.contenttype", "auth.permission")
NOT_EMPTY = "the database already holds data ({tables}); restore only into a freshly migrated one"


def backup_dump(*, output: str) -> None:
    call_command(
        "dumpdata",
        "--natural-foreign",
        *(f"--exclude={label}" for label in DUMP_EXCLUDES),
        "--indent=0",
        f"--output={output}",
        verbosity=0,
    )


def tables_with_rows() -> list[str]:
    """Models (app_label.model) that hold rows, except what `migrate` writes itself."""
    excluded = {*MIGRATE_FILLS}
    return [
        model._meta.label_lower
        for model in apps.get_models()
        if model._meta.label_lower not in excluded
        and model._meta.app_label != "sessions"
        and model._meta.managed
        and model.objects.exists()
    ]


def backup_restore(*, path: str) -> None:
    """Load a `backup_dump` file into an empty, migrated database, all or nothing. loaddata
    resets the id sequences, so rows created afterwards never reuse a restored id."""
    with transaction.atomic():
        holding = tables_with_rows()
        if holding:
            raise ValueError(NOT_EMPTY.format(tables=", ".join(holding[:5])))
        call_command("loaddata", path, verbosity=0)
