"""Every HTML page x every role of both tenants (GET, and POST where the page takes it).

The expected outcomes are the table in tests/portal/common/pages.py. A named URL outside
the API (`/api/v1/`, covered by tests/portal/api/test_permissions_matrix.py) and the Django
admin that has no entry there fails `test_every_page_is_in_the_matrix`.
"""

from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve, reverse

from tests.portal.common.pages import (
    A_NAMES,
    A_ROLES,
    B_NAMES,
    B_ROLES,
    BODIES,
    FORM_ERROR,
    LIST_PAGES,
    LOGIN,
    PAGES,
    ROLES,
    build_world,
    db_fingerprint,
    page_params,
)

pytestmark = pytest.mark.django_db

# Covered elsewhere: the REST API has its own matrix; the Django admin is staff-only by Django;
# /favicon.ico redirects everyone to a static file (tests/portal/common/test_admin_audit.py).
EXEMPT_NAMESPACES = {"admin"}
EXEMPT_ROUTE_PREFIXES = ("api/v1/", "favicon.ico")


def _named_patterns(resolver=None, prefix="", namespace=""):
    resolver = resolver or get_resolver()
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = entry.namespace or ""
            child_ns = f"{namespace}:{inner}" if namespace and inner else inner or namespace
            yield from _named_patterns(entry, route, child_ns)
        elif isinstance(entry, URLPattern):
            yield route, (f"{namespace}:{entry.name}" if namespace else entry.name)


def _page_names() -> set[str]:
    names = set()
    for route, name in _named_patterns():
        if name is None or name.split(":")[0] in EXEMPT_NAMESPACES:
            continue
        if route.startswith(EXEMPT_ROUTE_PREFIXES):
            continue
        names.add(name)
    return names


def test_every_page_is_in_the_matrix():
    assert _page_names() == {page.name for page in PAGES}


def test_unnamed_pages_do_not_exist():
    """An unnamed pattern would escape the coverage check above."""
    unnamed = [
        route
        for route, name in _named_patterns()
        if name is None and not route.startswith(("admin/", *EXEMPT_ROUTE_PREFIXES))
    ]
    assert unnamed == []


@pytest.fixture
def world(db):
    return build_world()


def _client(world, role: str) -> Client:
    client = Client()
    if role != "anonymous":
        client.force_login(world[role])
    return client


def _url(world, name: str, kwargs: dict[str, str]) -> str:
    resolved = {
        key: (world[value].pk if value in world else value) for key, value in kwargs.items()
    }
    return reverse(name, kwargs=resolved)


def _assert_outcome(response, expected, url: str) -> None:
    assert response.status_code == expected.status, (
        f"expected {expected}, got {response.status_code}"
    )
    if expected.redirect_to is not None:
        location = urlsplit(response.url)
        assert resolve(location.path).view_name == expected.redirect_to, response.url
        if expected == LOGIN:
            assert parse_qs(location.query)["next"][0].startswith(url)
    if expected == FORM_ERROR:
        context = response.context
        form = context.get("form")
        assert (form is not None and form.errors) or context.get("errors"), "no form error"
    if expected.status in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND):
        body = response.content.decode()
        for name in (*A_NAMES, *B_NAMES):
            assert name not in body, f"{name} leaked in a {expected.status} page"


@pytest.mark.parametrize(("page", "role", "expected"), list(page_params("get")))
def test_get(world, page, role, expected):
    url = _url(world, page.name, page.kwargs)
    before = db_fingerprint()
    response = _client(world, role).get(url, page.query)
    _assert_outcome(response, expected, url)
    assert db_fingerprint() == before, "a GET changed the database"


@pytest.mark.parametrize(("page", "role", "expected"), list(page_params("post")))
def test_post(world, page, role, expected):
    url = _url(world, page.name, page.kwargs)
    before = db_fingerprint()
    response = _client(world, role).post(url, BODIES[page.post_body](world))
    _assert_outcome(response, expected, url)
    if expected.denied:
        assert db_fingerprint() == before, "a refused POST changed the database"
    elif page.writes:
        assert db_fingerprint() != before, "an accepted POST changed nothing"


def _names_for(role: str) -> tuple[set[str], set[str]]:
    """(names the role must not see, the tenant prefix of names it must see)."""
    if role in A_ROLES:
        return set(B_NAMES), {"alpha"}
    if role in B_ROLES:
        return set(A_NAMES), {"bravo"}
    if role == "staff":
        return set(), {"alpha", "bravo"}
    return {*A_NAMES, *B_NAMES}, set()


def _list_params():
    for name, kwargs, query, expected_names in LIST_PAGES:
        for role in ROLES:
            if role == "anonymous":
                continue
            label = f"{name}{kwargs.get('chart', '')}"
            yield pytest.param(name, kwargs, query, expected_names, role, id=f"{label}-{role}")


@pytest.mark.parametrize(
    ("name", "kwargs", "query", "expected_names", "role"), list(_list_params())
)
def test_pages_never_show_another_tenants_rows(world, name, kwargs, query, expected_names, role):
    response = _client(world, role).get(_url(world, name, kwargs), query)
    if response.status_code in (HTTPStatus.FORBIDDEN, HTTPStatus.NOT_FOUND):
        return  # refused outright: the matrix asserts which roles
    assert response.status_code == HTTPStatus.OK
    body = response.content.decode()
    hidden, tenants = _names_for(role)
    if any(value in world for value in kwargs.values()):
        tenants &= {"alpha"}  # a page about one of A's objects: nobody expects B's names there
    for secret in hidden:
        assert secret not in body
    for tenant in tenants:
        for shown in expected_names:
            assert shown.replace("alpha", tenant) in body


@pytest.mark.parametrize("role", [*A_ROLES, "staff"])
def test_job_page_hides_the_other_tenants_preemptor(world, role):
    response = _client(world, role).get(reverse("jobs:job_detail", args=[world["a_job"].pk]))
    body = response.content.decode()
    assert "alpha-job" in body
    assert ("bravo-job" in body) is (role == "staff")


@pytest.mark.parametrize("role", [*A_ROLES, *B_ROLES, "no_member"])
def test_job_list_queue_filter_cannot_reach_another_tenant(world, role):
    foreign = world["b_queue"] if role in A_ROLES else world["a_queue"]
    response = _client(world, role).get(reverse("jobs:job_list"), {"queue": foreign.pk})
    assert response.status_code == HTTPStatus.OK
    assert list(response.context["jobs"]) == []


@pytest.mark.parametrize("role", [r for r in ROLES if r != "anonymous"])
def test_missing_ids_look_like_foreign_ids(world, role):
    """A page's answer for an id that does not exist equals its answer for B's id (no oracle)."""
    client = _client(world, role)
    missing = 10**9
    for name, kwarg, foreign in (
        ("jobs:job_detail", "job_id", "b_job"),
        ("queues:queue_edit", "queue_id", "b_queue"),
        ("queues:queue_preview", "queue_id", "b_queue"),
    ):
        if role in B_ROLES or role == "staff":
            continue  # B's objects are theirs to see
        to_foreign = client.get(reverse(name, kwargs={kwarg: world[foreign].pk}))
        to_missing = client.get(reverse(name, kwargs={kwarg: missing}))
        assert to_foreign.status_code == to_missing.status_code, name


def test_queue_preview_sums_other_tenants_into_one_row(world):
    url = _url(world, "queues:queue_preview", {"queue_id": "a_queue"})
    query = {
        "weight": "5",
        "priority": "0",
        "state": "open",
        "guarantee_gpus": "0",
        "guarantee_cpu_millis": "0",
        "guarantee_memory_bytes": "0",
    }
    lead_rows = _client(world, "a_lead").get(url, query).json()["queues"]
    staff_rows = _client(world, "staff").get(url, query).json()["queues"]
    # Tenants, each followed by its queues: B's tenant is one combined row, its queue left out.
    assert [row["name"] for row in lead_rows] == ["alpha", "alpha-queue", "other tenants"]
    assert [row["name"] for row in staff_rows] == ["alpha", "alpha-queue", "bravo", "bravo-queue"]

    def tenants(rows):
        return [row for row in rows if row["kind"] == "tenant"]

    for key in ("weight", "demand_gpus", "deserved_now", "deserved_after"):
        lead_total = sum(r[key] for r in tenants(lead_rows))
        assert lead_total == pytest.approx(sum(r[key] for r in tenants(staff_rows)))
    assert lead_rows[:2] == staff_rows[:2]
