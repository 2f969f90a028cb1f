"""The usage page: leads and site admins, their own tenants' figures, errors on the form."""

from http import HTTPStatus

import pytest

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen", "ledger")]
URL = "/usage/"


def test_an_admin_sees_every_queue_with_its_colour_and_the_total(staff_client):
    response = staff_client.get(URL, {"group_by": "queue", "month": "2026-11"})

    assert response.status_code == HTTPStatus.OK
    page = response.content.decode()
    assert [row.name for row in response.context["rows"]] == [
        "nlp-train",
        "vision-train",
        "nlp-dev",
    ]
    assert "2026-11: final" in page
    assert 'class="swatch"' in page
    assert '<th class="num" data-label="GPU-hours">26.0</th>' in page  # the total's GPU-hours
    assert "format=csv" in page


def test_each_borrowed_column_sits_under_the_resource_it_counts(staff_client):
    page = staff_client.get(URL, {"month": "2026-11"}).content.decode()
    head = page[page.index("<thead>") : page.index("</thead>")]
    assert 'colspan="4" scope="colgroup" class="group">GPU-hours</th>' in head
    assert 'colspan="2" scope="colgroup" class="group group-start">CPU core-hours</th>' in head
    assert head.count(">borrowed</th>") == 2
    assert head.index("GPU-hours") < head.index("CPU core-hours") < head.index("lost to")


def test_a_lead_sees_the_tenants_they_belong_to_only(lead_client):
    response = lead_client.get(URL, {"month": "2026-11"})
    assert [row.name for row in response.context["rows"]] == ["nlp", "vision"]
    assert "your tenants only" in response.content.decode()


def test_researchers_may_not_open_the_page(researcher_client):
    assert researcher_client.get(URL).status_code == HTTPStatus.FORBIDDEN


def test_the_current_month_by_default_and_a_future_month_is_refused(staff_client):
    response = staff_client.get(URL)
    assert response.status_code == HTTPStatus.OK
    assert "2026-12: so far" in response.content.decode()

    response = staff_client.get(URL, {"month": "2027-02"})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "2027-02 has not started yet" in response.content.decode()
    assert response.context["rows"] == []


def test_every_figure_has_one_decimal(staff_client, nlp_queue):
    """30.55, 34.404 and 0.0 side by side read as three precisions: the page shows tenths (the
    CSV and the API keep the thousandths)."""
    import re

    from portal.accounting.models import LedgerEntry
    from tests.factories import UserFactory
    from tests.portal.accounting.conftest import HOUR, NOVEMBER

    LedgerEntry.objects.create(
        month=NOVEMBER,
        tenant=nlp_queue.tenant,
        queue=nlp_queue,
        user=UserFactory(username="carol"),
        gpu_milli_seconds_within=int(0.404 * HOUR),
        gpu_milli_seconds_borrowed=int(0.55 * HOUR),
    )
    page = staff_client.get(URL, {"month": "2026-11"}).content.decode()
    figures = re.findall(r'class="num[^"]*" data-label="[^"]+">([^<]*)<', page)
    assert figures
    assert [f for f in figures if not re.fullmatch(r"\d+\.\d", f)] == []
    # nlp: 5 + 3 + 0.55 GPU-hours borrowed
    assert '<td class="num" data-label="GPU-h borrowed">8.6</td>' in page
