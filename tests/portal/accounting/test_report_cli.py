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
        ["nlp-train", "nlp", "15", "10", "5", "2", "40"],
        ["nlp-dev", "nlp", "4", "1", "3", "0", "0"],
        ["total", "19", "11", "8", "2", "40"],
    ]


def test_report_json_and_a_bad_month(gpuq):
    code, out, _ = gpuq("report", "--json")
    assert code == 0
    assert json.loads(out)["month"] == "2026-12"

    code, _, err = gpuq("report", "--month", "2030-01")
    assert code == 1
    assert "month" in err
    assert "2030-01 has not started yet" in err
