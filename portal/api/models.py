"""API tokens: stored as digests, with a name, an expiry, the last use and a revocation."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from .tokens import password_fingerprint


class ApiToken(models.Model):
    class State(models.TextChoices):
        ACTIVE = "active", "active"
        EXPIRED = "expired", "expired"
        REVOKED = "revoked", "revoked"

    class Revoker(models.TextChoices):
        OWNER = "owner", "revoked by its owner"
        ADMIN = "admin", "revoked by an admin"
        PASSWORD = "password", "revoked: the password was changed"
        DEACTIVATED = "deactivated", "revoked: the account was deactivated"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=16, help_text="First characters of the secret.")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the secret.")
    password_fingerprint = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    revoked_reason = models.CharField(max_length=16, choices=Revoker.choices, blank=True)

    class Meta:
        verbose_name = "API token"
        indexes = [models.Index(fields=["user", "-created_at"], name="api_token_user_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    def revoker(self) -> "ApiToken.Revoker | None":
        """Why the token no longer works, or None. A password changed by a write that skipped
        the user's save() (and the signal that marks tokens revoked) shows here too: the
        token remembers the fingerprint of the password it was created under."""
        if self.revoked_at is not None:
            return self.Revoker(self.revoked_reason)
        if self.password_fingerprint != password_fingerprint(self.user.password or ""):
            return self.Revoker.PASSWORD
        return None

    def state(self, *, now=None) -> "ApiToken.State":
        if self.revoker() is not None:
            return self.State.REVOKED
        if self.expires_at <= (now or timezone.now()):
            return self.State.EXPIRED
        return self.State.ACTIVE
