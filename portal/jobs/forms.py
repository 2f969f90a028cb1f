"""Job submission forms: shape and unit parsing only; the rules and limits live in `job_submit`
(`jobspec.limits`). Fields show the limits in force (portal.jobs.limits) as HTML attributes."""

import re
import shlex
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import QueryDict

from jobspec.limits import (
    DURATION_MAX_SECONDS,
    IMAGE_MAX_CHARS,
    NAME_MAX_CHARS,
    PRIORITY_MAX,
    command_line_error,
    command_line_max,
    task_count_error,
)
from jobspec.tolerations import tolerations_parse
from jobspec.volcano import DOCUMENTS_MAX
from portal.cluster.models import GPU_MODEL_LABEL
from portal.common.fields import (  # noqa: F401 (re-exported)
    CPU_INVALID,
    MEMORY_INVALID,
    CpuField,
    MemoryField,
    QuantityField,
    parse_cpu,
    parse_memory,
)
from portal.common.units import cores, cpu_text, gib, memory_text
from portal.common.yamlsafe import (
    UntrustedYAMLError,
    yaml_load_all_untrusted,
    yaml_load_untrusted,
)
from portal.jobs.limits import job_limits
from portal.queues.models import Queue

from .models import TASK_DEFAULT_CPU_MILLIS, TASK_DEFAULT_MEMORY_BYTES

COMMAND_INVALID = "could not split the command: {error}"
YAML_INVALID = "not valid YAML: {error}"
UPLOAD_NOT_UTF8 = "the file is not UTF-8 text"
YAML_NOT_A_MAPPING = (
    "document {number} of the {source} is not a mapping: each must be a Kubernetes object"
)
YAML_NO_DOCUMENT = "the file holds no YAML document"
TEMPLATE_NOT_A_MAPPING = "a pod template is a mapping: {spec: {containers: [...]}}"
UPLOAD_TOO_LARGE = "the file is larger than {limit} KiB"
PASTE_TOO_LARGE = "the text is larger than {limit} KiB"
UPLOAD_NOTHING = "choose a file or paste a manifest"
UPLOAD_BOTH = "choose a file or paste a manifest, not both"
UPLOAD_LIMIT_BYTES = 256 * 1024


class GpuMemoryField(QuantityField):
    """GPU memory of one device: a size as for memory ("10Gi", a bare number in GiB), kept in
    MiB (rounded up)."""

    invalid = MEMORY_INVALID

    def parse(self, text: str) -> int:
        return -(-parse_memory(text) // 1024**2)


def _shows(field: forms.Field, **attrs: int) -> None:
    """Show a limit in the page (the form is `novalidate`: `job_submit` checks it)."""
    field.widget.attrs.update({key: str(value) for key, value in attrs.items()})


QUEUE_NOT_OFFERED = "not an open queue you may submit to: choose one from the list"


class JobSubmitForm(forms.Form):
    queue = forms.ModelChoiceField(
        queryset=Queue.objects.none(),
        empty_label=None,
        # Another tenant's, a closed or an unknown queue: Django's "Select a valid choice"
        # said nothing of why.
        error_messages={"invalid_choice": QUEUE_NOT_OFFERED},
    )
    name = forms.CharField(help_text="Lower-case letters, digits and dashes.")
    priority = forms.IntegerField(initial=0, help_text="Higher runs first inside the queue.")
    min_available = forms.IntegerField(
        required=False,
        label="Gang min available",
        help_text="Pods that must start together. Empty: all replicas.",
    )
    expected_duration_seconds = forms.IntegerField(
        required=False,
        label="Expected duration (seconds)",
        help_text="e.g. 3600 for an hour; helps tell waiting jobs when GPUs free up (the "
        "demo's simulated pods run this long). Empty: unknown.",
    )
    gpu_model = forms.ChoiceField(
        required=False, label="GPU model", help_text="Node selector gpu-model; empty: any."
    )

    def __init__(self, *args: Any, queues: QuerySet[Queue], gpu_models: list[str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["queue"].queryset = queues
        self.fields["queue"].label_from_instance = lambda q: f"{q.name} ({q.tenant.name})"
        self.fields["gpu_model"].choices = [("", "any")] + [(m, m) for m in gpu_models]
        _shows(self.fields["name"], maxlength=NAME_MAX_CHARS)
        _shows(self.fields["priority"], min=-PRIORITY_MAX, max=PRIORITY_MAX)
        _shows(self.fields["min_available"], min=1, max=job_limits().replicas_per_job)
        _shows(self.fields["expected_duration_seconds"], min=1, max=DURATION_MAX_SECONDS)


class TaskForm(forms.Form):
    name = forms.CharField(label="Role", initial="worker")
    replicas = forms.IntegerField(initial=1)
    image = forms.CharField(initial="ghcr.io/example/trainer:latest")
    command = forms.CharField(
        required=False, help_text="Shell-style, e.g. python train.py --lr 3e-4"
    )
    gpus = forms.DecimalField(
        initial=1,
        decimal_places=3,
        label="GPUs / replica",
        help_text="Whole GPUs, or a share of one such as 0.25.",
    )
    gpu_memory = GpuMemoryField(
        required=False,
        label="GPU memory / replica",
        help_text="A share of one GPU by its memory, e.g. 10Gi (with GPUs 0 or below 1).",
    )
    cpu = CpuField(
        required=False,
        initial=cpu_text(TASK_DEFAULT_CPU_MILLIS),
        label="CPU cores / replica",
        help_text=f"e.g. 4 or 0.5 (500m also works). Empty: {cores(TASK_DEFAULT_CPU_MILLIS)}.",
    )
    memory = MemoryField(
        required=False,
        initial=memory_text(TASK_DEFAULT_MEMORY_BYTES),
        label="Memory / replica",
        help_text=f"e.g. 16 GiB; accepts 16Gi, 512Mi, or a number of GiB. "
        f"Empty: {gib(TASK_DEFAULT_MEMORY_BYTES)}.",
    )
    tolerations = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        label="Tolerations (advanced)",
        help_text="One per line: key=value:Effect, key:Effect (any value) or * (any taint).",
    )

    pod_template = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        label="Pod template (advanced, YAML)",
        help_text="A Kubernetes pod template for this role ({spec: {containers: [...]}}): "
        "several containers, init containers, volumes (emptyDir Memory for /dev/shm), env from "
        "secrets, pull secrets. When given, it replaces the image, command, GPUs, CPU and "
        "memory above.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limits = job_limits()
        _shows(self.fields["name"], maxlength=NAME_MAX_CHARS)
        _shows(self.fields["replicas"], min=1, max=limits.replicas_per_task)
        _shows(self.fields["image"], maxlength=IMAGE_MAX_CHARS)
        _shows(self.fields["gpus"], min=0, max=limits.gpus_per_pod)
        self.fields["replicas"].help_text = f"1 to {limits.replicas_per_task}."
        self.fields["gpus"].help_text = f"0 to {limits.gpus_per_pod}. A share of one GPU: 0.25."
        self.fields["gpus"].widget.attrs["step"] = "any"  # 0.25 as well as 8
        _shows(self.fields["command"], maxlength=command_line_max(limits))

    def has_changed(self) -> bool:
        """Always: a role on the page is a role, its initial values included (the formset
        would otherwise take an untouched role for an empty extra form and ask for one)."""
        return True

    def clean_command(self) -> list[str]:
        text = self.cleaned_data.get("command") or ""
        if too_long := command_line_error(length=len(text), limits=job_limits()):
            raise ValidationError(too_long)
        try:
            return shlex.split(text)
        except ValueError as error:
            raise ValidationError(COMMAND_INVALID.format(error=error)) from error

    def clean_tolerations(self) -> list[dict[str, str]]:
        try:
            return tolerations_parse(self.cleaned_data.get("tolerations") or "")
        except ValueError as error:
            raise ValidationError(str(error)) from error

    def clean_pod_template(self) -> dict[str, Any] | None:
        text = self.cleaned_data.get("pod_template") or ""
        if not text.strip():
            return None
        if len(text.encode("utf-8")) > UPLOAD_LIMIT_BYTES:
            raise ValidationError(PASTE_TOO_LARGE.format(limit=UPLOAD_LIMIT_BYTES // 1024))
        try:
            document = yaml_load_untrusted(text)
        except UntrustedYAMLError as error:
            raise ValidationError(YAML_INVALID.format(error=error.message)) from error
        if not isinstance(document, dict):
            raise ValidationError(TEMPLATE_NOT_A_MAPPING)
        return document

    def as_task(self, *, gpu_model: str) -> dict[str, Any]:
        data = self.cleaned_data
        if data.get("pod_template") is not None:
            # The template gives the pod; job_submit checks it like the API's.
            return {
                "name": data["name"],
                "replicas": data["replicas"],
                "pod_template": data["pod_template"],
                # Beside a template only if given: a template states its own.
                **({"tolerations": data["tolerations"]} if data["tolerations"] else {}),
            }
        return {
            "name": data["name"],
            "replicas": data["replicas"],
            "image": data["image"],
            "command": data["command"],
            "gpus": data["gpus"],
            "gpu_memory_mib": data["gpu_memory"] or 0,
            "node_selector": {GPU_MODEL_LABEL: gpu_model} if gpu_model else {},
            "tolerations": data["tolerations"],
            # Left empty: the job gets the one default (the model's), as from the API.
            **{
                key: data[field]
                for key, field in (("cpu_millis", "cpu"), ("memory_bytes", "memory"))
                if data[field] is not None
            },
        }


class BaseTaskFormSet(forms.BaseFormSet):
    """Builds at most one form more than the tasks a job may have: Django otherwise builds
    (and renders) up to max_num + 1000 forms for whatever TOTAL_FORMS a client posts (one
    request cost half a minute of CPU and a 2 MB page). One task too many still reaches
    `job_submit`, which refuses it; a post of more forms gets the same message here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.limits = job_limits()
        self.max_num = self.limits.tasks_per_job
        self.absolute_max = self.limits.tasks_per_job + 1
        super().__init__(*args, **kwargs)

    def full_clean(self) -> None:
        super().full_clean()
        errors = self._non_form_errors.as_data() if self._non_form_errors else []
        if any(error.code == "too_many_forms" for error in errors):
            posted = self.management_form.cleaned_data[forms.formsets.TOTAL_FORM_COUNT]
            self._non_form_errors = self.error_class(
                [task_count_error(posted, limits=self.limits)],
                error_class="nonform",
                renderer=self.renderer,
            )


TaskFormSet = forms.formset_factory(
    TaskForm, formset=BaseTaskFormSet, extra=0, min_num=1, validate_min=True, can_delete=True
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
    "gpu_milli": "gpus",
    "gpu_memory_mib": "gpu_memory",
    "cpu_millis": "cpu",
    "memory_bytes": "memory",
    "tolerations": "tolerations",
    "pod_template": "pod_template",
}
_TASK_KEY = re.compile(r"^tasks\[(\d+)\](?:\.(\w+))?$")
_TEMPLATE_KEY = re.compile(r"^tasks\[(\d+)\]\.pod_template(?:\.(.+))?$")


def submit_errors_apply(
    *,
    error: ValidationError,
    form: JobSubmitForm,
    formset: BaseTaskFormSet,
    task_forms: list[TaskForm],
) -> None:
    """Put job_submit's errors (`name`, `tasks[1].gpus`, ...) on the matching form fields;
    those about the tasks as a whole (`tasks`: how many, replicas in all) on the formset.

    `task_forms[i]` is the form that produced `tasks[i]` (deleted forms left out).
    """
    for key, messages in error.message_dict.items():
        if key == "tasks":
            formset.non_form_errors().extend(messages)
            continue
        template = _TEMPLATE_KEY.match(key)
        if template and int(template.group(1)) < len(task_forms):
            # Inside the YAML pane: the message names the path within the template.
            path = template.group(2)
            task_forms[int(template.group(1))].add_error(
                "pod_template", [f"{path}: {message}" if path else message for message in messages]
            )
            continue
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
    """Volcano Job manifests, as a file or pasted text (one of the two), one or several YAML
    documents; `documents` are the parsed mappings."""

    manifest = forms.FileField(
        required=False,
        label="Volcano Job YAML file",
        help_text="batch.volcano.sh/v1alpha1 Jobs: one, or several documents apart by ---; "
        "other kinds (a PriorityClass, a Queue) are skipped.",
    )
    text = forms.CharField(
        required=False,
        strip=False,
        label="Or paste the YAML",
        widget=forms.Textarea(
            attrs={"rows": 16, "spellcheck": "false", "wrap": "off", "class": "code"}
        ),
    )

    # The chosen file's text once read (None: no file, or not text): a failed upload shows it
    # in the paste box (JobUploadView), as a browser never refills a file field.
    file_text: str | None = None

    def clean_manifest(self) -> str | None:
        upload = self.cleaned_data["manifest"]
        if upload is None:
            return None
        if upload.size > UPLOAD_LIMIT_BYTES:
            raise ValidationError(UPLOAD_TOO_LARGE.format(limit=UPLOAD_LIMIT_BYTES // 1024))
        try:
            self.file_text = upload.read(UPLOAD_LIMIT_BYTES + 1).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValidationError(UPLOAD_NOT_UTF8) from error
        return self.file_text

    def keep_file_text(self) -> bool:
        """After a failed upload, the file's text in the paste box (when the paste box was
        empty); whether it was put there."""
        if self.file_text is None or (self.data.get("text") or "").strip():
            return False
        data = QueryDict(mutable=True)
        data.update(self.data)
        data["text"] = self.file_text
        self.data = data
        return True

    def clean_text(self) -> str | None:
        text = self.cleaned_data["text"]
        if not text.strip():
            return None
        if len(text.encode("utf-8")) > UPLOAD_LIMIT_BYTES:
            raise ValidationError(PASTE_TOO_LARGE.format(limit=UPLOAD_LIMIT_BYTES // 1024))
        return text

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        given = [field for field in ("manifest", "text") if data.get(field) is not None]
        if not given:
            raise ValidationError(UPLOAD_NOTHING)
        if len(given) == 2:
            raise ValidationError(UPLOAD_BOTH)
        (field,) = given
        try:
            documents = yaml_load_all_untrusted(data[field], max_documents=DOCUMENTS_MAX)
        except UntrustedYAMLError as error:
            self.add_error(field, YAML_INVALID.format(error=error.message))
            return data
        if not documents:
            self.add_error(field, YAML_NO_DOCUMENT)
            return data
        for number, document in enumerate(documents, start=1):
            if not isinstance(document, dict):
                source = "file" if field == "manifest" else "pasted text"
                self.add_error(field, YAML_NOT_A_MAPPING.format(number=number, source=source))
                return data
        data["documents"] = documents
        return data
