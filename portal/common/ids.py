"""Object ids from user text (query strings, path-like references)."""

import re

# ASCII digits only: str.isdigit() also accepts "³" or "٣", which int() then rejects.
_ID = re.compile(r"[0-9]{1,18}")


def parse_id(text: str | None) -> int | None:
    """The id `text` spells, or None if it is not a plain positive integer of sane size."""
    if text and _ID.fullmatch(text):
        return int(text)
    return None
