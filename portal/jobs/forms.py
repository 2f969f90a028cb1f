"""Job submission forms: shape and unit parsing only; the rules live in `job_submit`."""

import re
import shlex
from decimal import Decimal, InvalidOperation
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet

from portal.common.yamlsafe import UntrustedYAMLError, yaml_load_untrusted
from portal.queues.models import Queue

GPU_MODEL_LABEL = "gpu-model"
MEMORY_INVALID = 'use a size such as "16Gi", "512Mi" or a number of GiB'
CPU_INVALID = 'use cores such as "4" or "0.5", or millicores such as "500m"'
COMMAND_INVALID = "could not split the command: {error}"
YAML_INVALID = "not valid YAML: {error}"
UPLOAD_NOT_UTF8 = "the file is not UTF-8 text"
YAML_NOT_A_MAPPING = "the file must hold one Volcano Job mapping"
UPLOAD_TOO_LARGE = "the file is larger than {limit} KiB"
UPLOAD_LIMIT_BYTES = 256 * 1024
QUANTITY_TOO_LARGE = "this is more than any node has"
QUANTITY_MAX = 2**63 - 1

_MEMORY_UNITS = {
    "": 1024**3,  # a bare number means GiB
    "ki": 1024,
    "mi": 1024**2,
    "gi": 1024**3,
    "ti": 1024**4,
    "k": 1000,
    "m": 1000**2,
    "g": 1000**3,
    "t": 1000**4,
    "b": 1,
}
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(text: str) -> int:
    """`16Gi` / `512Mi` / `1.5` (GiB) -> bytes. Raises ValueError."""
    match = _QUANTITY.match(str(text))
    if not match:
        raise ValueError(text)
    unit = match.group(2).lower()
    if unit not in _MEMORY_UNITS:
        raise ValueError(text)
    return int(Decimal(match.group(1)) * _MEMORY_UNITS[unit])


def parse_cpu(text: str) -> int:
    """`4` / `0.5` cores or `500m` -> millicores. Raises ValueError."""
    match = _QUANTITY.match(str(text))
    if not match or match.group(2) not in ("", "m"):
        raise ValueError(text)
    try:
        value = Decimal(match.group(1))
    except InvalidOperation as error:
        raise ValueError(text) from error
    return int(value) if match.group(2) == "m" else int(value * 1000)


def _bounded_quantity(value: int) -> int:
    # Thousands of digits parse fine but break later steps (str() of such an int raises).
    if value > QUANTITY_MAX:
        raise ValidationError(QUANTITY_TOO_LARGE, code="max_value")
    return value


class MemoryField(forms.CharField):
    def to_python(self, value: Any) -> int | None:
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return _bounded_quantity(parse_memory(value))
        except (ValueError, InvalidOperation) as error:
            raise ValidationError(MEMORY_INVALID, code="invalid") from error


class CpuField(forms.CharField):
    def to_python(self, value: Any) -> int | None:
        value = super().to_python(value)
        if value in self.empty_values:
            return None
        try:
            return _bounded_quantity(parse_cpu(value))
        except (ValueError, InvalidOperation) as error:
            raise ValidationError(CPU_INVALID, code="invalid") from error


class JobSubmitForm(forms.Form):
    queue = forms.ModelChoiceField(queryset=Queue.objects.none(), empty_label=None)
    name = forms.CharField(max_length=63, help_text="Lower-case letters, digits and dashes.")
    priority = forms.IntegerField(initial=0, help_text="Higher runs first inside the queue.")
    min_available = forms.IntegerField(
        required=False,
        min_value=1,
        label="Gang min available",
        help_text="Pods that must start together. Empty: all replicas.",
    )
    expected_duration_seconds = forms.IntegerField(
        required=False, min_value=1, label="Expected duration (s)"
    )
    gpu_model = forms.ChoiceField(
        required=False, label="GPU model", help_text="Node selector gpu-model; empty: any."
    )

    def __init__(self, *args: Any, queues: QuerySet[Queue], gpu_models: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["queue"].queryset = queues
        self.fields["queue"].label_from_instance = lambda q: f"{q.name} ({q.tenant.name})"
        self.fields["gpu_model"].choices = [("", "any")] + [(m, m) for m in gpu_models]


class TaskForm(forms.Form):
    name = forms.CharField(max_length=63, label="Role", initial="worker")
    replicas = forms.IntegerField(min_value=1, initial=1)
    image = forms.CharField(max_length=500, initial="ghcr.io/example/trainer:latest")
    command = forms.CharField(
        required=False, help_text="Shell-style, e.g. python train.py --lr 3e-4"
    )
    gpus = forms.IntegerField(min_value=0, initial=1, label="GPUs / replica")
    cpu = CpuField(required=False, initial="8", label="CPU / replica", help_text="Cores or 500m.")
    memory = MemoryField(
        required=False, initial="64Gi", label="Memory / replica", help_text="16Gi, 512Mi or GiB."
    )

    def clean_command(self) -> list[str]:
        text = self.cleaned_data.get("command") or ""
        try:
            return shlex.split(text)
        except ValueError as error:
            raise ValidationError(COMMAND_INVALID.format(error=error)) from error

    def as_task(self, *, gpu_model: str) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"],
            "replicas": data["replicas"],
            "image": data["image"],
            "command": data["command"],
            "gpus": data["gpus"],
            "cpu_millis": data["cpu"] or 0,
            "memory_bytes": data["memory"] or 0,
            "node_selector": {GPU_MODEL_LABEL: gpu_model} if gpu_model else {},
        }


MAX_TASKS = 20
# absolute_max: Django otherwise builds (and renders) up to max_num + 1000 forms for whatever
# TOTAL_FORMS a client posts: one request cost half a minute of CPU and a 2 MB page.
TaskFormSet = forms.formset_factory(
    TaskForm,
    extra=0,
    min_num=1,
    validate_min=True,
    can_delete=True,
    max_num=MAX_TASKS,
    validate_max=True,
    absolute_max=MAX_TASKS,
)

# job_submit error keys -> (form, field) on the page.
JOB_FIELD_FOR_KEY = {
    "queue": "queue",
    "name": "name",
    "priority": "priority",
    "min_available": "min_available",
    "expected_duration_seconds": "expected_duration_seconds",
}
TASK_FIELD_FOR_KEY = {
    "name": "name",
    "replicas": "replicas",
    "image": "image",
    "command": "command",
    "gpus": "gpus",
    "cpu_millis": "cpu",
    "memory_bytes": "memory",
}
_TASK_KEY = re.compile(r"^tasks\[(\d+)\](?:\.(\w+))?$")


def submit_errors_apply(
    *, error: ValidationError, form: JobSubmitForm, task_forms: list[TaskForm]
) -> None:
    """Put job_submit's errors (`name`, `tasks[1].gpus`, ...) on the matching form fields.

    `task_forms[i]` is the form that produced `tasks[i]` (deleted forms left out).
    """
    for key, messages in error.message_dict.items():
        match = _TASK_KEY.match(key)
        if match:
            index, field = int(match.group(1)), match.group(2)
            if index < len(task_forms):
                target = task_forms[index]
                if field == "node_selector":
                    form.add_error("gpu_model", messages)
                    continue
                target.add_error(TASK_FIELD_FOR_KEY.get(field or ""), messages)
                continue
        if key in JOB_FIELD_FOR_KEY:
            form.add_error(JOB_FIELD_FOR_KEY[key], messages)
        else:
            form.add_error(None, [f"{key}: {message}" for message in messages])


class JobUploadForm(forms.Form):
    manifest = forms.FileField(
        label="Volcano Job YAML", help_text="batch.volcano.sh/v1alpha1 Job, one document."
    )

    def clean_manifest(self) -> dict[str, Any]:
        upload = self.cleaned_data["manifest"]
        if upload.size > UPLOAD_LIMIT_BYTES:
            raise ValidationError(UPLOAD_TOO_LARGE.format(limit=UPLOAD_LIMIT_BYTES // 1024))
        try:
            text = upload.read(UPLOAD_LIMIT_BYTES + 1).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValidationError(UPLOAD_NOT_UTF8) from error
        try:
            document = yaml_load_untrusted(text)
        except UntrustedYAMLError as error:
            raise ValidationError(YAML_INVALID.format(error=error.message)) from error
        if not isinstance(document, dict):
            raise ValidationError(YAML_NOT_A_MAPPING)
        return document
