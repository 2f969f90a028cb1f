from django import forms


class ApiTokenCreateForm(forms.Form):
    """Shape only; the rules (name, most days, tokens per user) are the service's."""

    name = forms.CharField(
        max_length=100, help_text="What will use it, e.g. 'laptop CLI' or 'nightly sweep'."
    )
    expires_in_days = forms.IntegerField(label="Expires in (days)", min_value=1, max_value=100_000)
