"""Field validators of the jobs app: the job spec's rules (jobspec) as Django validators."""

from django.core.exceptions import ValidationError

from jobspec.names import (
    env_name_error,
    image_error,
    label_key_error,
    label_value_error,
    object_name_error,
)
from jobspec.tolerations import toleration_errors

PRIORITY_CLASSES_NOT_A_LIST = "must be a list of priority class names"


def validate_tolerations(value: object) -> None:
    if errors := toleration_errors(value):
        raise ValidationError(errors, code="tolerations")


def validate_priority_class_names(value: object) -> None:
    """A list of PriorityClass names (Kubernetes object names)."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError(PRIORITY_CLASSES_NOT_A_LIST, code="priority_classes")
    for name in value:
        if refusal := object_name_error(name):
            raise ValidationError(f"{name}: {refusal}", code="priority_classes")


def validate_image(value: object) -> None:
    if isinstance(value, str) and (refusal := image_error(value)):
        raise ValidationError(refusal, code="image")


def validate_env_names(value: object) -> None:
    """The names of a task's environment (the values are validate_str_dict's)."""
    for name in value if isinstance(value, dict) else ():
        if isinstance(name, str) and (refusal := env_name_error(name)):
            raise ValidationError(f"{name!r}: {refusal}", code="env_name")


def validate_node_selector(value: object) -> None:
    """A node selector's keys and values, as labels (its types are validate_str_dict's)."""
    for key, label in value.items() if isinstance(value, dict) else ():
        if not isinstance(key, str) or not isinstance(label, str):
            continue
        if refusal := label_key_error(key) or label_value_error(label):
            raise ValidationError(f"{key!r}: {refusal}", code="node_selector")
