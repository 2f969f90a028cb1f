"""The report's parameters, checked once for the API, the page and its CSV."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

from django.core.exceptions import ValidationError

MONTH_MALFORMED = "expected a month as YYYY-MM, e.g. 2026-11"
MONTH_IN_FUTURE = "{month} has not started yet (the current month is {current})"
MONTH_PATTERN = re.compile(r"(\d{4})-(\d{2})")


def current_month(now: datetime) -> date:
    return now.astimezone(UTC).date().replace(day=1)


def month_parse(text: str, *, now: datetime) -> date:
    """`YYYY-MM` as the first day of that month; the current month at most (it is partial
    until it ends)."""
    found = MONTH_PATTERN.fullmatch(text.strip())
    if found is None:
        raise ValidationError(MONTH_MALFORMED)
    year, month = int(found[1]), int(found[2])
    if not 1 <= month <= 12 or year < 1970:
        raise ValidationError(MONTH_MALFORMED)
    first = date(year, month, 1)
    current = current_month(now)
    if first > current:
        raise ValidationError(
            MONTH_IN_FUTURE.format(month=f"{first:%Y-%m}", current=f"{current:%Y-%m}")
        )
    return first
