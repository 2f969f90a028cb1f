"""The embedded default's SQLite: logins keep working while scheduling cycles write.

A transaction that starts by reading and then writes (a login reads the user, then writes the
session and last_login) cannot wait for SQLite's write lock: if another connection wrote in
between, SQLite refuses at once with "database is locked", whatever the busy timeout. With
immediate transactions every transaction takes the write lock when it begins, where the busy
timeout applies, so it waits its turn instead.
"""

import threading
import time
from http import HTTPStatus

import pytest
from django.conf import settings
from django.db import connection
from django.test import Client
from django.urls import reverse

from portal.tenants.models import Membership
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, NodeFactory, QueueFactory, TenantFactory, UserFactory
from tests.scheduler.conftest import submit_job

LOGINS = 200
PASSWORD = "demo-pass-123"

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        not settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"),
        reason="SQLite's locking only",
    ),
]


def test_sqlite_runs_in_wal_mode_with_immediate_transactions():
    options = settings.DATABASES["default"]["OPTIONS"]
    assert options["transaction_mode"] == "IMMEDIATE"
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"


def test_two_hundred_logins_while_cycles_run_never_answer_500():
    for i in range(1, 5):
        NodeFactory(name=f"gpu-worker-{i}")
    tenant = TenantFactory(name="nlp")
    queue = QueueFactory(tenant=tenant, name="nlp-train")
    user = UserFactory(username="researcher")
    user.set_password(PASSWORD)
    user.save()
    MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)

    stop = threading.Event()
    cycles: list[int] = []
    failures: list[BaseException] = []

    def worker() -> None:
        """What the Celery worker does: cycles back to back, with work that makes them write
        (jobs submitted, placed, run to completion, cancelled)."""
        backend = SimulatedBackend(default_run_seconds=1)
        try:
            n = 0
            while not stop.is_set():
                submit_job(user, queue, f"job-{n}", replicas=2, gpus=1, duration=1)
                n += 1
                scheduling_cycle_run(backend=backend)
                cycles.append(n)
        except BaseException as error:  # reported by the main thread
            failures.append(error)
        finally:
            connection.close()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    statuses = []
    try:
        while len(cycles) < 2 and thread.is_alive():
            time.sleep(0.05)  # the worker is writing before the first login
        client = Client(raise_request_exception=False)
        url = reverse("login")
        for _ in range(LOGINS):
            response = client.post(url, {"username": "researcher", "password": PASSWORD})
            statuses.append(response.status_code)
            client.logout()
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not failures, failures
    assert len(cycles) >= 2
    assert statuses.count(HTTPStatus.FOUND) == LOGINS, sorted(set(statuses))


def test_the_checks_every_command_runs_print_nothing_on_sqlite():
    """No "SQLite does not support indexes with non-key columns" at every start: the covering
    index is PostgreSQL's, and SQLite keeps its key columns."""
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("check", databases=["default"], stdout=out, stderr=out)
    assert "W040" not in out.getvalue()
    assert "no issues" in out.getvalue()
