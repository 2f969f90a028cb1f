"""Hostile input on the admin pages: the scheduler config editor and the history filters.

Config editor: never a 500; a new version is stored (and activated when asked) or nothing
changes and the page names `text`/`comment`. Filters: invalid values are ignored, the page and
the CSV always answer 200.
"""

from http import HTTPStatus

import pytest
import yaml
from django.test import Client
from django.urls import reverse
from hypothesis import example, given, settings
from hypothesis import strategies as st

from portal.common.validators import TIME_OUT_OF_RANGE
from portal.scheduling.models import SchedulerConfig
from scheduler.core.config import DEFAULT_CONF_TEXT
from tests.nested import copy_at, paths
from tests.portal.common.fuzzing import FORM_FUZZ, form_error_keys, form_text, form_values
from tests.portal.common.pages import build_world

pytestmark = pytest.mark.django_db

DEFAULT_DATA = yaml.safe_load(DEFAULT_CONF_TEXT)


CONF_PATHS = list(paths(DEFAULT_DATA))
conf_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), form_text),
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(form_text, children, max_size=3)
    ),
    max_leaves=8,
)


@pytest.fixture
def world(db):
    return build_world()


@pytest.fixture
def staff_client(world):
    client = Client()
    client.force_login(world["staff"])
    return client


def _configs() -> tuple:
    return (
        SchedulerConfig.objects.count(),
        tuple(SchedulerConfig.objects.filter(active=True).values_list("pk", flat=True)),
    )


def _save(client, body) -> None:
    before = _configs()
    response = client.post(reverse("scheduling:config_edit"), body)
    after = _configs()
    if response.status_code == HTTPStatus.FOUND:
        assert after[0] == before[0] + 1
        newest = SchedulerConfig.objects.order_by("-version").first()
        assert newest.text == body["text"]
        assert (after[1] == (newest.pk,)) is bool(body.get("activate"))
        return
    assert response.status_code == HTTPStatus.OK
    assert after == before, "refused but written"
    errors = form_error_keys(response)
    assert errors & {"text", "comment"}, errors


@FORM_FUZZ
@given(path=st.sampled_from(CONF_PATHS), value=conf_values, activate=st.booleans())
@example(
    path=("tiers", 1, "plugins", 1, "arguments", "binpack.weight"),
    value=float("nan"),
    activate=True,
)
@example(path=("actions",), value="allocate, " * 1000, activate=False)
def test_mutated_conf_is_saved_or_refused_on_text(world, staff_client, path, value, activate):
    data, parent = copy_at(DEFAULT_DATA, path)
    parent[path[-1]] = value
    body = {"text": yaml.safe_dump(data, allow_unicode=True), "comment": "fuzz"}
    if activate:
        body["activate"] = "on"
    _save(staff_client, body)


@settings(FORM_FUZZ, max_examples=30)
@given(text=form_values, comment=form_values)
@example(text="actions: " + "[" * 1000, comment="deep")
@example(text="actions: !!python/object/apply:os.system [id]", comment="tag")
def test_any_text_and_comment_are_saved_or_refused(world, staff_client, text, comment):
    _save(staff_client, {"text": text, "comment": comment, "activate": "on"})


FILTER_KEYS = ["action", "queue", "tenant", "since", "until", "page"]


@settings(FORM_FUZZ, max_examples=30)
@given(query=st.dictionaries(st.sampled_from(FILTER_KEYS), form_values, max_size=4))
@example(query={"since": "9999-99-99T99:99"})
@example(query={"since": "0001-01-01T00:00:00+01:00"})
@example(query={"until": "9999-12-31T23:59:59-01:00"})
@example(query={"page": "9" * 5000})
@example(query={"queue": "9" * 40})
def test_history_filters_never_fail(world, staff_client, query):
    for name in ("scheduling:preemption_list", "scheduling:preemption_csv"):
        response = staff_client.get(reverse(name), query)
        assert response.status_code == HTTPStatus.OK
        if name.endswith("csv"):
            b"".join(response.streaming_content)


@pytest.mark.parametrize(
    "time",
    ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "0001-01-01T00:00", "1969-12-31"],
)
@pytest.mark.parametrize("field", ["since", "until"])
def test_history_filter_times_out_of_range_are_a_form_error(world, staff_client, field, time):
    response = staff_client.get(reverse("scheduling:preemption_list"), {field: time})
    assert response.status_code == HTTPStatus.OK
    assert response.context["form"].errors[field] == [TIME_OUT_OF_RANGE]
    csv = staff_client.get(reverse("scheduling:preemption_csv"), {field: time})
    assert csv.status_code == HTTPStatus.OK
    b"".join(csv.streaming_content)
