from django import forms

from .quota import QUOTA_FIELDS, WEIGHT_MAX, WEIGHT_MIN


class QuotaForm(forms.Form):
    """The quota fields tenants and queues share. Shape only; the rules (ranges across
    fields, the tenant's and the cluster's totals) live in the services."""

    weight = forms.IntegerField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX)
    reclaimable = forms.BooleanField(required=False)
    guarantee_gpus = forms.IntegerField(min_value=0, label="Guarantee (GPUs)")
    capability_gpus = forms.IntegerField(
        min_value=0, required=False, label="Capability (GPUs)", help_text="Empty: unlimited."
    )
    borrowing_limit_gpus = forms.IntegerField(
        min_value=0, required=False, label="Borrowing limit (GPUs)", help_text="Empty: unlimited."
    )
    guarantee_cpu_millis = forms.IntegerField(min_value=0, label="Guarantee (CPU millicores)")
    capability_cpu_millis = forms.IntegerField(
        min_value=0, required=False, label="Capability (CPU millicores)"
    )
    borrowing_limit_cpu_millis = forms.IntegerField(
        min_value=0, required=False, label="Borrowing limit (CPU millicores)"
    )
    guarantee_memory_bytes = forms.IntegerField(min_value=0, label="Guarantee (memory bytes)")
    capability_memory_bytes = forms.IntegerField(
        min_value=0, required=False, label="Capability (memory bytes)"
    )
    borrowing_limit_memory_bytes = forms.IntegerField(
        min_value=0, required=False, label="Borrowing limit (memory bytes)"
    )

    fields_edited: tuple[str, ...] = QUOTA_FIELDS

    @classmethod
    def initial_for(cls, row: object) -> dict[str, object]:
        return {field: getattr(row, field) for field in cls.fields_edited}


class TenantQuotaForm(QuotaForm):
    """A tenant's quota (site admins)."""
