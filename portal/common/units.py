"""Resources in the units people type into the forms: cores (not millicores) and GiB (not
bytes). One formatter for every page, template (the `portal_ui` filters) and CSV alike; cores
and GiB are the job spec's own (jobspec.units), so its messages read as the pages do."""

from __future__ import annotations

from datetime import datetime

from jobspec.units import GiB, cores, gib, number_text

__all__ = ["GiB", "ago", "cores", "cpu_text", "duration", "gib", "gpus", "memory_text"]


def gpus(amount: int | float | None) -> str:
    """32 -> "32 GPUs", 1 -> "1 GPU", 0.25 -> "0.25 GPUs", 14.5 -> "14.5 GPUs"."""
    if amount is None:
        return "–"
    number = number_text(amount, 3)
    return f"{number} GPU" if number == "1" else f"{number} GPUs"


def cpu_text(millis: int) -> str:
    """A number of millicores as a form's CPU field takes it, exactly: 8000 -> "8",
    500 -> "0.5", 1234 -> "1.234"."""
    whole, part = divmod(int(millis), 1000)
    return f"{whole}.{part:03d}".rstrip("0") if part else str(whole)


def memory_text(size: int) -> str:
    """A number of bytes as a form's memory field takes it, exactly: 64 GiB -> "64Gi",
    512 MiB -> "512Mi", 1000 -> "1000b", 0 -> "0"."""
    if size == 0:
        return "0"
    for unit, factor in (("Gi", GiB), ("Mi", 1024**2), ("Ki", 1024)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}b"


def duration(seconds: int | float | None) -> str:
    """45 -> "45 s", 2400 -> "40 min", 5400 -> "1 h 30 min", 90000 -> "25 h"."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min" + (f" {rest} s" if rest else "")
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h" + (f" {minutes} min" if minutes else "")


def ago(moment: datetime | None, now: datetime) -> str:
    """How long before `now`, coarsely: "just now", "5 min ago", "3 h ago", "2 days ago"."""
    if moment is None:
        return "never"
    seconds = max((now - moment).total_seconds(), 0)
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 2 * 86400:
        return f"{int(seconds // 3600)} h ago"
    return f"{int(seconds // 86400)} days ago"
