"""Aligned plain-text tables."""

from collections.abc import Sequence
from typing import Any


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def cores(millis: int) -> str:
    """Millicores as the --cpu flag and the form take them: 8000 -> "8", 500 -> "0.5"."""
    return f"{millis / 1000:g}"


def hours(value: float) -> str:
    """Hours to a tenth, as the usage page shows them (the JSON keeps the thousandths)."""
    return f"{value:.1f}"


def gib(size: int) -> str:
    """Bytes in GiB as the --memory flag takes them: 64 GiB -> "64Gi", 512 MiB -> "0.5Gi"."""
    return f"{round(size / 2**30, 3):g}Gi"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    texts = [[cell(value) for value in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in texts:
        for index, text in enumerate(row):
            widths[index] = max(widths[index], len(text))
    lines = ["  ".join(h.upper().ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in texts:
        lines.append("  ".join(t.ljust(w) for t, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)
