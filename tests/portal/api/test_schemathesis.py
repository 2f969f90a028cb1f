"""Schemathesis against our own OpenAPI schema over HTTP (the CLI against a live server):
generated requests for every operation, as staff (sees everything) and as a researcher
(tenant-scoped). No response may be a 500 or break the schema. Bounded by examples, not by
time: the same cases run on a fast machine and a slow one."""

import json
import os
import subprocess
import sys

import pytest
from django.core.cache import cache

from tests.factories import (
    JobFactory,
    JobTaskFactory,
    NodeFactory,
    PreemptionEventFactory,
    api_token_secret,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"


@pytest.fixture
def data(researcher, nlp_queue, vision_queue):
    NodeFactory(name="gpu-worker-1")
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    JobTaskFactory(job=job, name="worker")
    PreemptionEventFactory(victim_job=job)


@pytest.fixture(autouse=True)
def _no_throttle(settings):
    # Generated job creations must not be turned away by the rate limiter.
    settings.API_THROTTLE_RATES = {"job_create": "100000/min", "token_create": "100000/min"}
    cache.clear()


def run_schemathesis(live_server, user, tmp_path) -> subprocess.CompletedProcess:
    report = tmp_path / "report.json"
    return subprocess.run(
        [
            sys.executable, "-m", "schemathesis.cli", "run", f"{live_server.url}/api/schema/",
            "--header", f"Authorization: Token {api_token_secret(user)}",
            "--checks", CHECKS, "--max-examples", "15",
            "--seed", "1", "--workers", "1", "--phases", "examples,coverage,fuzzing",
            "--report", "json", "--report-json-path", str(report),
        ],
        capture_output=True, text=True, timeout=900, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip


@pytest.mark.parametrize("role", ["staff", "researcher"])
def test_generated_requests_never_error_and_keep_the_schema(
    role, staff, researcher, data, live_server, tmp_path
):
    run = run_schemathesis(live_server, staff if role == "staff" else researcher, tmp_path)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "No issues found" in run.stdout or "passed" in run.stdout.lower(), run.stdout[-3000:]
    json.loads((tmp_path / "report.json").read_text())
