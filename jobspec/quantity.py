"""Kubernetes resource quantities ("4", "500m", "16Gi", 0.5) read as exact Decimals. Pure."""

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

BAD_QUANTITY = 'not a Kubernetes quantity (examples: "4", "500m", "16Gi")'
NEGATIVE_QUANTITY = "must not be negative"

_QUANTITY_RE = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")
_SUFFIXES = {
    None: Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}


def parse_quantity(value: Any) -> Decimal:
    """A Kubernetes resource quantity as a Decimal; ValueError with a message otherwise."""
    if isinstance(value, bool):
        raise ValueError(BAD_QUANTITY)
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(BAD_QUANTITY)
        number = Decimal(repr(value))
    elif isinstance(value, str) and len(value) <= 64:
        match = _QUANTITY_RE.match(value.strip())
        if not match:
            raise ValueError(BAD_QUANTITY)
        try:
            base = Decimal(match.group(1))
        except InvalidOperation as error:
            raise ValueError(BAD_QUANTITY) from error
        if abs(base.adjusted()) > 30:
            raise ValueError(BAD_QUANTITY)
        number = base * _SUFFIXES[match.group(2)]
    else:
        raise ValueError(BAD_QUANTITY)
    if not number.is_finite():
        raise ValueError(BAD_QUANTITY)
    if number < 0:
        raise ValueError(NEGATIVE_QUANTITY)
    return number
