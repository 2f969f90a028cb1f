"""Field validators of the jobs app: the job spec's rules (jobspec) as Django validators."""

from django.core.exceptions import ValidationError

from jobspec.tolerations import toleration_errors


def validate_tolerations(value: object) -> None:
    if errors := toleration_errors(value):
        raise ValidationError(errors, code="tolerations")
