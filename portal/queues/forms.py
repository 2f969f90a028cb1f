from django import forms

from portal.tenants.forms import QuotaForm

from .models import Queue
from .services import EDITABLE_FIELDS


class QueueEditForm(QuotaForm):
    """A queue's quota, priority and state. Shape only; the rules (ranges across fields, the
    tenant's quota) live in queue_update."""

    priority = forms.IntegerField()
    state = forms.ChoiceField(choices=Queue.State.choices)

    fields_edited = EDITABLE_FIELDS
    field_order = ["weight", "priority", "state", "reclaimable"]
