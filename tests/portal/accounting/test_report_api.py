"""GET /api/v1/usage/report/: scoped sums of the ledger per tenant, queue or user; CSV; and
every bad parameter a 400 naming it."""

from http import HTTPStatus

import pytest

from tests.portal.accounting.conftest import HOUR

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("frozen", "ledger")]
URL = "/api/v1/usage/report/"


def _names(response, field="gpu_hours"):
    return {row["name"]: row[field] for row in response.json()["rows"]}


def test_an_admin_sees_every_tenant_of_the_month(staff_client):
    response = staff_client.get(URL, {"group_by": "tenant", "month": "2026-11"})

    assert response.status_code == HTTPStatus.OK
    body = response.json()
    assert (body["month"], body["group_by"], body["complete"]) == ("2026-11", "tenant", True)
    assert [(r["name"], r["gpu_hours"]) for r in body["rows"]] == [("nlp", 19.0), ("vision", 7.0)]
    nlp = body["rows"][0]
    assert (nlp["gpu_hours_within"], nlp["gpu_hours_borrowed"], nlp["gpu_hours_lost"]) == (
        11.0,
        8.0,
        2.0,
    )
    assert nlp["cpu_core_hours"] == 40.0
    assert nlp["gpu_milli_seconds_within"] == 11 * HOUR
    assert body["total"]["gpu_hours"] == 26.0


def test_queues_carry_their_tenant_and_users_sum_over_queues(staff_client):
    by_queue = staff_client.get(URL, {"group_by": "queue", "month": "2026-11"}).json()
    assert {(r["name"], r["tenant"], r["gpu_hours"]) for r in by_queue["rows"]} == {
        ("nlp-train", "nlp", 15.0),
        ("nlp-dev", "nlp", 4.0),
        ("vision-train", "vision", 7.0),
    }
    by_user = staff_client.get(URL, {"group_by": "user", "month": "2026-11"})
    assert _names(by_user) == {"researcher": 16.0, "bob": 3.0, "outsider": 7.0}


def test_a_researcher_sees_only_their_own_tenant(researcher_client):
    response = researcher_client.get(URL, {"group_by": "queue", "month": "2026-11"})
    assert _names(response) == {"nlp-train": 15.0, "nlp-dev": 4.0}
    assert response.json()["total"]["gpu_hours"] == 19.0


def test_a_lead_sees_the_tenants_they_belong_to(lead_client, outsider_client):
    assert _names(lead_client.get(URL, {"month": "2026-11"})) == {"nlp": 19.0, "vision": 7.0}
    assert _names(outsider_client.get(URL, {"month": "2026-11"})) == {"vision": 7.0}


def test_the_current_month_is_the_default_and_is_not_complete(staff_client):
    body = staff_client.get(URL).json()
    assert (body["month"], body["complete"], body["rows"]) == ("2026-12", False, [])


def test_csv_export_has_the_same_rows(staff_client):
    response = staff_client.get(URL, {"group_by": "queue", "month": "2026-11", "format": "csv"})

    assert response.status_code == HTTPStatus.OK
    assert response["Content-Type"].startswith("text/csv")
    assert 'filename="usage-queue-2026-11.csv"' in response["Content-Disposition"]
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("queue,tenant,gpu_hours,gpu_hours_within,gpu_hours_borrowed,")
    assert lines[1].startswith("nlp-train,nlp,15.0,10.0,5.0,2.0,40.0,")
    assert len(lines) == 4


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({"month": "2027-01"}, "month", "2027-01 has not started yet"),
        ({"month": "2026-13"}, "month", "expected a month as YYYY-MM"),
        ({"month": "november"}, "month", "expected a month as YYYY-MM"),
        ({"month": "2026-11-01"}, "month", "expected a month as YYYY-MM"),
        ({"group_by": "node"}, "group_by", "is not a valid choice"),
        ({"group_by": "queue", "month": "9999-99", "format": "csv"}, "month", "YYYY-MM"),
        ({"format": "xml"}, "format", "expected json or csv"),
    ],
)
def test_bad_parameters_are_a_400_naming_the_field(staff_client, params, field, message):
    response = staff_client.get(URL, params)

    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert response["Content-Type"] == "application/json"
    errors = response.json()["errors"]
    assert list(errors) == [field]
    assert message in " ".join(errors[field])


def test_anonymous_requests_are_refused(client):
    assert client.get(URL).status_code == HTTPStatus.UNAUTHORIZED


def test_options_with_csv_asked_answers_json(staff_client):
    response = staff_client.options(URL + "?format=csv")
    assert response.status_code == HTTPStatus.OK
    assert response.json()["name"] == "Usage Report Api"
