"""CPU and memory in the units people type into the forms: cores (not millicores) and GiB (not
bytes). The job spec's messages use them; portal.common.units formats pages with the same."""

from __future__ import annotations

GiB = 1024**3


def number_text(value: float, digits: int) -> str:
    """`value` rounded to `digits` decimals, without trailing zeros: 0.50 -> "0.5"."""
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return text or "0"


def cores(millis: int | float | None) -> str:
    """96000 -> "96 cores", 500 -> "0.5 cores", 1000 -> "1 core"."""
    if millis is None:
        return "–"
    amount = number_text(millis / 1000, 3)
    return f"{amount} core" if amount == "1" else f"{amount} cores"


def gib(size: int | float | None) -> str:
    """64 GiB in bytes -> "64 GiB", 512 MiB -> "0.5 GiB", 1 TiB -> "1024 GiB"."""
    if size is None:
        return "–"
    return f"{number_text(size / GiB, 2)} GiB"
