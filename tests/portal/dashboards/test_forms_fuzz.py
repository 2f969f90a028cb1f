"""Hostile query strings on the dashboard: unknown values fall back, nothing fails."""

from http import HTTPStatus

import pytest
from django.test import Client
from django.urls import reverse
from hypothesis import example, given
from hypothesis import strategies as st

from tests.portal.common.fuzzing import FORM_FUZZ, form_values
from tests.portal.common.pages import build_world

pytestmark = pytest.mark.django_db

CHARTS = ["usage", "quota", "occupancy", "pending", "preemptions"]


@pytest.fixture
def researcher_client(db):
    world = build_world()
    client = Client()
    client.force_login(world["a_researcher"])
    return client


@FORM_FUZZ
@given(chart=st.sampled_from(CHARTS), range_=form_values)
@example(chart="usage", range_="__class__")
@example(chart="preemptions", range_="9" * 5000)
def test_chart_ranges_fall_back_to_a_known_range(researcher_client, chart, range_):
    response = researcher_client.get(
        reverse("dashboards:chart_data", args=[chart]), {"range": range_}
    )
    assert response.status_code == HTTPStatus.OK
    payload = response.json()
    assert "figure" in payload
    if "range" in payload:
        assert payload["range"] in ("hour", "day", "week", "month")


@FORM_FUZZ
@given(range_=form_values)
def test_overview_range_falls_back(researcher_client, range_):
    response = researcher_client.get(reverse("dashboards:overview"), {"range": range_})
    assert response.status_code == HTTPStatus.OK
    assert response.context["range"] in ("hour", "day", "week", "month")
