"""Pure chart builders: plain rows in, Plotly figure dicts out (no DB, no Django, no I/O).

Figures are plain dicts in Plotly's JSON shape ({"data": [...], "layout": {...}}), so the
views return them with JsonResponse and the page hands them to Plotly.react unchanged.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

FREE = "free"
FREE_COLOUR = "#e9edf3"
PALETTE = (
    "#4f8cff",
    "#36c28a",
    "#f5a524",
    "#e5484d",
    "#8e4ec6",
    "#12a594",
    "#d6409f",
    "#7c8a9a",
    "#ffb224",
    "#3e63dd",
    "#30a46c",
    "#ad7f58",
)
FREE_BLOCK_SIZES = (8, 4, 2, 1)
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def colour_for(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def queue_colours(names: Iterable[str]) -> dict[str, str]:
    """One stable colour per queue name (sorted), shared by every chart of a page."""
    return {name: colour_for(index) for index, name in enumerate(sorted(set(names)))}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "font": FONT,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": -0.15},
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def _iso(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


# per-queue GPU use over time ---------------------------------------------------------------
def usage_area(
    rows: Iterable[Mapping[str, Any]],
    *,
    title: str = "GPUs allocated per queue",
    colours: Mapping[str, str] | None = None,
):
    """Stacked area: rows of {"bucket": datetime, "queue": str, "gpus": float}.

    Every queue gets a value at every bucket (0 when it had no sample) so the stack is exact.
    """
    buckets: list[Any] = []
    seen_buckets: set[Any] = set()
    series: dict[str, dict[Any, float]] = defaultdict(dict)
    for row in rows:
        bucket = row["bucket"]
        if bucket not in seen_buckets:
            seen_buckets.add(bucket)
            buckets.append(bucket)
        series[row["queue"]][bucket] = float(row["gpus"] or 0)
    buckets.sort()
    x = [_iso(bucket) for bucket in buckets]
    colours = colours or queue_colours(series)
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": queue,
            "x": x,
            "y": [round(values.get(bucket, 0.0), 2) for bucket in buckets],
            "stackgroup": "gpus",
            "line": {"width": 0.5, "color": colours.get(queue, "#7c8a9a")},
            "hovertemplate": "%{y:.1f} GPUs<extra>" + queue + "</extra>",
        }
        for queue, values in sorted(series.items())
    ]
    return {
        "data": data,
        "layout": _layout(
            title, yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero"}, hovermode="x unified"
        ),
    }


# allocated vs deserved vs guarantee vs capability -------------------------------------------
QUOTA_SERIES = (
    ("allocated", "Allocated", "#4f8cff"),
    ("deserved", "Deserved", "#36c28a"),
    ("guarantee", "Guarantee", "#f5a524"),
    ("capability", "Capability", "#7c8a9a"),
)


def quota_bars(rows: Sequence[Mapping[str, Any]], *, title: str = "Quota per queue (GPUs)"):
    """Grouped bars per queue. Rows: name, allocated, deserved, guarantee, capability (None:
    unlimited, drawn as no bar and said so in the hover text)."""
    names = [row["name"] for row in rows]
    data = []
    for key, label, colour in QUOTA_SERIES:
        values = [row.get(key) for row in rows]
        data.append(
            {
                "type": "bar",
                "name": label,
                "x": names,
                "y": [0 if value is None else round(float(value), 2) for value in values],
                "text": ["unlimited" if value is None else "" for value in values],
                "marker": {"color": colour},
                "hovertemplate": "%{x}: %{y} GPUs %{text}<extra>" + label + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(title, barmode="group", yaxis={"title": {"text": "GPUs"}}),
    }


# node x GPU occupancy -----------------------------------------------------------------------
def occupancy(
    nodes: Sequence[tuple[str, int]], placements: Iterable[tuple[str, str, int, int]]
) -> dict[str, Any]:
    """Per node, who holds each GPU index (devices are filled in placement order).

    `nodes`: (name, gpu_count); `placements`: (node name, queue name, job id, gpus).
    Returns {"cells": {node: [queue or FREE, ...]}, "jobs": {node: [job id or None, ...]}}.
    """
    cells = {name: [FREE] * count for name, count in nodes}
    jobs: dict[str, list[int | None]] = {name: [None] * count for name, count in nodes}
    cursor = dict.fromkeys(cells, 0)
    for node, queue, job_id, gpus in placements:
        if node not in cells:
            continue
        for _ in range(gpus):
            index = cursor[node]
            if index >= len(cells[node]):
                break
            cells[node][index] = queue
            jobs[node][index] = job_id
            cursor[node] = index + 1
    return {"cells": cells, "jobs": jobs}


def free_blocks(cells: Mapping[str, Sequence[str]]) -> dict[int, int]:
    """How many nodes have a largest free block of at least 8 / 4 / 2 / 1 GPUs (each node
    counted once, in the largest size it reaches)."""
    counts = dict.fromkeys(FREE_BLOCK_SIZES, 0)
    for devices in cells.values():
        free = sum(1 for owner in devices if owner == FREE)
        for size in FREE_BLOCK_SIZES:
            if free >= size:
                counts[size] += 1
                break
    return counts


def occupancy_heatmap(
    cells: Mapping[str, Sequence[str]],
    jobs: Mapping[str, Sequence[int | None]] | None = None,
    *,
    title: str = "GPU occupancy (rows: nodes, columns: GPU index)",
    colours: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Heatmap: one row per node, one column per GPU index, colour by queue (grey: free)."""
    nodes = list(cells)
    width = max((len(devices) for devices in cells.values()), default=0)
    queues = sorted({owner for devices in cells.values() for owner in devices} - {FREE})
    codes = {FREE: 0, **{queue: index + 1 for index, queue in enumerate(queues)}}
    z, text = [], []
    for node in nodes:
        devices = list(cells[node])
        owners = jobs.get(node, []) if jobs else []
        row_z: list[int | None] = []
        row_text: list[str] = []
        for index in range(width):
            if index >= len(devices):
                row_z.append(None)
                row_text.append("")
                continue
            owner = devices[index]
            row_z.append(codes[owner])
            job = owners[index] if index < len(owners) else None
            row_text.append(owner if job is None else f"{owner} (job {job})")
        z.append(row_z)
        text.append(row_text)
    steps = len(codes)
    colours = colours or queue_colours(queues)
    palette = [FREE_COLOUR] + [colours.get(queue, "#7c8a9a") for queue in queues]
    colorscale = []
    for index, colour in enumerate(palette):
        low = index / steps
        high = (index + 1) / steps
        colorscale += [[low, colour], [high, colour]]
    if len(colorscale) == 2:
        colorscale = [[0, FREE_COLOUR], [1, FREE_COLOUR]]
    data = [
        {
            "type": "heatmap",
            "z": z,
            "x": [f"GPU {index}" for index in range(width)],
            "y": nodes,
            "text": text,
            "zmin": -0.5,
            "zmax": steps - 0.5,
            "colorscale": colorscale,
            "xgap": 2,
            "ygap": 2,
            "hovertemplate": "%{y} %{x}: %{text}<extra></extra>",
            "colorbar": {
                "tickvals": list(range(steps)),
                "ticktext": [FREE, *queues],
                "title": {"text": "queue"},
            },
        }
    ]
    height = max(260, 26 * len(nodes) + 90)
    return {
        "data": data,
        "layout": _layout(
            title,
            height=height,
            yaxis={"autorange": "reversed", "automargin": True},
        ),
    }


# pending demand and wait times --------------------------------------------------------------
def pending_demand_bars(
    demand: Mapping[str, float],
    *,
    title: str = "Pending GPU demand",
    colours: Mapping[str, str] | None = None,
):
    names = sorted(demand)
    colours = colours or queue_colours(names)
    data = [
        {
            "type": "bar",
            "x": names,
            "y": [demand[name] for name in names],
            "marker": {"color": [colours.get(name, "#7c8a9a") for name in names]},
            "hovertemplate": "%{x}: %{y} GPUs pending<extra></extra>",
        }
    ]
    return {"data": data, "layout": _layout(title, yaxis={"title": {"text": "GPUs"}})}


def _quantile(values: Sequence[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def wait_box(
    waits: Mapping[str, Sequence[float]], *, title: str = "Wait time of pending jobs (minutes)"
):
    """Box per queue from precomputed quartiles (no raw points shipped to the browser)."""
    stats = {}
    for name, seconds in waits.items():
        if not seconds:
            continue
        values = sorted(seconds)
        stats[name] = {
            "q1": _quantile(values, 0.25),
            "median": statistics.median(values),
            "q3": _quantile(values, 0.75),
            "min": values[0],
            "max": values[-1],
            "count": len(values),
        }
    return wait_box_from_stats(stats, title=title)


def wait_box_from_stats(
    stats_by_queue: Mapping[str, Mapping[str, float]],
    *,
    title: str = "Wait time of pending jobs (minutes)",
):
    """Box per queue from wait-time statistics in seconds (q1, median, q3, min, max, count),
    e.g. computed in the database by `portal.jobs.selectors.pending_wait_stats`."""
    names = [name for name in sorted(stats_by_queue) if stats_by_queue[name].get("count")]
    stats = []
    for name in names:
        row = stats_by_queue[name]
        stats.append(
            {
                "q1": round(row["q1"] / 60, 1),
                "median": round(row["median"] / 60, 1),
                "q3": round(row["q3"] / 60, 1),
                "lowerfence": round(row["min"] / 60, 1),
                "upperfence": round(row["max"] / 60, 1),
                "count": int(row["count"]),
            }
        )
    data = [
        {
            "type": "box",
            "name": "wait",
            "x": names,
            "q1": [s["q1"] for s in stats],
            "median": [s["median"] for s in stats],
            "q3": [s["q3"] for s in stats],
            "lowerfence": [s["lowerfence"] for s in stats],
            "upperfence": [s["upperfence"] for s in stats],
            "marker": {"color": "#8e4ec6"},
            "showlegend": False,
        }
    ]
    return {
        "data": data,
        "layout": _layout(title, yaxis={"title": {"text": "minutes"}, "rangemode": "tozero"}),
    }


# preemptions over time ----------------------------------------------------------------------
ACTION_COLOURS = {
    "preempt": "#e5484d",
    "reclaim": "#f5a524",
    "rescheduling": "#8e4ec6",
    "admin": "#7c8a9a",
}


def preemptions_over_time(
    rows: Iterable[Mapping[str, Any]], *, title: str = "Evictions over time"
) -> dict[str, Any]:
    """Stacked bars per action: rows of {"bucket", "action", "events", "gpus"}."""
    by_action: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    for row in rows:
        by_action[row["action"]][_iso(row["bucket"])] = (int(row["events"]), int(row["gpus"] or 0))
    data = []
    for action in sorted(by_action):
        points = sorted(by_action[action].items())
        data.append(
            {
                "type": "bar",
                "name": action,
                "x": [bucket for bucket, _ in points],
                "y": [events for _, (events, _) in points],
                "customdata": [gpus for _, (_, gpus) in points],
                "marker": {"color": ACTION_COLOURS.get(action, "#7c8a9a")},
                "hovertemplate": "%{y} evictions, %{customdata} GPUs freed<extra>"
                + action
                + "</extra>",
            }
        )
    return {
        "data": data,
        "layout": _layout(title, barmode="stack", yaxis={"title": {"text": "evictions"}}),
    }
