"""`python -m portal.cli report` against a live server, as a researcher of nlp."""

import io
import json

import pytest

from portal.cli.main import main
from tests.factories import api_token_secret


@pytest.fixture
def gpuq(transactional_db, live_server, researcher, frozen, ledger):
    token = api_token_secret(researcher)

    def run(*args: str):
        out, err = io.StringIO(), io.StringIO()
        code = main(["--url", live_server.url, "--token", token, *args], out=out, err=err)
        return code, out.getvalue(), err.getvalue()

    return run


def test_report_prints_a_month_per_queue_with_its_total(gpuq):
    code, out, _ = gpuq("report", "--group-by", "queue", "--month", "2026-11")

    assert code == 0
    title, header, *rows = out.splitlines()
    assert title == "2026-11 (final)"
    assert header.split() == [
        "QUEUE", "TENANT", "GPU-HOURS", "WITHIN", "BORROWED", "LOST", "CPU-CORE-HOURS",
    ]  # fmt: skip
    assert [row.split() for row in rows] == [
        ["nlp-train", "nlp", "15.0", "10.0", "5.0", "2.0", "40.0"],
        ["nlp-dev", "nlp", "4.0", "1.0", "3.0", "0.0", "0.0"],
        ["total", "19.0", "11.0", "8.0", "2.0", "40.0"],
    ]


@pytest.mark.parametrize("group_by", ["user", "tenant"])
def test_report_per_user_or_tenant_has_no_tenant_column(gpuq, group_by):
    """A user's use spans tenants and a tenant's row is its own name: no empty column."""
    code, out, _ = gpuq("report", "--group-by", group_by, "--month", "2026-11")

    assert code == 0
    _, header, *rows = out.splitlines()
    assert header.split() == [
        group_by.upper(), "GPU-HOURS", "WITHIN", "BORROWED", "LOST", "CPU-CORE-HOURS",
    ]  # fmt: skip
    assert all(len(row.split()) == 6 for row in rows), rows


def test_report_json_and_a_bad_month(gpuq):
    code, out, _ = gpuq("report", "--json")
    assert code == 0
    assert json.loads(out)["month"] == "2026-12"

    code, _, err = gpuq("report", "--month", "2030-01")
    assert code == 1
    assert "month" in err
    assert "2030-01 has not started yet" in err
