"""Form fields for resources in the units people type: CPU in cores (or millicores with "m"),
memory in GiB (or any Kubernetes-style size); the cleaned value is the stored unit
(millicores, bytes). `portal.common.units.cpu_text`/`memory_text` write a stored value back
as such text, exactly."""

import re
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

MEMORY_INVALID = 'use a size such as "16Gi", "512Mi" or a number of GiB'
CPU_INVALID = 'use cores such as "4" or "0.5", or millicores such as "500m"'

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
    with localcontext() as exact:  # as many digits as the text has: no rounding
        exact.prec = len(match.group(1)) + 16
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
    if match.group(2) == "m":
        return int(value)
    with localcontext() as exact:  # as many digits as the text has: no rounding
        exact.prec = len(match.group(1)) + 8
        return int(value * 1000)


class QuantityField(forms.CharField):
    """Text in, an int out. The text's own checks (NUL characters) run on the text: the int
    may have thousands of digits (too many for str()), for `job_submit` to refuse by limit."""

    invalid = ""

    def parse(self, text: str) -> int:
        raise NotImplementedError

    def clean(self, value: Any) -> int | None:
        text = super().clean(value)
        if text in self.empty_values:
            return None
        try:
            return self.parse(text)
        except (ValueError, InvalidOperation) as error:
            raise ValidationError(self.invalid, code="invalid") from error


class MemoryField(QuantityField):
    invalid = MEMORY_INVALID

    def parse(self, text: str) -> int:
        return parse_memory(text)


class CpuField(QuantityField):
    invalid = CPU_INVALID

    def parse(self, text: str) -> int:
        return parse_cpu(text)
