"""DRF's plain tokens (table authtoken_token, when this database had them) become hashed
ApiTokens with the same secret, so scripts keep working; the plain rows are deleted.

They get the default lifetime from now and the name "token from before hashing". A database
created after this change has no such table and nothing to do. The table itself is left,
empty (its app is no longer installed). Not reversible: only digests remain.
"""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import migrations
from django.utils.dateparse import parse_datetime

from portal.api.tokens import password_fingerprint, secret_digest, secret_prefix

OLD_TABLE = "authtoken_token"
MIGRATED_NAME = "token from before hashing"


def _aware(value, default):
    if value is None:
        return default
    if not isinstance(value, datetime):
        value = parse_datetime(str(value)) or default
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def hash_plain_tokens(apps, schema_editor):
    connection = schema_editor.connection
    if OLD_TABLE not in connection.introspection.table_names():
        return
    ApiToken = apps.get_model("api", "ApiToken")
    User = apps.get_model(settings.AUTH_USER_MODEL)
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote('key')}, {quote('user_id')}, {quote('created')} FROM {quote(OLD_TABLE)}"
        )
        rows = cursor.fetchall()
    now = datetime.now(UTC)
    days = int(getattr(settings, "API_TOKEN_DEFAULT_DAYS", 90))
    passwords = dict(User.objects.filter(pk__in=[r[1] for r in rows]).values_list("pk", "password"))
    ApiToken.objects.bulk_create(
        ApiToken(
            user_id=user_id,
            name=MIGRATED_NAME,
            prefix=secret_prefix(key)[:8],
            digest=secret_digest(key),
            password_fingerprint=password_fingerprint(passwords.get(user_id) or ""),
            created_at=_aware(created, now),
            expires_at=now + timedelta(days=days),
        )
        for key, user_id, created in rows
        if user_id in passwords
    )
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quote(OLD_TABLE)}")


class Migration(migrations.Migration):
    dependencies = [("api", "0001_api_token")]

    operations = [migrations.RunPython(hash_plain_tokens, migrations.RunPython.noop)]
