"""Every endpoint x every role: status codes and tenant scoping (404 for foreign ids)."""

from http import HTTPStatus

import pytest

from portal.jobs.models import Job
from tests.factories import SchedulerConfigFactory
from tests.portal.conftest import job_body

pytestmark = pytest.mark.django_db

OK, CREATED = HTTPStatus.OK, HTTPStatus.CREATED
BAD, UNAUTH, FORBIDDEN, MISSING = (
    HTTPStatus.BAD_REQUEST,
    HTTPStatus.UNAUTHORIZED,
    HTTPStatus.FORBIDDEN,
    HTTPStatus.NOT_FOUND,
)
ROLES = ("researcher", "lead", "outsider", "staff", "anonymous")


def _expect(researcher, lead, outsider, staff, anonymous=UNAUTH):
    return dict(zip(ROLES, (researcher, lead, outsider, staff, anonymous), strict=True))


# (name, method, url template, body, expected status per role)
MATRIX = [
    ("jobs list", "get", "/api/v1/jobs/", None, _expect(OK, OK, OK, OK)),
    ("nlp job", "get", "/api/v1/jobs/{nlp_job}/", None, _expect(OK, OK, MISSING, OK)),
    ("vision job", "get", "/api/v1/jobs/{vision_job}/", None, _expect(MISSING, OK, OK, OK)),
    ("nlp job why", "get", "/api/v1/jobs/{nlp_job}/why/", None, _expect(OK, OK, MISSING, OK)),
    (
        "vision job why",
        "get",
        "/api/v1/jobs/{vision_job}/why/",
        None,
        _expect(MISSING, OK, OK, OK),
    ),
    (
        "cancel nlp job (researcher submitted it, lead leads nlp)",
        "post",
        "/api/v1/jobs/{nlp_job}/cancel/",
        None,
        _expect(OK, OK, MISSING, OK),
    ),
    (
        "cancel vision job (lead is only a researcher in vision)",
        "post",
        "/api/v1/jobs/{vision_job}/cancel/",
        None,
        _expect(MISSING, FORBIDDEN, OK, OK),
    ),
    (
        "release nlp job (site admins only; it is not quarantined)",
        "post",
        "/api/v1/jobs/{nlp_job}/release/",
        None,
        _expect(FORBIDDEN, FORBIDDEN, MISSING, BAD),
    ),
    ("submit to nlp", "post", "/api/v1/jobs/", "nlp", _expect(CREATED, CREATED, BAD, CREATED)),
    (
        "submit to vision",
        "post",
        "/api/v1/jobs/",
        "vision",
        _expect(BAD, CREATED, CREATED, CREATED),
    ),
    ("queues list", "get", "/api/v1/queues/", None, _expect(OK, OK, OK, OK)),
    ("nlp queue", "get", "/api/v1/queues/{nlp_queue}/", None, _expect(OK, OK, MISSING, OK)),
    (
        "vision queue",
        "get",
        "/api/v1/queues/{vision_queue}/",
        None,
        _expect(MISSING, OK, OK, OK),
    ),
    (
        "edit nlp queue",
        "patch",
        "/api/v1/queues/{nlp_queue}/",
        {"weight": 7},
        _expect(FORBIDDEN, OK, MISSING, OK),
    ),
    (
        "edit vision queue",
        "patch",
        "/api/v1/queues/{vision_queue}/",
        {"weight": 7},
        _expect(MISSING, FORBIDDEN, FORBIDDEN, OK),
    ),
    (
        "nlp queue changes",
        "get",
        "/api/v1/queues/{nlp_queue}/changes/",
        None,
        _expect(OK, OK, MISSING, OK),
    ),
    (
        "vision queue usage",
        "get",
        "/api/v1/queues/{vision_queue}/usage/",
        None,
        _expect(MISSING, OK, OK, OK),
    ),
    (
        "nlp queue usage",
        "get",
        "/api/v1/queues/{nlp_queue}/usage/",
        None,
        _expect(OK, OK, MISSING, OK),
    ),
    ("tenants", "get", "/api/v1/tenants/", None, _expect(OK, OK, OK, OK)),
    ("nlp tenant", "get", "/api/v1/tenants/{nlp_tenant}/", None, _expect(OK, OK, MISSING, OK)),
    (
        "vision tenant",
        "get",
        "/api/v1/tenants/{vision_tenant}/",
        None,
        _expect(MISSING, OK, OK, OK),
    ),
    (
        "edit nlp tenant (site admins only)",
        "patch",
        "/api/v1/tenants/{nlp_tenant}/",
        {"weight": 3},
        _expect(FORBIDDEN, FORBIDDEN, MISSING, OK),
    ),
    (
        "edit vision tenant",
        "patch",
        "/api/v1/tenants/{vision_tenant}/",
        {"weight": 3},
        _expect(MISSING, FORBIDDEN, FORBIDDEN, OK),
    ),
    (
        "nlp tenant changes",
        "get",
        "/api/v1/tenants/{nlp_tenant}/changes/",
        None,
        _expect(OK, OK, MISSING, OK),
    ),
    ("nodes", "get", "/api/v1/nodes/", None, _expect(OK, OK, OK, OK)),
    ("node", "get", "/api/v1/nodes/{node}/", None, _expect(OK, OK, OK, OK)),
    (
        "preemptions",
        "get",
        "/api/v1/preemptions/",
        None,
        _expect(FORBIDDEN, FORBIDDEN, FORBIDDEN, OK),
    ),
    (
        "scheduler configs",
        "get",
        "/api/v1/scheduler-configs/",
        None,
        _expect(FORBIDDEN, FORBIDDEN, FORBIDDEN, OK),
    ),
    (
        "scheduler config",
        "get",
        "/api/v1/scheduler-configs/{config}/",
        None,
        _expect(FORBIDDEN, FORBIDDEN, FORBIDDEN, OK),
    ),
    (
        "create scheduler config",
        "post",
        "/api/v1/scheduler-configs/",
        "conf",
        _expect(FORBIDDEN, FORBIDDEN, FORBIDDEN, CREATED),
    ),
    (
        "activate scheduler config",
        "post",
        "/api/v1/scheduler-configs/{config}/activate/",
        None,
        _expect(FORBIDDEN, FORBIDDEN, FORBIDDEN, OK),
    ),
]


def _cases():
    for name, method, url, body, expected in MATRIX:
        for role in ROLES:
            yield pytest.param(method, url, body, role, expected[role], id=f"{name}-{role}")


def _url(template, world, config):
    return template.format(
        nlp_job=world["nlp_job"].pk,
        vision_job=world["vision_job"].pk,
        nlp_queue=world["nlp_queue"].pk,
        vision_queue=world["vision_queue"].pk,
        nlp_tenant=world["nlp_queue"].tenant_id,
        vision_tenant=world["vision_queue"].tenant_id,
        node=world["nodes"][0].pk,
        config=config.pk,
    )


def _body(body, world):
    if body == "nlp":
        return job_body(world["nlp_queue"])
    if body == "vision":
        return job_body(world["vision_queue"])
    if body == "conf":
        return {"text": 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'}
    return body


@pytest.fixture
def matrix_world(world, cluster):
    return {**world, "nodes": cluster}


@pytest.mark.parametrize(("method", "url", "body", "role", "expected"), list(_cases()))
def test_endpoint_status_for_role(matrix_world, api_for, method, url, body, role, expected):
    config = SchedulerConfigFactory()
    client = api_for(role)
    response = getattr(client, method)(
        _url(url, matrix_world, config), _body(body, matrix_world), format="json"
    )
    assert response.status_code == expected, response.content
    assert response["Content-Type"] == "application/json"
    if expected >= 400:
        assert "detail" in response.json()


VISIBLE = {
    "researcher": ({"nlp-job"}, {"nlp-train"}, {"nlp"}),
    "lead": ({"nlp-job", "vision-job"}, {"nlp-train", "vision-train"}, {"nlp", "vision"}),
    "outsider": ({"vision-job"}, {"vision-train"}, {"vision"}),
    "staff": ({"nlp-job", "vision-job"}, {"nlp-train", "vision-train"}, {"nlp", "vision"}),
}


@pytest.mark.parametrize("role", sorted(VISIBLE))
def test_lists_never_show_another_tenants_rows(world, api_for, role):
    jobs, queues, tenants = VISIBLE[role]
    client = api_for(role)
    assert {j["name"] for j in client.get("/api/v1/jobs/").json()["results"]} == jobs
    assert {q["name"] for q in client.get("/api/v1/queues/").json()["results"]} == queues
    assert {t["name"] for t in client.get("/api/v1/tenants/").json()["results"]} == tenants


@pytest.mark.parametrize(
    ("role", "query", "expected"),
    [
        ("researcher", "tenant=vision", HTTPStatus.BAD_REQUEST),
        ("researcher", "queue=vision-train", HTTPStatus.BAD_REQUEST),
        ("outsider", "queue=nlp-train", HTTPStatus.BAD_REQUEST),
        ("lead", "queue=vision-train", HTTPStatus.OK),
        ("staff", "tenant=nlp", HTTPStatus.OK),
    ],
)
def test_job_filters_cannot_reach_foreign_tenants(world, api_for, role, query, expected):
    response = api_for(role).get(f"/api/v1/jobs/?{query}")
    assert response.status_code == expected
    if expected == HTTPStatus.BAD_REQUEST:
        assert set(response.json()["errors"]) == {query.split("=")[0]}


def test_foreign_queue_filter_by_id_in_queue_list_gives_nothing(world, api_for):
    response = api_for("researcher").get(
        f"/api/v1/queues/?tenant={world['vision_queue'].tenant_id}"
    )
    assert response.json()["results"] == []


def test_session_auth_needs_csrf_for_writes(world, researcher):
    from rest_framework.test import APIClient

    client = APIClient(enforce_csrf_checks=True)
    client.force_login(researcher)
    assert client.get("/api/v1/jobs/").status_code == HTTPStatus.OK
    response = client.post(f"/api/v1/jobs/{world['nlp_job'].pk}/cancel/")
    assert response.status_code == HTTPStatus.FORBIDDEN
    assert Job.objects.get(pk=world["nlp_job"].pk).status == Job.Status.PENDING


def test_bad_token_is_401(world):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = client.get("/api/v1/jobs/")
    assert response.status_code == HTTPStatus.UNAUTHORIZED
    assert response["WWW-Authenticate"] == "Token"


def test_a_user_in_no_tenant_sees_no_nodes_jobs_queues_or_tenants(world, cluster, user):
    """Signed in (a real token), member of nothing: every list is empty, every id 404."""
    from tests.portal.conftest import token_client

    client = token_client(user)
    for url in ("/api/v1/nodes/", "/api/v1/jobs/", "/api/v1/queues/", "/api/v1/tenants/"):
        response = client.get(url)
        assert response.status_code == HTTPStatus.OK, url
        assert response.json()["count"] == 0, url
    node = cluster[0]
    assert client.get(f"/api/v1/nodes/{node.pk}/").status_code == MISSING
    assert client.get(f"/api/v1/jobs/{world['nlp_job'].pk}/").status_code == MISSING
    assert client.get(f"/api/v1/queues/{world['nlp_queue'].pk}/").status_code == MISSING
