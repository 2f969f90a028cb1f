from operator import attrgetter

from django import forms

from portal.common.validators import validate_time_in_range
from portal.queues.models import Queue
from portal.tenants.models import Tenant

from .models import PreemptionEvent


class PreemptionFilterForm(forms.Form):
    """Filters of the preemption history and its CSV export (invalid values are ignored)."""

    action = forms.ChoiceField(
        required=False, choices=[("", "any"), *PreemptionEvent.Action.choices]
    )
    queue = forms.ModelChoiceField(
        required=False, queryset=Queue.objects.order_by("name"), empty_label="any"
    )
    tenant = forms.ModelChoiceField(
        required=False, queryset=Tenant.objects.order_by("name"), empty_label="any"
    )
    since = forms.DateTimeField(
        required=False,
        label="From",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        validators=[validate_time_in_range],
    )
    until = forms.DateTimeField(
        required=False,
        label="Until",
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        validators=[validate_time_in_range],
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The short names the history table shows, not the display names.
        self.fields["tenant"].label_from_instance = attrgetter("name")
        self.fields["queue"].label_from_instance = attrgetter("name")

    def filters(self) -> dict:
        if not self.is_valid():
            return {}
        data = self.cleaned_data
        return {
            "action": data["action"] or None,
            "queue_id": data["queue"].pk if data["queue"] else None,
            "tenant_id": data["tenant"].pk if data["tenant"] else None,
            "since": data["since"],
            "until": data["until"],
        }


class SchedulerConfigForm(forms.Form):
    text = forms.CharField(
        label="volcano-scheduler.conf",
        # No soft wrap: a wrapped YAML line reads as a line of its own at the wrong indent.
        widget=forms.Textarea(
            attrs={"class": "code", "spellcheck": "false", "rows": 24, "wrap": "off"}
        ),
        strip=False,
    )
    comment = forms.CharField(required=False, max_length=500, help_text="What changed and why.")
    activate = forms.BooleanField(required=False, initial=True, label="Activate on save")
