from django import forms

from .services import expiry_days_max


class ApiTokenCreateForm(forms.Form):
    """Shape only; the rules (name, most days, tokens per user) are the service's."""

    name = forms.CharField(
        max_length=100, help_text="What will use it, e.g. 'laptop CLI' or 'nightly sweep'."
    )
    # No range here: the service's one rule ("must be between 1 and N days") answers 0 and
    # 9999 alike (the form said "greater than or equal to 1" for the one, the service the other).
    expires_in_days = forms.IntegerField(label="Expires in (days)")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The limit is a setting (API_TOKEN_MAX_DAYS), read when the form is made.
        self.fields["expires_in_days"].help_text = f"At most {expiry_days_max()} days."
