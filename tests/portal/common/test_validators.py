"""Shared field validators: DNS labels are whole-string matches."""

import pytest
from django.core.exceptions import ValidationError

from portal.common.validators import validate_dns_label


@pytest.mark.parametrize("value", ["a", "nlp-train", "a1", "0", "a" * 63])
def test_dns_labels_are_accepted(value):
    validate_dns_label(value)


@pytest.mark.parametrize(
    "value",
    [
        "nl-name\n",  # `$` in a regex matches before a final newline
        "nl-name\r\n",
        "\nnl-name",
        "nl\nname",
        "nl-name ",
        "",
        "-a",
        "a-",
        "A",
        "a" * 64,
        "ｄowng",  # fullwidth d
        "𝐝𝐨𝐰𝐧𝐠",  # mathematical bold
        "dоwng",  # Cyrillic o
    ],
)
def test_non_labels_are_refused(value):
    with pytest.raises(ValidationError):
        validate_dns_label(value)
