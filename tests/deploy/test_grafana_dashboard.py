"""deploy/grafana-dashboard.json asks only for series the portal exports, with the labels they
carry: a renamed metric breaks this test, not the operators' dashboard."""

import json
import re
from pathlib import Path

import pytest
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from portal.ops.metrics import web_exposition
from tests.portal.ops.scenario import Clock, busy_cluster

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana-dashboard.json"
SERIES = re.compile(r"\b(gpuportal_[a-z0-9_]+)\b")
LABELS = re.compile(r"\b(gpuportal_[a-z0-9_]+)\{([^}]*)\}")
GROUPED = re.compile(r"by \(([^)]*)\) \((?:rate|increase)?\(?(gpuportal_[a-z0-9_]+)")


def exported(client) -> dict[str, set[str]]:
    """Every sample name the web and the worker export, with its label names (after a
    request and a Celery task, so their labelled series exist too)."""
    from scheduler.tasks import scheduling_cycle_run

    client.get("/accounts/login/")
    scheduling_cycle_run.delay()
    texts = [web_exposition().decode(), generate_latest(REGISTRY).decode()]
    names: dict[str, set[str]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                names.setdefault(sample.name, set()).update(sample.labels)
    return names


def expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    found += [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    return found


@pytest.mark.django_db
def test_every_query_names_an_exported_series_and_its_labels(client, nlp_queue, vision_queue):
    busy_cluster(nlp_queue, vision_queue, clock=Clock())
    names = exported(client)
    queries = expressions()
    assert len(queries) > 15
    for expr in queries:
        for series in SERIES.findall(expr):
            assert series in names, f"{series} in {expr!r}"
        for series, matchers in LABELS.findall(expr):
            for label in re.findall(r"(\w+)\s*=", matchers):
                assert label in names[series], f"{series} has no label {label}"
        for grouping, series in GROUPED.findall(expr):
            wanted = {label.strip() for label in grouping.split(",")} - {"le"}
            assert wanted <= names[series], f"{series} lacks {wanted - names[series]}"
