from django.contrib import admin

from portal.common.admin import ReadOnlyAdminMixin

from .models import LedgerClock, LedgerEntry


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    """Read-only: only the scheduling cycle books into the ledger, and a past month never
    changes."""

    list_display = [
        "month",
        "tenant",
        "queue",
        "user",
        "gpu_milli_seconds_within",
        "gpu_milli_seconds_borrowed",
        "gpu_milli_seconds_lost",
    ]
    list_filter = ["month", "tenant"]
    list_select_related = ["tenant", "queue", "user"]
    search_fields = ["queue__name", "user__username"]


@admin.register(LedgerClock)
class LedgerClockAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ["booked_until"]
