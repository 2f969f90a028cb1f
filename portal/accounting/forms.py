from django import forms
from django.core.exceptions import ValidationError
from django.utils import timezone

from .report import current_month, month_parse
from .selectors import GROUP_BY


class ReportForm(forms.Form):
    """The usage page's parameters: the same rules as the API (portal/accounting/report.py)."""

    group_by = forms.ChoiceField(
        choices=[(g, g.title()) for g in GROUP_BY], initial="tenant", label="Per"
    )
    month = forms.CharField(
        label="Month (UTC)", widget=forms.TextInput(attrs={"type": "month"}), max_length=20
    )

    def clean_month(self):
        try:
            return month_parse(self.cleaned_data["month"], now=timezone.now())
        except ValidationError as error:
            raise forms.ValidationError(error.messages) from error

    @classmethod
    def from_query(cls, query) -> "ReportForm":
        data = {
            "group_by": query.get("group_by", "tenant"),
            "month": query.get("month") or f"{current_month(timezone.now()):%Y-%m}",
        }
        return cls(data)
