from django import forms
from django.core.exceptions import ValidationError

from portal.common.fields import CpuField, MemoryField
from portal.common.units import cpu_text, memory_text

from .quota import QUOTA_FIELDS, QUOTA_LABELS, RESOURCES, WEIGHT_MAX, WEIGHT_MIN

CPU_HINT = 'Cores, e.g. 32 or 0.5 ("500m" works too).'
MEMORY_HINT = 'GiB, e.g. 256; or a size such as "512Mi".'


class QuotaForm(forms.Form):
    """The quota fields tenants and queues share. Shape only; the rules (ranges across
    fields, the tenant's and the cluster's totals) live in the services."""

    weight = forms.IntegerField(
        min_value=WEIGHT_MIN, max_value=WEIGHT_MAX, label=QUOTA_LABELS["weight"]
    )
    reclaimable = forms.BooleanField(required=False, label=QUOTA_LABELS["reclaimable"])
    guarantee_gpus = forms.IntegerField(min_value=0, label=QUOTA_LABELS["guarantee_gpus"])
    capability_gpus = forms.IntegerField(
        min_value=0,
        required=False,
        label=QUOTA_LABELS["capability_gpus"],
        help_text="Empty: unlimited.",
    )
    borrowing_limit_gpus = forms.IntegerField(
        min_value=0,
        required=False,
        label=QUOTA_LABELS["borrowing_limit_gpus"],
        help_text="Empty: unlimited.",
    )
    # CPU in cores and memory in GiB, as every page shows them; stored as millicores and bytes.
    guarantee_cpu_millis = CpuField(label=QUOTA_LABELS["guarantee_cpu_millis"], help_text=CPU_HINT)
    capability_cpu_millis = CpuField(
        required=False, label=QUOTA_LABELS["capability_cpu_millis"], help_text="Empty: unlimited."
    )
    borrowing_limit_cpu_millis = CpuField(
        required=False,
        label=QUOTA_LABELS["borrowing_limit_cpu_millis"],
        help_text="Empty: unlimited.",
    )
    guarantee_memory_bytes = MemoryField(
        label=QUOTA_LABELS["guarantee_memory_bytes"], help_text=MEMORY_HINT
    )
    capability_memory_bytes = MemoryField(
        required=False, label=QUOTA_LABELS["capability_memory_bytes"], help_text="Empty: unlimited."
    )
    borrowing_limit_memory_bytes = MemoryField(
        required=False,
        label=QUOTA_LABELS["borrowing_limit_memory_bytes"],
        help_text="Empty: unlimited.",
    )

    fields_edited: tuple[str, ...] = QUOTA_FIELDS

    def add_service_errors(self, error: ValidationError) -> None:
        """The quota service's refusal on the fields it names. Its messages start with the
        field's name for API clients ("guarantee_gpus: ..."); under the field itself that
        prefix is noise, so it is dropped there."""
        for field, field_messages in error.message_dict.items():
            target = field if field in self.fields else None
            for message in field_messages:
                if target is not None:
                    message = message.removeprefix(f"{field}: ")
                self.add_error(target, message)

    def other_fields(self) -> list[forms.BoundField]:
        """The fields before the resource rows (weight, reclaimable, a queue's priority...)."""
        limits = {
            f"{kind}_{r}"
            for kind in ("guarantee", "capability", "borrowing_limit")
            for r in RESOURCES
        }
        return [self[name] for name in self.fields if name not in limits]

    def resource_rows(self) -> list[list[forms.BoundField]]:
        """One row per resource: its guarantee, capability and borrowing limit side by side
        (in a two-column grid a GPU borrowing limit sat beside the CPU guarantee)."""
        return [
            [self[f"{kind}_{r}"] for kind in ("guarantee", "capability", "borrowing_limit")]
            for r in RESOURCES
        ]

    @classmethod
    def initial_for(cls, row: object) -> dict[str, object]:
        """The row's values as the fields take them (cores and GiB as text, exactly)."""
        initial = {}
        for field in cls.fields_edited:
            value = getattr(row, field)
            if value is not None and field.endswith("_cpu_millis"):
                value = cpu_text(value)
            elif value is not None and field.endswith("_memory_bytes"):
                value = memory_text(value)
            initial[field] = value
        return initial


class TenantQuotaForm(QuotaForm):
    """A tenant's quota and maximum run time (site admins)."""

    max_runtime_seconds = forms.IntegerField(
        required=False,
        label="Maximum run time (s)",
        help_text="No queue of the tenant lets a job run longer. Empty: no maximum.",
    )

    fields_edited = (*QUOTA_FIELDS, "max_runtime_seconds")
