from django import forms

from portal.tenants.forms import QuotaForm

from .models import Queue
from .services import EDITABLE_FIELDS


class QueueEditForm(QuotaForm):
    """A queue's quota, priority and state. Shape only; the rules (ranges across fields, the
    tenant's quota) live in queue_update."""

    priority = forms.IntegerField()
    state = forms.ChoiceField(choices=Queue.State.choices)
    max_runtime_seconds = forms.IntegerField(
        required=False,
        label="Run-time limit (s)",
        help_text="A job is ended once it has run this long. Empty: the tenant's maximum.",
    )
    min_runtime_seconds = forms.IntegerField(
        required=False,
        label="Minimum run time (s)",
        help_text="A pod is not preempted or reclaimed before it has run this long. 0: none.",
    )
    preemption_notice_seconds = forms.IntegerField(
        required=False,
        label="Preemption notice (s)",
        help_text=(
            "A preempted or reclaimed pod, or one reaching its run-time limit, is told this "
            "long before it is deleted: its file /etc/podinfo/preemption-deadline holds the "
            "instant, to checkpoint and exit by. 0: deleted at once."
        ),
    )

    fields_edited = EDITABLE_FIELDS
    field_order = ["weight", "priority", "state", "reclaimable"]

    # Empty is 0 (none), the default that keeps Volcano's behaviour.
    def clean_min_runtime_seconds(self) -> int:
        return self.cleaned_data["min_runtime_seconds"] or 0

    def clean_preemption_notice_seconds(self) -> int:
        return self.cleaned_data["preemption_notice_seconds"] or 0
