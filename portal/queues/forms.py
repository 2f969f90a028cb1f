from django import forms

from .models import WEIGHT_MAX, WEIGHT_MIN, Queue
from .services import EDITABLE_FIELDS


class QueueEditForm(forms.Form):
    """Shape only; the rules (ranges across fields, cluster totals) live in queue_update."""

    weight = forms.IntegerField(min_value=WEIGHT_MIN, max_value=WEIGHT_MAX)
    priority = forms.IntegerField()
    state = forms.ChoiceField(choices=Queue.State.choices)
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

    @classmethod
    def initial_for(cls, queue: Queue) -> dict[str, object]:
        return {field: getattr(queue, field) for field in EDITABLE_FIELDS}
