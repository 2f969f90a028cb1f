"""Tokens die with the password they were created under, and with the account's activity.

Passwords change and accounts are deactivated through Django's own paths (the admin's user
and password forms, `changepassword`), not through a service of the portal's, so the user
model's save is the one place that sees every such change. A write that skips save()
(a bulk update) still stops the tokens: each remembers the fingerprint of its password
(ApiToken.revoker).
"""

from django.conf import settings
from django.db.models.signals import pre_save
from django.dispatch import receiver

from .models import ApiToken
from .services import api_tokens_revoke_for_user

WATCHED_FIELDS = {"password", "is_active"}


@receiver(pre_save, sender=settings.AUTH_USER_MODEL, dispatch_uid="api-tokens-revoke")
def revoke_tokens_on_password_or_deactivation(sender, instance, update_fields=None, **kwargs):
    if instance.pk is None or kwargs.get("raw"):
        return
    if update_fields is not None and not WATCHED_FIELDS & set(update_fields):
        return  # e.g. the last_login update of every login: no read
    before = sender._default_manager.filter(pk=instance.pk).values("password", "is_active")
    previous = before.first()
    if previous is None:
        return
    if previous["password"] != instance.password:
        api_tokens_revoke_for_user(user=instance, reason=ApiToken.Revoker.PASSWORD)
    elif previous["is_active"] and not instance.is_active:
        api_tokens_revoke_for_user(user=instance, reason=ApiToken.Revoker.DEACTIVATED)
