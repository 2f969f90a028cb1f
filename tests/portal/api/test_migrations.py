"""DRF's plain tokens become hashed ApiTokens with the same secret: scripts keep working and
no plain secret stays in the database."""

import importlib
from datetime import timedelta
from http import HTTPStatus
from types import SimpleNamespace

import pytest
from django.apps import apps
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from portal.api.models import ApiToken

pytestmark = pytest.mark.django_db

migration = importlib.import_module("portal.api.migrations.0002_hash_plain_drf_tokens")
PLAIN = "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b"  # what DRF's Token.generate_key() makes


@pytest.fixture
def drf_table():
    """authtoken_token as DRF's migrations created it (the app is no longer installed)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created timestamp with time zone NOT NULL, user_id integer NOT NULL UNIQUE)"
            if connection.vendor == "postgresql"
            else "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, "
            "created datetime NOT NULL, user_id integer NOT NULL UNIQUE)"
        )
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE authtoken_token")


def _migrate() -> None:
    # The data step reads only the editor's connection (SQLite refuses a real schema editor
    # inside the test's transaction).
    migration.hash_plain_tokens(apps, SimpleNamespace(connection=connection))


def test_plain_tokens_are_hashed_and_keep_working(drf_table, researcher, lead):
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [PLAIN, timezone.now() - timedelta(days=400), researcher.pk],
        )
    _migrate()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    token = ApiToken.objects.get()
    assert token.user == researcher
    assert token.name == migration.MIGRATED_NAME
    assert token.prefix == PLAIN[:8]
    assert PLAIN not in token.digest
    assert token.created_at < timezone.now() - timedelta(days=399)
    assert token.expires_at > timezone.now() + timedelta(days=89)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {PLAIN}")
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK


def test_without_drfs_table_there_is_nothing_to_do(researcher):
    _migrate()
    assert not ApiToken.objects.exists()
