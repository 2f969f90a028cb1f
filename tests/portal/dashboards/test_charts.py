"""The chart builders are pure: rows in, Plotly figure dicts out (no database)."""

from datetime import UTC, datetime, timedelta

import plotly.graph_objects as go
import pytest

from portal.common.palette import QUEUE_PALETTE
from portal.dashboards import charts

T0 = datetime(2026, 1, 1, tzinfo=UTC)
COLOURS = {"a": QUEUE_PALETTE[0], "b": QUEUE_PALETTE[1], "nlp": QUEUE_PALETTE[2]}


def _valid(figure):
    """Plotly accepts the dict (raises on an unknown property)."""
    go.Figure(figure)
    return figure


def _message(figure) -> str:
    assert figure["data"] == []
    return figure["layout"]["annotations"][0]["text"]


def _colours_used(trace) -> list[str]:
    marker = trace.get("marker", {})
    colour = marker.get("color")
    found = colour if isinstance(colour, list) else [colour]
    found += [trace.get("line", {}).get("color"), marker.get("line", {}).get("color")]
    return [c for c in found if c]


def test_usage_area_stacks_every_queue_on_every_bucket():
    rows = [
        {"bucket": T0, "queue": "b", "gpus": 2.0},
        {"bucket": T0, "queue": "a", "gpus": 1.0},
        {"bucket": T0 + timedelta(hours=1), "queue": "a", "gpus": 3.0},
        {"bucket": T0 + timedelta(hours=2), "queue": "a", "gpus": 3.0},
    ]
    figure = _valid(charts.usage_area(rows, colours=COLOURS))
    assert [trace["name"] for trace in figure["data"]] == ["a", "b"]
    assert figure["data"][0]["y"] == [1.0, 3.0, 3.0]
    assert figure["data"][1]["y"] == [2.0, 0.0, 0.0]
    assert {trace["stackgroup"] for trace in figure["data"]} == {"gpus"}
    assert figure["data"][0]["x"][:2] == ["2026-01-01T00:00:00", "2026-01-01T01:00:00"]
    assert figure["data"][1]["line"]["color"] == COLOURS["b"]
    assert figure["data"][0]["mode"] == "lines"


def test_usage_area_draws_a_lone_point_as_a_marker_over_the_whole_range():
    rows = [{"bucket": T0, "queue": "a", "gpus": 2.0}]
    figure = _valid(
        charts.usage_area(
            rows, colours=COLOURS, since=T0 - timedelta(days=1), until=T0, bucket="hour"
        )
    )
    assert figure["data"][0]["mode"] == "lines+markers"
    axis = figure["layout"]["xaxis"]
    assert axis["range"] == ["2025-12-31T00:00:00", "2026-01-01T00:00:00"]
    assert axis["type"] == "date"
    assert "%S" not in axis["tickformat"]
    assert "%L" not in axis["tickformat"]
    assert "UTC" in axis["title"]["text"]


def test_usage_area_without_allocation_says_so():
    assert _message(_valid(charts.usage_area([], colours=COLOURS))) == charts.USAGE_EMPTY
    idle = [{"bucket": T0, "queue": "a", "gpus": 0}]
    assert _message(charts.usage_area(idle, colours=COLOURS)) == charts.USAGE_EMPTY


def test_quota_bars_encode_meanings_by_shape_and_explain_unlimited_and_fractions():
    rows = [
        {"name": "a", "allocated": 4, "deserved": 6.5, "guarantee": 2, "capability": None},
        {"name": "b", "allocated": 0, "deserved": 1, "guarantee": 0, "capability": 8},
    ]
    figure = _valid(charts.quota_bars(rows, colours=COLOURS, cluster_gpus=32))
    capability, allocated, guarantee, deserved = figure["data"]
    assert capability["x"] == ["b"]
    assert capability["y"] == [8]
    assert capability["marker"]["color"] == "rgba(0,0,0,0)"  # an outline, no fill
    assert allocated["marker"]["color"] == [COLOURS["a"], COLOURS["b"]]
    assert guarantee["x"] == ["a"]
    assert guarantee["marker"]["symbol"] == "line-ew-open"
    assert deserved["marker"]["symbol"] == "diamond"
    assert deserved["text"][0] == (
        "deserves 6.5 GPUs (20% of 32): a weighted share; pods take whole GPUs, "
        "so up to 6 by its own share"
    )
    assert deserved["text"][1] == "deserves 1 GPU (3% of 32)"
    shared = charts.quota_bars(rows, colours=COLOURS, cluster_gpus=32, shares=True)
    assert shared["data"][3]["text"][0] == (
        "deserves 6.5 GPUs (20% of 32): a weighted share; pods of whole GPUs get up to 6 by "
        "its own share, pods with a share of a GPU the rest"
    )
    notes = figure["layout"]["annotations"]
    assert [(note["x"], note["text"]) for note in notes] == [("a", charts.UNLIMITED_NOTE)]
    for trace in (capability, guarantee, deserved):
        assert not set(_colours_used(trace)) & set(QUEUE_PALETTE), trace["name"]


def test_quota_bars_without_queues_say_so():
    assert _message(_valid(charts.quota_bars([], colours=COLOURS))) == "No queues to show."


def test_occupancy_fills_devices_in_order_and_counts_free_blocks():
    nodes = [("n1", 8), ("n2", 8), ("n3", 4), ("n4", 2)]
    placements = [
        ("n1", "nlp", 1, 4000, []),
        ("n1", "cv", 2, 3000, []),
        ("n3", "nlp", 3, 2000, []),
        ("ghost", "x", 4, 1000, []),
    ]
    result = charts.occupancy(nodes, placements)
    assert result["cells"]["n1"] == ["nlp"] * 4 + ["cv"] * 3 + [charts.FREE]
    assert result["jobs"]["n1"][:5] == [1, 1, 1, 1, 2]
    assert charts.free_blocks(result["cells"]) == {8: 1, 4: 0, 2: 2, 1: 1}
    assert charts.shared_devices(result) == 0


def test_occupancy_shows_shared_devices_where_the_placements_say():
    nodes = [("n1", 4)]
    placements = [
        ("n1", "nlp", 1, 2000, [2, 3]),  # whole cards at known indices
        ("n1", "cv", 2, 250, [0]),
        ("n1", "nlp", 3, 500, [0]),  # a second pod on device 0
        ("n1", "cv", 4, 300, []),  # no index stored: a device with room (0 has 0.25 left)
        ("n1", "cv", 5, 100, []),  # ... and now 0 has 0.15 left
    ]
    result = charts.occupancy(nodes, placements)
    assert result["cells"]["n1"] == ["cv", "cv", "nlp", "nlp"]
    assert result["milli"]["n1"] == [850, 300, 1000, 1000]
    assert result["holders"]["n1"] == [3, 1, 1, 1]
    assert charts.shared_devices(result) == 2
    # a partly used device is not free for whole-GPU pods
    assert charts.free_blocks(result["cells"]) == {8: 0, 4: 0, 2: 0, 1: 0}
    figure = charts.occupancy_heatmap(
        result["cells"], result["jobs"], colours=COLOURS, milli=result["milli"],
        holders=result["holders"],
    )  # fmt: skip
    assert (
        figure["data"][0]["text"][0][0] == "cv (job 2) and 2 more: shared, 0.85 of the GPU in use"
    )


def test_free_block_labels_fit_the_node_size():
    on_eight = charts.free_block_labels(8)
    assert on_eight[8] == "nodes entirely free (8 GPUs)"
    assert on_eight[4] == "nodes with 4 to 7 free"
    assert on_eight[2] == "nodes with 2 to 3 free"
    assert on_eight[1] == "nodes with 1 free"
    assert charts.free_block_labels(16)[8] == "nodes with 8 or more free"
    # Under its count: "1 node", "0 nodes", "2 nodes".
    counted = charts.free_block_labels(8, {8: 1, 4: 0, 2: 1, 1: 2})
    assert counted == {
        8: "node entirely free (8 GPUs)",
        4: "nodes with 4 to 7 free",
        2: "node with 2 to 3 free",
        1: "nodes with 1 free",
    }


def test_occupancy_heatmap_rows_nodes_columns_gpu_index():
    cells = {"n1": ["nlp", charts.FREE], "n2": [charts.FREE, charts.FREE, "cv"]}
    colours = {"nlp": COLOURS["nlp"], "cv": QUEUE_PALETTE[5]}
    figure = _valid(charts.occupancy_heatmap(cells, {"n1": [7, None]}, colours=colours))
    trace = figure["data"][0]
    assert trace["y"] == ["n1", "n2"]
    assert trace["x"] == ["0", "1", "2"]
    assert figure["layout"]["xaxis"]["title"]["text"] == "GPU index"
    # codes: free 0, then queues sorted: cv 1, nlp 2; a missing device is None
    assert trace["z"] == [[2, 0, None], [0, 0, 1]]
    assert trace["text"][0][0] == "nlp (job 7)"
    assert trace["colorbar"]["ticktext"] == ["free", "cv", "nlp"]
    assert [step[1] for step in trace["colorscale"][::2]] == [
        charts.FREE_COLOUR,
        colours["cv"],
        colours["nlp"],
    ]


def test_occupancy_heatmap_height_follows_the_node_count():
    def height(count):
        cells = {f"n{i}": [charts.FREE] * 8 for i in range(count)}
        return charts.occupancy_heatmap(cells, colours={})["layout"]["height"]

    assert height(4) < 300
    assert height(40) - height(4) == 36 * (height(5) - height(4))


def test_eviction_bars_span_their_time_bucket():
    rows = [{"bucket": T0, "action": "reclaim", "events": 2, "gpus": 8}]
    trace = charts.preemptions_over_time(rows, bucket="hour")["data"][0]
    assert trace["width"] == pytest.approx(0.9 * 3_600_000)
    assert trace["offset"] == pytest.approx(0.05 * 3_600_000)


def test_occupancy_heatmap_all_free_and_empty():
    _valid(charts.occupancy_heatmap({"n1": [charts.FREE] * 4}, colours={}))
    assert _message(_valid(charts.occupancy_heatmap({}, colours={}))) == charts.NO_NODES


def test_wait_bars_show_median_range_and_count_in_the_queue_colour():
    waits = {"nlp": [60, 120, 180, 240, 300], "a": [], "b": [600]}
    figure = _valid(charts.wait_bars(waits, colours=COLOURS))
    trace = figure["data"][0]
    assert trace["x"] == ["b", "nlp"]
    assert trace["y"] == [10.0, 3.0]
    assert trace["error_y"]["array"] == [0.0, 2.0]
    assert trace["error_y"]["arrayminus"] == [0.0, 2.0]
    assert trace["text"] == ["1 job", "5 jobs"]
    assert trace["customdata"][1] == [1.0, 2.0, 4.0, 5.0]
    assert trace["marker"]["color"] == [COLOURS["b"], COLOURS["nlp"]]
    assert figure["layout"]["yaxis"]["title"]["text"] == "median wait (minutes)"


def test_wait_bars_switch_to_hours_and_say_when_nothing_waits():
    figure = charts.wait_bars({"a": [3 * 3600]}, colours=COLOURS)
    assert figure["data"][0]["y"] == [3.0]
    assert figure["layout"]["yaxis"]["title"]["text"] == "median wait (hours)"
    assert _message(charts.wait_bars({"a": []}, colours=COLOURS)) == "No job is waiting."


def test_pending_demand_bars():
    figure = _valid(charts.pending_demand_bars({"nlp": 16, "a": 4, "b": 0}, colours=COLOURS))
    assert figure["data"][0]["x"] == ["a", "nlp"]
    assert figure["data"][0]["y"] == [4, 16]
    assert figure["data"][0]["marker"]["color"] == [COLOURS["a"], COLOURS["nlp"]]
    assert _message(charts.pending_demand_bars({}, colours=COLOURS)).startswith("No job")


def test_pending_demand_lists_the_jobs_that_can_never_run_apart():
    figure = _valid(
        charts.pending_demand_bars({"nlp": 3}, colours=COLOURS, never={"nlp": 32, "a": 16})
    )
    waiting, never = figure["data"]
    assert (waiting["x"], waiting["y"]) == (["a", "nlp"], [0, 3])
    assert never["name"] == "can never run as submitted"
    assert (never["x"], never["y"]) == (["a", "nlp"], [16, 32])


def test_preemptions_over_time_stacks_actions_by_pattern_not_queue_colour():
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
    assert reclaim["marker"]["pattern"]["shape"] == "/"
    assert reclaim["marker"]["pattern"]["bgcolor"] == reclaim["marker"]["color"]  # not see-through
    assert figure["layout"]["barmode"] == "stack"
    assert figure["layout"]["yaxis"]["dtick"] == 1
    for trace in figure["data"]:
        assert not set(_colours_used(trace)) & set(QUEUE_PALETTE)


@pytest.mark.parametrize("message", [charts.EVICTIONS_EMPTY, "Evictions are for admins."])
def test_preemptions_over_time_without_rows_says_so(message):
    figure = _valid(charts.preemptions_over_time([], empty_message=message))
    assert _message(figure) == message
    assert figure["layout"]["xaxis"]["visible"] is False
