"""Every limit on what a job may ask for, checked here for every way a job comes in.

`job_submit` calls these checks, so the submit form, the API (JSON or a Volcano manifest), the
YAML upload page and the CLI (a client of the API) refuse the same job with the same message
under the same field. Forms and serializers check shape only; a form may *display* a limit
(an HTML `max` or `maxlength`) read from the limits in force, never check it itself.

Limits an operator may tune are settings (portal/settings/limits.py), handed in as a
`JobLimits` (portal.jobs.limits reads them at call time); the fixed ones follow the database
columns and Kubernetes. Messages name the limit and the numbers:
"at most 64 GPUs per pod (JOB_MAX_GPUS_PER_POD); this asks for 5000".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from jobspec import units
from jobspec.gpushare import MILLI_PER_GPU, SHARING_NONE, gpus_decimal, mib_text

# Fixed limits: the columns, labels and annotations these values end up in.
NAME_MAX_CHARS = 63  # job and task names are DNS labels (they become Kubernetes label values)
IMAGE_MAX_CHARS = 500  # the JobTask.image column
LABEL_KEY_MAX_CHARS = 317  # a label key: DNS-subdomain prefix (253) + "/" + name (63)
LABEL_VALUE_MAX_CHARS = 63
NODE_SELECTOR_MAX_ENTRIES = 32
PRIORITY_MAX = 10**9  # either sign; Job.priority is a 32-bit column
DURATION_MAX_SECONDS = 10**8  # about three years; a 32-bit column
FIXED = "fixed"

AT_MOST = "at most {limit} {what} ({source}); this asks for {asked}"
AT_LEAST = "at least {limit} {what} ({source}); this asks for {asked}"
PENDING_PODS_EXCEEDED = (
    "tenant {tenant} may have at most {limit} pods waiting to be scheduled "
    "(JOB_MAX_PENDING_PODS_PER_TENANT); it has {pending} and this job adds {adding}"
)
COMMAND_LINE_TOO_LONG = (
    "a command line of {length} characters is longer than any command within the limits "
    "needs (at most {limit}, from JOB_MAX_COMMAND_CHARS and JOB_MAX_COMMAND_ITEMS)"
)
# Fractional GPUs (jobspec.gpushare): a share of ONE device.
GPU_MILLI_MAX = MILLI_PER_GPU - 1  # a whole card is `gpus: 1`
GPUS_NOT_A_NUMBER = "must be a number of GPUs: whole (2) or a fraction of one GPU (0.25)"
GPUS_TOO_LARGE = "is too large a number of GPUs"
GPUS_PRINTABLE_MAX = 10**18  # a whole number past this is not read into an int at all
GPUS_NEGATIVE = "must not be negative; this asks for {asked}"
GPUS_TOO_PRECISE = (
    "at most 3 decimal places (GPUs are counted in thousandths); this asks for {asked}"
)
GPUS_FRACTION_ABOVE_ONE = (
    "a fraction of a GPU is a share of one device: {asked} is more than one GPU and not whole; "
    "ask for {whole} whole GPUs, or for a fraction below 1"
)
GPU_FRACTION_AND_WHOLE = (
    "a fraction of a GPU is a share of one device and cannot be added to whole GPUs "
    "(this asks for {gpus} GPUs and {share}); ask for one or the other"
)
GPU_MILLI_ABOVE_MAX = (
    f"at most {GPU_MILLI_MAX} milli-GPU, a share of one device ({FIXED}); this asks for "
    "{asked}: ask for whole GPUs (gpus) instead"
)
GPU_SHARING_OFF = (
    "this cluster runs no GPU sharing stack (GPU_SHARING=none), so a pod gets whole GPUs "
    "only: ask for gpus 1 or more, or ask an admin to set GPU_SHARING to volcano or hami"
)
GPU_MEMORY_UNKNOWN = (
    "no GPU in the cluster reports its memory, so a GPU memory request cannot be placed; "
    "ask for a fraction of a GPU (gpus 0.25) instead"
)
GPU_MEMORY_ABOVE_LARGEST = (
    "at most {limit} of GPU memory, the largest GPU in the cluster; this asks for {asked}"
)
# Beyond this a number is not worth printing (and past ~4,300 digits str() refuses it).
_PRINTABLE_BITS = 64


@dataclass(frozen=True, slots=True)
class JobLimits:
    """The limits an operator may tune; SETTINGS names the setting of each field."""

    gpus_per_pod: int
    cpu_millis_per_pod: int
    memory_bytes_per_pod: int
    tasks_per_job: int
    replicas_per_task: int
    replicas_per_job: int
    pending_pods_per_tenant: int
    command_items: int
    command_chars: int
    env_vars: int
    env_chars: int


# JobLimits field -> (its setting, what it counts, as the messages say it).
SETTINGS: dict[str, tuple[str, str]] = {
    "gpus_per_pod": ("JOB_MAX_GPUS_PER_POD", "GPUs per pod"),
    "cpu_millis_per_pod": ("JOB_MAX_CPU_MILLIS_PER_POD", "of CPU per pod"),
    "memory_bytes_per_pod": ("JOB_MAX_MEMORY_BYTES_PER_POD", "of memory per pod"),
    "tasks_per_job": ("JOB_MAX_TASKS", "tasks per job"),
    "replicas_per_task": ("JOB_MAX_REPLICAS_PER_TASK", "replicas per task"),
    "replicas_per_job": ("JOB_MAX_REPLICAS_PER_JOB", "replicas per job"),
    "pending_pods_per_tenant": ("JOB_MAX_PENDING_PODS_PER_TENANT", "pending pods per tenant"),
    "command_items": ("JOB_MAX_COMMAND_ITEMS", "command and argument items"),
    "command_chars": ("JOB_MAX_COMMAND_CHARS", "characters of command and arguments"),
    "env_vars": ("JOB_MAX_ENV_VARS", "environment variables"),
    "env_chars": ("JOB_MAX_ENV_CHARS", "characters of environment names and values"),
}
assert set(SETTINGS) == {f.name for f in fields(JobLimits)}  # noqa: S101 - checks this module's own two tables agree, at import

# JobLimits fields stored in smaller units than people type: how an amount reads, and the unit
# it is stored in (shown only where rounding would hide the difference).
_STORED_UNITS: dict[str, tuple[Callable[[int], str], str]] = {
    "cpu_millis_per_pod": (units.cores, "millicores"),
    "memory_bytes_per_pod": (units.gib, "bytes"),
}

# Task field -> the JobLimits field that bounds it (the per-pod and per-task numbers).
_TASK_NUMBERS = {
    "replicas": "replicas_per_task",
    "gpus": "gpus_per_pod",
    "cpu_millis": "cpu_millis_per_pod",
    "memory_bytes": "memory_bytes_per_pod",
}


def shown(value: int) -> str:
    """A number for a message; astronomically large ones are summarised."""
    if abs(value) > 2**_PRINTABLE_BITS:
        return f"more than 2^{_PRINTABLE_BITS}"
    return str(value)


def exceeded(limits: JobLimits, name: str, asked: int) -> str:
    """The message for `asked` above the tunable limit `name` (a JobLimits field). CPU and
    memory read in the units the form takes (cores, GiB), not the stored millicores and bytes."""
    setting, what = SETTINGS[name]
    limit = getattr(limits, name)
    if (unit := _STORED_UNITS.get(name)) is None:
        return AT_MOST.format(limit=limit, what=what, source=setting, asked=shown(asked))
    amount, stored = unit
    limit_text, asked_text = amount(limit), shown(asked)
    if abs(asked) <= 2**_PRINTABLE_BITS:
        asked_text = amount(asked)
        if asked_text == limit_text:  # rounded to the same text: say the exact stored amounts
            limit_text, asked_text = f"{limit_text} ({limit} {stored})", f"{asked} {stored}"
    return AT_MOST.format(limit=limit_text, what=what, source=setting, asked=asked_text)


def task_count_error(count: int, *, limits: JobLimits) -> str | None:
    """The refusal of a job of `count` tasks, or None. Every way in calls it before it looks
    at the tasks themselves: a body of thousands of small tasks costs nothing more."""
    if count <= limits.tasks_per_job:
        return None
    return exceeded(limits, "tasks_per_job", count)


class _Errors(dict[str, list[str]]):
    def add(self, key: str, message: str) -> None:
        self.setdefault(key, []).append(message)

    def tunable(self, key: str, value: Any, limits: JobLimits, name: str) -> None:
        number = _int(value)
        if number is not None and number > getattr(limits, name):
            self.add(key, exceeded(limits, name, number))

    def fixed(self, key: str, value: Any, limit: int, what: str) -> None:
        number = _int(value)
        if number is not None and number > limit:
            self.add(key, AT_MOST.format(limit=limit, what=what, source=FIXED, asked=shown(number)))


def task_limit_errors(task: Any, *, limits: JobLimits, prefix: str) -> dict[str, list[str]]:
    """The limits one task breaks, keyed `<prefix><field>`: a JobTask, saved or not, or any
    row with its numbers (the fields it lacks are not checked)."""
    errors = _Errors()
    for field, name in _TASK_NUMBERS.items():
        errors.tunable(f"{prefix}{field}", getattr(task, field), limits, name)
    template = getattr(task, "pod_template", None)
    if isinstance(template, Mapping) and template:
        # The template's containers carry the command and environment the pod runs with;
        # the task's command and env only summarise its first container.
        errors.update(
            template_limit_errors(template, limits=limits, prefix=f"{prefix}pod_template.")
        )
        command = env = None
    else:
        command, env = getattr(task, "command", None), getattr(task, "env", None)
    if _is_str_list(command):
        key = f"{prefix}command"
        errors.tunable(key, len(command), limits, "command_items")
        errors.tunable(key, _chars(command), limits, "command_chars")
    if _is_str_mapping(env):
        key = f"{prefix}env"
        errors.tunable(key, len(env), limits, "env_vars")
        errors.tunable(key, _chars(env.keys()) + _chars(env.values()), limits, "env_chars")
    if _is_str_mapping(selector := getattr(task, "node_selector", None)):
        key = f"{prefix}node_selector"
        errors.fixed(key, len(selector), NODE_SELECTOR_MAX_ENTRIES, "node selector entries")
        errors.fixed(key, max(map(len, selector), default=0), LABEL_KEY_MAX_CHARS,
                     "characters in a label key")  # fmt: skip
        errors.fixed(key, max(map(len, selector.values()), default=0), LABEL_VALUE_MAX_CHARS,
                     "characters in a label value")  # fmt: skip
    return errors


def template_limit_errors(
    template: Mapping[str, Any], *, limits: JobLimits, prefix: str
) -> dict[str, list[str]]:
    """The command and environment limits applied to every container of a normalised pod
    template (jobspec.podtemplate): per container for the command, per pod for the
    environment (all containers' variables together, as they all end up in the pod object)."""
    errors = _Errors()
    spec = template.get("spec") or {}
    env_vars = env_chars = 0
    env_key = None  # the container at which the pod's environment crosses a limit
    for section in ("containers", "initContainers"):
        for index, container in enumerate(spec.get(section) or []):
            path = f"{prefix}spec.{section}[{index}]"
            command = [*container.get("command", []), *container.get("args", [])]
            errors.tunable(f"{path}.command", len(command), limits, "command_items")
            errors.tunable(f"{path}.command", _chars(command), limits, "command_chars")
            env = container.get("env") or []
            env_vars += len(env)
            env_chars += sum(len(item["name"]) + len(item.get("value", "")) for item in env)
            over = env_vars > limits.env_vars or env_chars > limits.env_chars
            if over and env_key is None:
                env_key = f"{path}.env"
    if env_key is not None:
        errors.tunable(env_key, env_vars, limits, "env_vars")
        errors.tunable(env_key, env_chars, limits, "env_chars")
    return errors


def job_limit_errors(
    *, replicas: Iterable[Any], priority: Any, expected_duration_seconds: Any, limits: JobLimits
) -> dict[str, list[str]]:
    """The limits the job as a whole breaks: its replicas in all, its priority and duration."""
    errors = _Errors()
    total = sum(number for value in replicas if (number := _int(value)) is not None)
    errors.tunable("tasks", total, limits, "replicas_per_job")
    errors.fixed("priority", priority, PRIORITY_MAX, "for priority")
    low = _int(priority)
    if low is not None and low < -PRIORITY_MAX:
        errors.add(
            "priority",
            AT_LEAST.format(
                limit=-PRIORITY_MAX, what="for priority", source=FIXED, asked=shown(low)
            ),
        )
    errors.fixed("expected_duration_seconds", expected_duration_seconds, DURATION_MAX_SECONDS,
                 "seconds of expected duration")  # fmt: skip
    return errors


def command_line_max(limits: JobLimits) -> int:
    """The longest shell-style command line (the form's text) a command within the limits
    needs, with room to spare: any command can be written with each character escaped by a
    backslash and a space between items, half of this. Longer text is refused before it is
    split (splitting 2.4 MB took 2 s)."""
    return 4 * limits.command_chars + 3 * limits.command_items


def command_line_error(*, length: int, limits: JobLimits) -> str | None:
    limit = command_line_max(limits)
    if length <= limit:
        return None
    return COMMAND_LINE_TOO_LONG.format(length=length, limit=limit)


def pending_pods_error(*, tenant: str, pending: int, adding: int, limits: JobLimits) -> str | None:
    """The refusal when `adding` more pods would take the tenant's pending pods past the cap."""
    if pending + adding <= limits.pending_pods_per_tenant:
        return None
    return PENDING_PODS_EXCEEDED.format(
        tenant=tenant, limit=limits.pending_pods_per_tenant, pending=pending, adding=adding
    )


def _int(value: Any) -> int | None:
    """`value` if it is an integer (a bool is not); anything else is the model's to refuse."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _chars(parts: Iterable[str]) -> int:
    return sum(len(part) for part in parts)


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(part, str) for part in value)


def _is_str_mapping(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    )


def gpus_number_error(value: Any) -> str | None:
    """Why `value` is not a number of GPUs a pod may ask for (whole, or below one with at
    most three decimals), or None."""
    number = gpus_decimal(value)
    if number is None:
        return GPUS_NOT_A_NUMBER
    if number < 0:
        return GPUS_NEGATIVE.format(asked=_decimal_text(number))
    if number >= GPUS_PRINTABLE_MAX:
        return GPUS_TOO_LARGE
    if number == number.to_integral_value():
        return None
    milli = number * MILLI_PER_GPU
    if milli != milli.to_integral_value():
        return GPUS_TOO_PRECISE.format(asked=_decimal_text(number))
    if number > 1:
        return GPUS_FRACTION_ABOVE_ONE.format(
            asked=_decimal_text(number),
            whole=int(number.to_integral_value(rounding="ROUND_CEILING")),
        )
    return None


def task_gpu_errors(
    task: Any, *, sharing: str, largest_device_mib: int, prefix: str
) -> dict[str, list[str]]:
    """The GPU rules one task breaks, keyed `<prefix><field>`: a share of one device is not
    added to whole GPUs, stays below one card, fits the largest device's memory, and needs a
    sharing stack. Signs and types are the model's to refuse."""
    errors = _Errors()
    gpus = _int(getattr(task, "gpus", 0)) or 0
    milli = _int(getattr(task, "gpu_milli", 0)) or 0
    memory = _int(getattr(task, "gpu_memory_mib", 0)) or 0
    if milli > GPU_MILLI_MAX:
        errors.add(f"{prefix}gpu_milli", GPU_MILLI_ABOVE_MAX.format(asked=shown(milli)))
    if milli <= 0 and memory <= 0:
        return errors
    key = f"{prefix}gpu_milli" if milli > 0 else f"{prefix}gpu_memory_mib"
    if gpus > 0:
        share = " and ".join(
            part
            for part in (
                f"{milli} milli-GPU" if milli > 0 else "",
                f"{mib_text(memory)} of GPU memory" if memory > 0 else "",
            )
            if part
        )
        errors.add(key, GPU_FRACTION_AND_WHOLE.format(gpus=shown(gpus), share=share))
    if sharing == SHARING_NONE:
        errors.add(key, GPU_SHARING_OFF)
    if memory > 0:
        if largest_device_mib <= 0:
            errors.add(f"{prefix}gpu_memory_mib", GPU_MEMORY_UNKNOWN)
        elif memory > largest_device_mib:
            errors.add(
                f"{prefix}gpu_memory_mib",
                GPU_MEMORY_ABOVE_LARGEST.format(
                    limit=mib_text(largest_device_mib), asked=mib_text(memory)
                ),
            )
    return errors


def _decimal_text(number: Any) -> str:
    text = f"{number:f}"
    if len(text) > 40:
        return "a number too long to print"
    return text.rstrip("0").rstrip(".") if "." in text else text
