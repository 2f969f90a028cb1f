"""Tokens in the Django admin: every user's, read-only, revocable; no secret or digest shown
(there is no secret to show: only its digest is stored, and the digest is not displayed)."""

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken
from .services import api_token_revoke

SHOWN_FIELDS = [
    "user",
    "name",
    "prefix",
    "created_at",
    "expires_at",
    "last_used_at",
    "revoked_at",
    "revoked_reason",
]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "expires_at", "last_used_at", "state"]
    list_filter = ["revoked_reason", "expires_at"]
    search_fields = ["user__username", "name", "prefix"]
    list_select_related = ["user"]
    fields = SHOWN_FIELDS
    readonly_fields = SHOWN_FIELDS
    actions = ["revoke"]

    @admin.display(description="state")
    def state(self, token: ApiToken) -> str:
        return token.state(now=timezone.now()).label

    @admin.action(description="Revoke the selected tokens", permissions=["change"])
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        revoked = sum(api_token_revoke(token=token, by=request.user) for token in queryset)
        self.message_user(request, f"{revoked} token(s) revoked.", messages.SUCCESS)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a secret made here would have to be shown to the admin

    def has_delete_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False  # revoked tokens stay listed: who had access, until when
