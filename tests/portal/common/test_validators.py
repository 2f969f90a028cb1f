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
        "ｄowng",  # fullwidth d
        "𝐝𝐨𝐰𝐧𝐠",  # mathematical bold
        "dоwng",  # Cyrillic o
    ],
)
def test_non_labels_are_refused(value):
    with pytest.raises(ValidationError):
        validate_dns_label(value)


@pytest.mark.parametrize("model", ["jobs.Job", "jobs.JobTask", "queues.Queue", "tenants.Tenant"])
def test_a_name_too_long_gets_one_message(model):
    """The length is the field's max_length to refuse; the label's characters are fine."""
    from django.apps import apps

    field = apps.get_model(model)._meta.get_field("name")
    with pytest.raises(ValidationError) as info:
        field.run_validators("a" * 10000)
    assert info.value.messages == ["Ensure this value has at most 63 characters (it has 10000)."]
