"""Pod tolerations of a job task: the one check every way in (API, form, YAML upload) goes
through (the JobTask field's validator, portal.jobs.validators), and the form's
one-line-per-toleration syntax.

Items use the Kubernetes field names (`key`, `operator`, `value`, `effect`,
`tolerationSeconds`), so a toleration copied from a pod spec is accepted as it is. The rules are
the API server's (k8s.io/kubernetes pkg/apis/core/validation ValidateTolerations): an empty key
needs operator Exists, Exists takes no value, tolerationSeconds only with effect NoExecute.
"""

from __future__ import annotations

import re
from typing import Any

from .names import int64_error, label_key_error, label_value_error

OPERATORS = ("Exists", "Equal")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATIONS_MAX = 32

NOT_A_LIST = "must be a list of tolerations"
TOO_MANY = "at most {limit} tolerations"
NOT_A_MAPPING = "{path}: must be a mapping with key, operator, value, effect"
UNKNOWN_FIELD = "{path}: unknown field {field}; expected one of: " + ", ".join(FIELDS)
NOT_A_STRING = "{path}.{field}: must be a string"
BAD_OPERATOR = "{path}.operator: must be Exists or Equal, not {value!r}"
BAD_EFFECT = "{path}.effect: must be empty (any effect) or one of " + ", ".join(EFFECTS)
BAD_KEY = (
    "{path}.key: must be a label key: an optional DNS prefix and '/', then at most 63 "
    "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)
BAD_VALUE = (
    "{path}.value: must be a label value: at most 63 letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit"
)
EMPTY_KEY_NEEDS_EXISTS = "{path}.operator: must be Exists when the key is empty (tolerate all)"
EXISTS_TAKES_NO_VALUE = "{path}.value: must be empty with operator Exists"
SECONDS_NEED_NO_EXECUTE = "{path}.tolerationSeconds: only allowed with effect NoExecute"
SECONDS_NOT_INT = "{path}.tolerationSeconds: must be an integer"
SECONDS_NOT_INT64 = "{path}.tolerationSeconds: {message}"
LINE_INVALID = (
    "line {line}: {text!r} is not key[=value][:effect], e.g. "
    "nvidia.com/gpu:NoSchedule or dedicated=ml:NoExecute"
)

_LINE = re.compile(r"^(?P<key>[^=:\s]*)(=(?P<value>[^:\s]*))?(:(?P<effect>\w+))?$")


def toleration_errors(value: object) -> list[str]:
    """Every problem with a tolerations list, each naming the item and field."""
    if not isinstance(value, list):
        return [NOT_A_LIST]
    if len(value) > TOLERATIONS_MAX:
        return [TOO_MANY.format(limit=TOLERATIONS_MAX)]
    errors: list[str] = []
    for index, item in enumerate(value):
        errors.extend(_item_errors(item, f"[{index}]"))
    return errors


def _item_errors(item: Any, path: str) -> list[str]:
    if not isinstance(item, dict):
        return [NOT_A_MAPPING.format(path=path)]
    errors = [UNKNOWN_FIELD.format(path=path, field=f) for f in item if f not in FIELDS]
    for field in ("key", "operator", "value", "effect"):
        if field in item and not isinstance(item[field], str):
            errors.append(NOT_A_STRING.format(path=path, field=field))
    if errors:
        return errors
    key, value = item.get("key", ""), item.get("value", "")
    operator, effect = item.get("operator") or "Equal", item.get("effect", "")
    if operator not in OPERATORS:
        errors.append(BAD_OPERATOR.format(path=path, value=operator))
    if effect and effect not in EFFECTS:
        errors.append(BAD_EFFECT.format(path=path))
    if key and label_key_error(key):
        errors.append(BAD_KEY.format(path=path))
    if not key and operator != "Exists":
        errors.append(EMPTY_KEY_NEEDS_EXISTS.format(path=path))
    if operator == "Exists" and value:
        errors.append(EXISTS_TAKES_NO_VALUE.format(path=path))
    elif value and label_value_error(value):
        errors.append(BAD_VALUE.format(path=path))
    if "tolerationSeconds" in item:
        seconds = item["tolerationSeconds"]
        if not isinstance(seconds, int) or isinstance(seconds, bool):
            errors.append(SECONDS_NOT_INT.format(path=path))
        elif message := int64_error(seconds):
            errors.append(SECONDS_NOT_INT64.format(path=path, message=message))
        if effect != "NoExecute":
            errors.append(SECONDS_NEED_NO_EXECUTE.format(path=path))
    return errors


def tolerations_parse(text: str) -> list[dict[str, str]]:
    """The form's syntax, one toleration per line, like the taint `kubectl taint` takes:
    `key=value:Effect` tolerates that taint (Equal), `key:Effect` or `key` any value of the key
    (Exists), `*` every taint; no `:Effect` means every effect. Raises ValueError naming the line. The result still
    goes through toleration_errors (in job_submit), like every other way in."""
    tolerations: list[dict[str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line)
        if match is None or not match.group("key"):
            raise ValueError(LINE_INVALID.format(line=number, text=line))
        key = match.group("key")
        toleration = {"key": "" if key == "*" else key}
        if match.group("value") is not None:
            toleration.update(operator="Equal", value=match.group("value"))
        else:
            toleration["operator"] = "Exists"
        if match.group("effect"):
            toleration["effect"] = match.group("effect")
        tolerations.append(toleration)
    return tolerations


def tolerations_text(tolerations: list[dict[str, Any]]) -> str:
    """The inverse of tolerations_parse, for showing a task's tolerations."""
    lines = []
    for toleration in tolerations:
        line = toleration.get("key", "") or "*"
        if toleration.get("operator", "Equal") != "Exists":
            line += f"={toleration.get('value', '')}"
        if toleration.get("effect"):
            line += f":{toleration['effect']}"
        lines.append(line)
    return "\n".join(lines)
