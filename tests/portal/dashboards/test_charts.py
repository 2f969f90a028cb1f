"""The chart builders are pure: rows in, Plotly figure dicts out (no database)."""

from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from portal.dashboards import charts

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _valid(figure):
    """Plotly accepts the dict (raises on an unknown property)."""
    go.Figure(figure)
    return figure


def test_usage_area_stacks_every_queue_on_every_bucket():
    rows = [
        {"bucket": T0, "queue": "b", "gpus": 2.0},
        {"bucket": T0, "queue": "a", "gpus": 1.0},
        {"bucket": T0 + timedelta(hours=1), "queue": "a", "gpus": 3.0},
    ]
    figure = _valid(charts.usage_area(rows))
    assert [trace["name"] for trace in figure["data"]] == ["a", "b"]
    assert figure["data"][0]["y"] == [1.0, 3.0]
    assert figure["data"][1]["y"] == [2.0, 0.0]
    assert {trace["stackgroup"] for trace in figure["data"]} == {"gpus"}
    assert figure["data"][0]["x"] == [T0.isoformat(), (T0 + timedelta(hours=1)).isoformat()]


def test_usage_area_empty():
    assert _valid(charts.usage_area([]))["data"] == []


def test_quota_bars_group_four_series_and_mark_unlimited():
    rows = [
        {"name": "nlp", "allocated": 4, "deserved": 6.5, "guarantee": 2, "capability": None},
        {"name": "cv", "allocated": 0, "deserved": 1, "guarantee": 0, "capability": 8},
    ]
    figure = _valid(charts.quota_bars(rows))
    assert [trace["name"] for trace in figure["data"]] == [
        "Allocated",
        "Deserved",
        "Guarantee",
        "Capability",
    ]
    capability = figure["data"][3]
    assert capability["y"] == [0, 8.0]
    assert capability["text"] == ["unlimited", ""]
    assert figure["layout"]["barmode"] == "group"


def test_occupancy_fills_devices_in_order_and_counts_free_blocks():
    nodes = [("n1", 8), ("n2", 8), ("n3", 4), ("n4", 2)]
    placements = [
        ("n1", "nlp", 1, 4),
        ("n1", "cv", 2, 3),
        ("n3", "nlp", 3, 2),
        ("ghost", "x", 4, 1),
    ]
    result = charts.occupancy(nodes, placements)
    assert result["cells"]["n1"] == ["nlp"] * 4 + ["cv"] * 3 + [charts.FREE]
    assert result["jobs"]["n1"][:5] == [1, 1, 1, 1, 2]
    assert charts.free_blocks(result["cells"]) == {8: 1, 4: 0, 2: 2, 1: 1}


def test_occupancy_heatmap_rows_nodes_columns_gpu_index():
    cells = {"n1": ["nlp", charts.FREE], "n2": [charts.FREE, charts.FREE, "cv"]}
    figure = _valid(charts.occupancy_heatmap(cells, {"n1": [7, None]}))
    trace = figure["data"][0]
    assert trace["y"] == ["n1", "n2"]
    assert trace["x"] == ["GPU 0", "GPU 1", "GPU 2"]
    # codes: free 0, then queues sorted: cv 1, nlp 2; a missing device is None
    assert trace["z"] == [[2, 0, None], [0, 0, 1]]
    assert trace["text"][0][0] == "nlp (job 7)"
    assert trace["colorbar"]["ticktext"] == ["free", "cv", "nlp"]


def test_occupancy_heatmap_all_free_and_empty():
    _valid(charts.occupancy_heatmap({"n1": [charts.FREE] * 4}))
    _valid(charts.occupancy_heatmap({}))


def test_colours_are_shared_between_charts():
    colours = charts.queue_colours(["b", "a"])
    rows = [{"bucket": T0, "queue": "b", "gpus": 1}]
    area = charts.usage_area(rows, colours=colours)
    bars = charts.pending_demand_bars({"b": 3}, colours=colours)
    assert area["data"][0]["line"]["color"] == colours["b"] == bars["data"][0]["marker"]["color"][0]
    assert colours["a"] != colours["b"]


def test_wait_box_uses_precomputed_quartiles():
    figure = _valid(charts.wait_box({"nlp": [60, 120, 180, 240, 300], "cv": [], "x": [600]}))
    trace = figure["data"][0]
    assert trace["x"] == ["nlp", "x"]
    assert trace["median"] == [3.0, 10.0]
    assert trace["lowerfence"] == [1.0, 10.0]
    assert trace["upperfence"] == [5.0, 10.0]
    assert trace["q1"][0] == pytest.approx(2.0)
    assert trace["q3"][0] == pytest.approx(4.0)


def test_pending_demand_bars():
    figure = _valid(charts.pending_demand_bars({"nlp": 16, "cv": 4}))
    assert figure["data"][0]["x"] == ["cv", "nlp"]
    assert figure["data"][0]["y"] == [4, 16]


def test_preemptions_over_time_stacks_actions():
    rows = [
        {"bucket": T0, "action": "reclaim", "events": 2, "gpus": 16},
        {"bucket": T0, "action": "preempt", "events": 1, "gpus": 8},
        {"bucket": T0 + timedelta(hours=1), "action": "reclaim", "events": 1, "gpus": None},
    ]
    figure = _valid(charts.preemptions_over_time(rows))
    assert [trace["name"] for trace in figure["data"]] == ["preempt", "reclaim"]
    reclaim = figure["data"][1]
    assert reclaim["y"] == [2, 1]
    assert reclaim["customdata"] == [16, 0]
    assert figure["layout"]["barmode"] == "stack"
