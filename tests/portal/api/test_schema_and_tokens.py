"""The OpenAPI schema validates and documents every endpoint; the docs UI is local."""

from http import HTTPStatus

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db

OPERATIONS = {
    ("/api/v1/jobs/", "get"),
    ("/api/v1/jobs/", "post"),
    ("/api/v1/jobs/render/", "post"),
    ("/api/v1/jobs/{job_id}/", "get"),
    ("/api/v1/jobs/{job_id}/cancel/", "post"),
    ("/api/v1/jobs/{job_id}/why/", "get"),
    ("/api/v1/jobs/{job_id}/logs/", "get"),
    ("/api/v1/jobs/{job_id}/release/", "post"),
    ("/api/v1/queues/", "get"),
    ("/api/v1/queues/{queue_id}/", "get"),
    ("/api/v1/queues/{queue_id}/", "patch"),
    ("/api/v1/queues/{queue_id}/changes/", "get"),
    ("/api/v1/queues/{queue_id}/usage/", "get"),
    ("/api/v1/tenants/", "get"),
    ("/api/v1/tenants/{tenant_id}/", "get"),
    ("/api/v1/tenants/{tenant_id}/", "patch"),
    ("/api/v1/tenants/{tenant_id}/changes/", "get"),
    ("/api/v1/nodes/", "get"),
    ("/api/v1/nodes/{node_id}/", "get"),
    ("/api/v1/preemptions/", "get"),
    ("/api/v1/usage/report/", "get"),
    ("/api/v1/scheduler-configs/", "get"),
    ("/api/v1/scheduler-configs/", "post"),
    ("/api/v1/scheduler-configs/{config_id}/", "get"),
    ("/api/v1/scheduler-configs/{config_id}/activate/", "post"),
    ("/api/v1/tenants/{tenant_id}/default-queue/", "get"),
    ("/api/v1/tenants/{tenant_id}/default-queue/", "put"),
    ("/api/v1/auth/token/", "post"),
    ("/api/v1/auth/token/", "delete"),
}


def test_schema_validates_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))


def test_schema_documents_every_operation(researcher_client):
    response = researcher_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == HTTPStatus.OK
    schema = response.json()
    found = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if path.startswith("/api/v1/")
    }
    assert found == OPERATIONS
    for path, method in OPERATIONS:
        operation = schema["paths"][path][method]
        assert operation.get("description"), (path, method)
        assert any(code.startswith("4") for code in operation["responses"]), (path, method)
    create = schema["paths"]["/api/v1/jobs/"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/yaml"} <= set(create)


def test_docs_ui_uses_local_static_files(researcher_client):
    response = researcher_client.get("/api/docs/")
    assert response.status_code == HTTPStatus.OK
    html = response.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert "cdn" not in html.lower()
