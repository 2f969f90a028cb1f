"""/healthz and /readyz: no session, no host check, no HTTPS redirect, no throttle; readiness
names the check that failed."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.utils import OperationalError
from django.test import override_settings
from django.utils import timezone

from portal import celery_app
from portal.scheduling.facade import ClusterUnavailable
from portal.scheduling.models import CycleRun
from tests.factories import TenantFactory
from tests.scheduler.conftest import free_port

pytestmark = pytest.mark.django_db


@override_settings(ALLOWED_HOSTS=["portal.example.org"], SECURE_SSL_REDIRECT=True)
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_answer_a_pod_ip_over_plain_http_without_a_session(client, path):
    response = client.get(path, HTTP_HOST="10.1.2.3:8000")
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "ok"
    assert "Set-Cookie" not in response
    assert response["Cache-Control"] == "no-store"


def test_probes_are_never_throttled(client):
    answers = {client.get("/healthz").status_code for _ in range(300)}
    assert answers == {200}


def test_probes_take_only_get(client):
    response = client.post("/healthz")
    assert response.status_code == 405
    assert response["Allow"] == "GET, HEAD"


def test_readyz_lists_its_checks(client):
    assert client.get("/readyz").json() == {
        "status": "ok",
        "checks": {"database": "ok", "broker": "ok"},
    }


def test_readyz_fails_naming_the_broker_when_it_is_down(client, monkeypatch):
    down = f"redis://127.0.0.1:{free_port()}/0"
    for key in ("broker_url", "broker_write_url"):
        monkeypatch.setitem(celery_app.conf, key, down)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok"
    assert "Connection refused" in body["checks"]["broker"]


def test_readyz_fails_naming_the_database_when_it_is_down(client, monkeypatch):
    def refuse(*args, **kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(connection, "cursor", refuse)
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["database"] == "OperationalError: could not connect to server"


def test_healthz_does_not_ask_the_database(client, monkeypatch):
    def refuse(*args, **kwargs):
        raise OperationalError("down")

    monkeypatch.setattr(connection, "cursor", refuse)
    assert client.get("/healthz").status_code == 200


def finished_cycle(seconds_ago: float) -> CycleRun:
    finished = timezone.now() - timedelta(seconds=seconds_ago)
    return CycleRun.objects.create(started_at=finished - timedelta(seconds=1), finished_at=finished)


@override_settings(CYCLE_MAX_AGE_SECONDS=120)
def test_a_stale_cycle_fails_readyz_only_when_asked(client):
    finished_cycle(seconds_ago=600)
    assert client.get("/readyz").status_code == 200  # the pages stay up
    response = client.get("/readyz?check=cycle")
    assert response.status_code == 503
    assert response.json()["checks"]["cycle"] == (
        "the last scheduling cycle finished 600 s ago (limit 120 s)"
    )


@override_settings(CYCLE_MAX_AGE_SECONDS=120)
def test_a_recent_cycle_passes_the_cycle_check(client):
    finished_cycle(seconds_ago=600)
    finished_cycle(seconds_ago=3)
    response = client.get("/readyz?check=cycle")
    assert response.status_code == 200
    assert response.json()["checks"]["cycle"] == "ok"


def test_no_cycle_yet_fails_the_cycle_check(client):
    response = client.get("/readyz?check=cycle")
    assert response.status_code == 503
    assert response.json()["checks"]["cycle"] == "no scheduling cycle has finished yet"


def test_readyz_config_has_no_warnings_on_the_simulated_cluster(client):
    response = client.get("/readyz?check=config")
    assert response.status_code == 200
    assert response.json()["warnings"] == {"config": []}


@override_settings(CLUSTER_BACKEND="kubernetes")
def test_readyz_config_warns_of_a_shared_namespace_and_drifted_labels_but_stays_ready(
    client, monkeypatch
):
    TenantFactory(name="nlp", security_level="restricted")
    asked = []

    def labels(*, names):
        asked.append(names)
        return {"gpu-jobs": {"pod-security.kubernetes.io/enforce": "privileged"}}

    monkeypatch.setattr("portal.scheduling.facade.namespace_labels_read", labels)
    response = client.get("/readyz?check=config")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"
    shared, drift = response.json()["warnings"]["config"]
    assert "tenants are not isolated on the cluster" in shared
    assert asked == [["gpu-jobs"]]
    assert drift.endswith(
        "kubectl label namespace gpu-jobs pod-security.kubernetes.io/enforce=restricted --overwrite"
    )


@override_settings(
    CLUSTER_BACKEND="kubernetes",
    KUBERNETES_NAMESPACE_PER_TENANT=True,
    KUBERNETES_NAMESPACE_PREFIX="gpu-",
)
def test_readyz_config_says_when_the_labels_cannot_be_read(client, monkeypatch):
    TenantFactory(name="nlp")

    def unreachable(*, names):
        raise ClusterUnavailable("connection refused")

    monkeypatch.setattr("portal.scheduling.facade.namespace_labels_read", unreachable)
    response = client.get("/readyz?check=config")
    assert response.status_code == 200
    assert response.json()["warnings"]["config"] == [
        "the jobs namespaces' pod security labels could not be compared with the tenants' "
        "levels: connection refused"
    ]
