"""The change history's field names: the edit forms' labels, not the stored names."""

from portal.queues.forms import QueueEditForm
from portal.tenants.templatetags.quota_ui import quota_label


def test_every_quota_field_reads_as_its_form_label():
    form = QueueEditForm()
    for name in (
        "weight",
        "guarantee_gpus",
        "borrowing_limit_cpu_millis",
        "capability_memory_bytes",
    ):
        assert quota_label(name) == form.fields[name].label


def test_a_queues_own_fields_read_as_words():
    assert (quota_label("priority"), quota_label("state")) == ("Priority", "State")
