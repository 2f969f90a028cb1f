"""Field validators shared by the apps."""

import re
from datetime import UTC, datetime

from django.core.exceptions import ValidationError

from jobspec.names import STR_NUL

# Matched with fullmatch: `$` would also accept a trailing newline ("name\n").
DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX_LENGTH = 63

DNS_LABEL_INVALID = (
    "must be a DNS label: lowercase letters, digits and '-', starting and ending with a "
    "letter or digit, at most 63 characters"
)
STR_LIST_INVALID = "must be a list of strings"
STR_DICT_INVALID = "must be a mapping of strings to strings"
DICT_INVALID = "must be a mapping"
# Times a client may ask about (query filters). Outside, arithmetic on them (a default span
# subtracted from year 1, a bucket rounded up from year 9999) overflows Python's datetime.
TIME_MIN = datetime(1970, 1, 1, tzinfo=UTC)
TIME_MAX = datetime(3000, 1, 1, tzinfo=UTC)
TIME_OUT_OF_RANGE = "must be between 1970-01-01T00:00:00Z and 2999-12-31T23:59:59Z"


def validate_dns_label(value: str) -> None:
    """The characters of a DNS label. Its length is the field's to refuse (every field using
    this has max_length=DNS_LABEL_MAX_LENGTH): a 10,000-character name got two messages for
    one problem, this one and "Ensure this value has at most 63 characters"."""
    if not isinstance(value, str):
        raise ValidationError(DNS_LABEL_INVALID, code="dns_label")
    if len(value) > DNS_LABEL_MAX_LENGTH:
        return
    if not DNS_LABEL_RE.fullmatch(value):
        raise ValidationError(DNS_LABEL_INVALID, code="dns_label")


def validate_str_list(value: object) -> None:
    if not isinstance(value, list):
        raise ValidationError(STR_LIST_INVALID, code="str_list")
    if not all(isinstance(item, str) for item in value):
        raise ValidationError(STR_LIST_INVALID, code="str_list")
    if any("\x00" in item for item in value):
        raise ValidationError(STR_NUL, code="null_characters_not_allowed")


def validate_str_dict(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError(STR_DICT_INVALID, code="str_dict")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValidationError(STR_DICT_INVALID, code="str_dict")
    if any("\x00" in k or "\x00" in v for k, v in value.items()):
        raise ValidationError(STR_NUL, code="null_characters_not_allowed")


def validate_dict(value: object) -> None:
    if not isinstance(value, dict):
        raise ValidationError(DICT_INVALID, code="dict")


def validate_time_in_range(value: datetime) -> None:
    """A timezone-aware time between TIME_MIN and TIME_MAX (compared without converting it:
    year 1 at +01:00 cannot be expressed in UTC)."""
    if not TIME_MIN <= value < TIME_MAX:
        raise ValidationError(TIME_OUT_OF_RANGE, code="time_range")
