"""Hostile values in the queue edit form (a lead of the queue's tenant posts them).

For every generated request: never a 500; either the queue is saved with one audit row per
changed field, or the queue row and its audit trail are untouched and the page names a field
of the resource at fault.
"""

from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import example, given, settings
from hypothesis import strategies as st

from portal.queues.models import Queue, QueueChange
from portal.queues.services import EDITABLE_FIELDS
from tests.portal.common.fuzzing import FORM_FUZZ, form_error_keys, form_values
from tests.portal.common.pages import build_world, queue_form_data

pytestmark = pytest.mark.django_db

FORM_KEYS = [*EDITABLE_FIELDS]
RESOURCES = ("gpus", "cpu_millis", "memory_bytes")


@pytest.fixture
def world(db):
    return build_world()


@pytest.fixture
def lead_client(world):
    client = Client()
    client.force_login(world["a_lead"])
    return client


def _state(queue: Queue) -> tuple:
    row = Queue.objects.values(*EDITABLE_FIELDS, "updated_at").get(pk=queue.pk)
    return row, QueueChange.objects.filter(queue=queue).count()


def _expected_error_keys(key: str) -> set[str]:
    """Guarantee, capability and borrowing limit of one resource are checked together."""
    for resource in RESOURCES:
        if key.endswith(resource):
            return {f"{kind}_{resource}" for kind in ("guarantee", "capability", "borrowing_limit")}
    return {key}


def _post(client, queue, body):
    before_row, before_changes = _state(queue)
    response = client.post(reverse("queues:queue_edit", args=[queue.pk]), body)
    after_row, after_changes = _state(queue)
    if response.status_code == HTTPStatus.FOUND:
        assert response.url == reverse("queues:queue_edit", args=[queue.pk])
        changed = [f for f in EDITABLE_FIELDS if after_row[f] != before_row[f]]
        assert after_changes - before_changes == len(changed)
        return set()
    assert response.status_code == HTTPStatus.OK
    assert (after_row, after_changes) == (before_row, before_changes), "refused but written"
    errors = form_error_keys(response)
    assert errors, "refused without saying why"
    return errors


@FORM_FUZZ
@given(key=st.sampled_from([*FORM_KEYS, "reclaimable"]), value=form_values)
@example(key="priority", value=str(2**70))
@example(key="guarantee_memory_bytes", value=str(2**64))
@example(key="capability_gpus", value="0")
@example(key="guarantee_gpus", value="100000")
@example(key="state", value="deleted")
def test_one_hostile_field_is_refused_on_its_resource(world, lead_client, key, value):
    queue = world["a_queue"]
    errors = _post(lead_client, queue, queue_form_data(queue) | {key: value})
    if errors:
        assert errors & _expected_error_keys(key), (key, value, errors)


@settings(FORM_FUZZ, max_examples=25)
@given(changes=st.dictionaries(st.sampled_from(FORM_KEYS), form_values, max_size=6))
def test_many_hostile_fields_never_break_the_page(world, lead_client, changes):
    queue = world["a_queue"]
    _post(lead_client, queue, queue_form_data(queue) | changes)


@settings(FORM_FUZZ, max_examples=25)
@given(key=st.sampled_from(FORM_KEYS), value=form_values)
def test_the_preview_answers_400_naming_the_field_or_200(world, lead_client, key, value):
    queue = world["a_queue"]
    url = reverse("queues:queue_preview", args=[queue.pk])
    response = lead_client.get(url, queue_form_data(queue) | {key: value})
    if response.status_code == HTTPStatus.BAD_REQUEST:
        assert set(response.json()["errors"]) & _expected_error_keys(key)
    else:
        assert response.status_code == HTTPStatus.OK
        assert response.json()["queues"]
