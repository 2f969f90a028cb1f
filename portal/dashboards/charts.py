"""Pure chart builders: plain rows in, Plotly figure dicts out (no DB, no Django, no I/O).

Figures are plain dicts in Plotly's JSON shape ({"data": [...], "layout": {...}}), so the
views return them with JsonResponse and the page hands them to Plotly.react unchanged.

Colours: a queue is drawn in its own colour (`palette.queue_colour`, passed in as a
name -> colour map) and nothing else uses those colours. Guarantee, deserved share and
capability are told apart by marker and outline; the kinds of eviction by bar pattern.
A chart with nothing to draw says so in words instead of showing empty axes. Times are UTC,
sent without an offset (Plotly draws date strings as given) and the axes say "UTC".
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from jobspec.gpushare import MILLI_PER_GPU, gpus_text
from portal.common import units
from portal.common.palette import FREE as FREE_COLOUR
from portal.common.palette import INK, INK_MUTED, OTHER_TENANTS

FREE = "free"
FREE_BLOCK_SIZES = (8, 4, 2, 1)
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}
MUTED_TEXT = "#5f6b7a"
# Series drawn with markers as well as lines when they have fewer points than this: a line
# through one point draws nothing.
FEW_POINTS = 3
# Date formats per time bucket, so ticks never read "13:59:59.9995".
TICK_FORMATS = {"minute": "%H:%M", "hour": "%H:%M\n%b %-d", "day": "%b %-d"}
BUCKET_MS = {"minute": 60_000, "hour": 3_600_000, "day": 86_400_000}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "margin": {"l": 50, "r": 20, "t": 40, "b": 40},
        "font": FONT,
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": -0.2},
        "hovermode": "closest",
    }
    layout.update(extra)
    return layout


def empty_figure(title: str, message: str) -> dict[str, Any]:
    """No data: the title and one sentence in the middle, no axes to misread."""
    hidden = {"visible": False}
    return {
        "data": [],
        "layout": _layout(
            title,
            xaxis=hidden,
            yaxis=hidden,
            annotations=[
                {
                    "text": message,
                    "xref": "paper",
                    "yref": "paper",
                    "x": 0.5,
                    "y": 0.5,
                    "showarrow": False,
                    "font": {"size": 14, "color": MUTED_TEXT},
                }
            ],
        ),
    }


def _iso(value: datetime | str) -> str:
    """UTC without an offset (Plotly ignores offsets; the axes are labelled UTC)."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.isoformat()
    return str(value)


def time_axis(
    since: datetime | None, until: datetime | None, bucket: str = "hour"
) -> dict[str, Any]:
    """A date axis over the whole requested range, whatever the data covers."""
    axis: dict[str, Any] = {
        "type": "date",
        "title": {"text": "time (UTC)"},
        "tickformat": TICK_FORMATS.get(bucket, "%H:%M"),
        "hoverformat": "%Y-%m-%d %H:%M UTC",
        "nticks": 8,
    }
    if since is not None and until is not None:
        axis["range"] = [_iso(since), _iso(until)]
    return axis


# per-queue GPU use over time ---------------------------------------------------------------
USAGE_EMPTY = "No GPUs were allocated in this range."


def usage_area(
    rows: Iterable[Mapping[str, Any]],
    *,
    colours: Mapping[str, str],
    title: str = "GPUs allocated per queue",
    since: datetime | None = None,
    until: datetime | None = None,
    bucket: str = "hour",
) -> dict[str, Any]:
    """Stacked area: rows of {"bucket": datetime, "queue": str, "gpus": float}.

    Every queue gets a value at every bucket (0 when it had no sample) so the stack is exact.
    """
    buckets: list[Any] = []
    seen_buckets: set[Any] = set()
    series: dict[str, dict[Any, float]] = defaultdict(dict)
    for row in rows:
        bucket_at = row["bucket"]
        if bucket_at not in seen_buckets:
            seen_buckets.add(bucket_at)
            buckets.append(bucket_at)
        series[row["queue"]][bucket_at] = float(row["gpus"] or 0)
    if not any(any(values.values()) for values in series.values()):
        return empty_figure(title, USAGE_EMPTY)
    buckets.sort()
    x = [_iso(bucket_at) for bucket_at in buckets]
    mode = "lines+markers" if len(buckets) < FEW_POINTS else "lines"
    data = [
        {
            "type": "scatter",
            "mode": mode,
            "name": queue,
            "x": x,
            "y": [round(values.get(bucket_at, 0.0), 2) for bucket_at in buckets],
            "stackgroup": "gpus",
            "line": {"width": 1, "color": colours.get(queue, OTHER_TENANTS)},
            "marker": {"size": 6, "color": colours.get(queue, OTHER_TENANTS)},
            "hovertemplate": "%{y:.1f} GPUs<extra>" + queue + "</extra>",
        }
        for queue, values in sorted(series.items())
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            xaxis=time_axis(since, until, bucket),
            yaxis={"title": {"text": "GPUs"}, "rangemode": "tozero"},
            hovermode="x unified",
        ),
    }


# allocated vs deserved vs guarantee vs capability -------------------------------------------
UNLIMITED_NOTE = "no cap"


def deserved_hover(deserved: float, cluster_gpus: int, *, shares: bool = False) -> str:
    """A deserved share in words: GPUs, share of the cluster and what a fraction means.

    The proportion plugin lets a queue allocate while allocated + request <= deserved
    (scheduler/core/plugins/proportion.py, after Volcano's proportion.go), so a queue that
    deserves 3.5 GPUs gets up to 3 whole GPUs by its own share; with a GPU sharing stack
    (`shares`), pods asking for part of a GPU may use the rest.
    """
    text = f"deserves {units.gpus(deserved)}"
    if cluster_gpus:
        text += f" ({100 * deserved / cluster_gpus:.0f}% of {cluster_gpus})"
    whole = math.floor(deserved + 1e-9)
    if deserved - whole > 0.01:
        if shares:
            text += (
                f": a weighted share; pods of whole GPUs get up to {whole} by its own share, "
                "pods with a share of a GPU the rest"
            )
        else:
            text += f": a weighted share; pods take whole GPUs, so up to {whole} by its own share"
    return text


def quota_bars(
    rows: Sequence[Mapping[str, Any]],
    *,
    colours: Mapping[str, str],
    cluster_gpus: int = 0,
    shares: bool = False,
    title: str = "Quota per queue (GPUs)",
) -> dict[str, Any]:
    """Per queue: allocated GPUs as a bar in the queue's colour, capability as an outline
    around it (none: unlimited, said above the column), the deserved share as a diamond and
    the guarantee as a bar-wide tick. Rows: name, allocated, deserved, guarantee, capability
    (None: unlimited)."""
    if not rows:
        return empty_figure(title, "No queues to show.")
    names = [row["name"] for row in rows]
    capped = [row for row in rows if row.get("capability") is not None]
    guaranteed = [row for row in rows if row.get("guarantee")]
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "Capability (outline)",
            "x": [row["name"] for row in capped],
            "y": [row["capability"] for row in capped],
            "width": 0.7,
            "marker": {"color": "rgba(0,0,0,0)", "line": {"color": INK_MUTED, "width": 1.5}},
            "hovertemplate": "%{x}: capped at %{y} GPUs<extra></extra>",
        },
        {
            "type": "bar",
            "name": "Allocated (queue colour)",
            "x": names,
            "y": [row.get("allocated") or 0 for row in rows],
            "width": 0.45,
            "marker": {"color": [colours.get(name, OTHER_TENANTS) for name in names]},
            "hovertemplate": "%{x}: %{y} GPUs allocated<extra></extra>",
            "showlegend": False,
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Guarantee (tick)",
            "x": [row["name"] for row in guaranteed],
            "y": [row["guarantee"] for row in guaranteed],
            "marker": {
                "symbol": "line-ew-open",
                "size": 30,
                "color": INK_MUTED,  # an open symbol is stroked in the marker colour
                "line": {"color": INK_MUTED, "width": 3},
            },
            "hovertemplate": "%{x}: %{y} GPUs guaranteed<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Deserved share (diamond)",
            "x": names,
            "y": [round(float(row.get("deserved") or 0), 2) for row in rows],
            "text": [
                deserved_hover(float(row.get("deserved") or 0), cluster_gpus, shares=shares)
                for row in rows
            ],
            "marker": {"symbol": "diamond", "size": 11, "color": INK},
            "hovertemplate": "%{x}: %{text}<extra></extra>",
        },
    ]

    def column_top(row: Mapping[str, Any]) -> float:
        keys = ("allocated", "deserved", "guarantee", "capability")
        return max(float(row.get(key) or 0) for key in keys)

    top = max([column_top(row) for row in rows] + [1.0])
    annotations = [
        {
            "x": row["name"],
            "y": column_top(row) + top * 0.04,
            "text": UNLIMITED_NOTE,
            "showarrow": False,
            "yanchor": "bottom",
            "font": {"size": 11, "color": MUTED_TEXT},
            "hovertext": "unlimited capability: the queue may grow to the whole cluster",
        }
        for row in rows
        if row.get("capability") is None
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            barmode="overlay",
            yaxis={"title": {"text": "GPUs"}, "range": [0, top * 1.15]},
            annotations=annotations,
        ),
    }


def tenant_bars(
    rows: Sequence[Mapping[str, Any]],
    *,
    colours: Mapping[str, str],
    title: str = "Use per tenant vs its quota (GPUs)",
) -> dict[str, Any]:
    """Per tenant: its queues' allocated GPUs stacked, each in the queue's colour; its
    capability as an outline, its guarantee as a bar-wide tick, its deserved share as a
    diamond (the quota chart's marks, a level up). Rows: id, name, guarantee, capability
    (None: unlimited), deserved (None: not computed yet), queues: [(queue name, allocated)].
    Every mark carries the tenant id, for the page's drill-down to its queues."""
    if not rows:
        return empty_figure(title, "No tenants to show.")
    names = [row["name"] for row in rows]
    queue_names = sorted({queue for row in rows for queue, _ in row["queues"]})
    data: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "Capability (outline)",
            "x": [row["name"] for row in rows if row.get("capability") is not None],
            "y": [row["capability"] for row in rows if row.get("capability") is not None],
            "customdata": [row["id"] for row in rows if row.get("capability") is not None],
            "width": 0.7,
            "marker": {"color": "rgba(0,0,0,0)", "line": {"color": INK_MUTED, "width": 1.5}},
            "hovertemplate": "%{x}: capped at %{y} GPUs<extra></extra>",
        }
    ]
    # Stacked by hand (each bar's base is the queues below it), so that the capability
    # outline can overlay the whole stack.
    base = dict.fromkeys(names, 0)
    for queue in queue_names:
        used = {row["name"]: dict(row["queues"]).get(queue, 0) for row in rows}
        data.append(
            {
                "type": "bar",
                "name": queue,
                "x": names,
                "y": [used[name] for name in names],
                "base": [base[name] for name in names],
                "customdata": [row["id"] for row in rows],
                "width": 0.45,
                "marker": {"color": colours.get(queue, OTHER_TENANTS)},
                "hovertemplate": f"{queue}: %{{y}} GPUs allocated<extra>%{{x}}</extra>",
                "showlegend": False,
            }
        )
        for name in names:
            base[name] += used[name]
    data += [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Guarantee (tick)",
            "x": [row["name"] for row in rows if row.get("guarantee")],
            "y": [row["guarantee"] for row in rows if row.get("guarantee")],
            "customdata": [row["id"] for row in rows if row.get("guarantee")],
            "marker": {
                "symbol": "line-ew-open",
                "size": 30,
                "color": INK_MUTED,
                "line": {"color": INK_MUTED, "width": 3},
            },
            "hovertemplate": "%{x}: %{y} GPUs guaranteed<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Deserved share (diamond)",
            "x": [row["name"] for row in rows if row.get("deserved") is not None],
            "y": [
                round(float(row["deserved"]), 2) for row in rows if row.get("deserved") is not None
            ],
            "customdata": [row["id"] for row in rows if row.get("deserved") is not None],
            "marker": {"symbol": "diamond", "size": 11, "color": INK},
            "hovertemplate": "%{x}: deserves %{y} GPUs<extra></extra>",
        },
    ]
    top = max(
        [
            max(
                sum(used for _, used in row["queues"]),
                float(row.get("guarantee") or 0),
                float(row.get("capability") or 0),
                float(row.get("deserved") or 0),
            )
            for row in rows
        ]
        + [1.0]
    )
    return {
        "data": data,
        "layout": _layout(
            title,
            barmode="overlay",
            yaxis={"title": {"text": "GPUs"}, "range": [0, top * 1.15]},
        ),
    }


# node x GPU occupancy -----------------------------------------------------------------------
def occupancy(
    nodes: Sequence[tuple[str, int]],
    placements: Iterable[tuple[str, str, int | None, int, Sequence[int]]],
) -> dict[str, Any]:
    """Per node, who holds each GPU index and how much of it (milli-GPU).

    `nodes`: (name, gpu_count); `placements`: (node name, queue name, job id, milli-GPU,
    device indices). A placement with its device indices holds those devices (a share of one
    device holds its fraction of it); one without (stored before devices were tracked) fills
    devices in placement order, a share going to the first device with room.
    Returns {"cells": {node: [queue or FREE, ...]}, "jobs": {node: [job id or None, ...]},
    "milli": {node: [milli-GPU in use, ...]}, "holders": {node: [pods on it, ...]}}: a device
    is shared when it holds less than a card or more than one pod.
    """
    cells = {name: [FREE] * count for name, count in nodes}
    jobs: dict[str, list[int | None]] = {name: [None] * count for name, count in nodes}
    milli: dict[str, list[int]] = {name: [0] * count for name, count in nodes}
    holders: dict[str, list[int]] = {name: [0] * count for name, count in nodes}

    def take(node: str, index: int, queue: str, job_id: int | None, amount: int) -> None:
        if cells[node][index] == FREE:
            cells[node][index] = queue
            jobs[node][index] = job_id
        milli[node][index] += amount
        holders[node][index] += 1

    for node, queue, job_id, held, devices in placements:
        if node not in cells:
            continue
        count = len(cells[node])
        known = [index for index in devices if 0 <= index < count]
        if held < MILLI_PER_GPU:  # a share of one device
            if known:
                index = known[0]
            else:
                room = [i for i in range(count) if milli[node][i] > 0 and
                        milli[node][i] + held <= MILLI_PER_GPU]  # fmt: skip
                empty = [i for i in range(count) if milli[node][i] == 0]
                if not room and not empty:
                    continue
                index = (room or empty)[0]
            take(node, index, queue, job_id, held)
            continue
        whole = held // MILLI_PER_GPU
        if not known:
            known = [i for i in range(count) if milli[node][i] == 0][:whole]
        for index in known[:whole]:
            take(node, index, queue, job_id, MILLI_PER_GPU)
    return {"cells": cells, "jobs": jobs, "milli": milli, "holders": holders}


def shared_devices(result: Mapping[str, Any]) -> int:
    """How many devices of an `occupancy` result are shared (part of a card, or two pods)."""
    return sum(
        1
        for node, used in result.get("milli", {}).items()
        for index, amount in enumerate(used)
        if amount and (amount < MILLI_PER_GPU or result["holders"][node][index] > 1)
    )


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


def free_block_labels(
    largest_node_gpus: int, counts: Mapping[int, int] | None = None
) -> dict[int, str]:
    """What each free-block count means, in words that fit the cluster's node sizes: on
    8-GPU nodes "8 or more free" is a whole free node. With the `counts` the labels go
    under, one node is "node" ("1 / node with 2 to 3 free", not "nodes")."""
    labels = {}
    for index, size in enumerate(FREE_BLOCK_SIZES):
        noun = "node" if counts is not None and counts.get(size) == 1 else "nodes"
        upper = FREE_BLOCK_SIZES[index - 1] - 1 if index else None
        if upper is None:
            if largest_node_gpus == size:
                labels[size] = f"{noun} entirely free ({size} GPUs)"
            else:
                labels[size] = f"{noun} with {size} or more free"
        elif upper == size:
            labels[size] = f"{noun} with {size} free"
        else:
            labels[size] = f"{noun} with {size} to {upper} free"
    return labels


NO_NODES = "No nodes to show."


def occupancy_heatmap(
    cells: Mapping[str, Sequence[str]],
    jobs: Mapping[str, Sequence[int | None]] | None = None,
    *,
    colours: Mapping[str, str],
    milli: Mapping[str, Sequence[int]] | None = None,
    holders: Mapping[str, Sequence[int]] | None = None,
    title: str = "GPU occupancy (rows: nodes, columns: their GPUs)",
) -> dict[str, Any]:
    """Heatmap: one row per node, one column per GPU index, colour by queue (grey: free).
    The figure's height follows the node count (the page sizes the chart to it)."""
    if not cells:
        return empty_figure(title, NO_NODES)
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
            label = owner if job is None else f"{owner} (job {job})"
            used = (milli or {}).get(node, [])
            pods = (holders or {}).get(node, [])
            amount = used[index] if index < len(used) else 0
            sharing = pods[index] if index < len(pods) else 0
            if amount and (amount < MILLI_PER_GPU or sharing > 1):
                others = f" and {sharing - 1} more" if sharing > 1 else ""
                label += f"{others}: shared, {gpus_text(amount)} of the GPU in use"
            row_text.append(label)
        z.append(row_z)
        text.append(row_text)
    steps = len(codes)
    palette = [FREE_COLOUR] + [colours.get(queue, OTHER_TENANTS) for queue in queues]
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
            "x": [str(index) for index in range(width)],
            "y": nodes,
            "text": text,
            "zmin": -0.5,
            "zmax": steps - 0.5,
            "colorscale": colorscale,
            "xgap": 2,
            "ygap": 2,
            "hovertemplate": "%{y} GPU %{x}: %{text}<extra></extra>",
            "colorbar": {
                "tickvals": list(range(steps)),
                "ticktext": [FREE, *queues],
                "title": {"text": "queue"},
                "len": 1,
                "thickness": 14,
            },
        }
    ]
    height = 30 * len(nodes) + 120
    return {
        "data": data,
        "layout": _layout(
            title,
            height=height,
            margin={"l": 50, "r": 20, "t": 40, "b": 30},
            xaxis={"title": {"text": "GPU index"}, "type": "category"},
            yaxis={"autorange": "reversed", "automargin": True},
        ),
    }


# pending demand and wait times --------------------------------------------------------------
NEVER_RUNNABLE_LABEL = "can never run as submitted"


def pending_demand_bars(
    demand: Mapping[str, float],
    *,
    colours: Mapping[str, str],
    never: Mapping[str, float] | None = None,
    title: str = "Pending GPU demand",
) -> dict[str, Any]:
    """``demand``: GPUs of the jobs that wait and can run, per queue; ``never``: GPUs of the
    jobs that can never run as submitted, listed apart (a hatched bar beside the queue's), as
    they are no demand the scheduler can meet."""
    never = {name: gpus for name, gpus in (never or {}).items() if gpus}
    names = sorted({name for name, gpus in demand.items() if gpus} | set(never))
    if not names:
        return empty_figure(title, "No job is waiting for GPUs.")
    data = [
        {
            "type": "bar",
            "name": "waiting",
            "x": names,
            "y": [demand.get(name, 0) for name in names],
            "marker": {"color": [colours.get(name, OTHER_TENANTS) for name in names]},
            "hovertemplate": "%{x}: %{y} GPUs pending<extra></extra>",
        }
    ]
    if never:
        data.append(
            {
                "type": "bar",
                "name": NEVER_RUNNABLE_LABEL,
                "x": names,
                "y": [never.get(name, 0) for name in names],
                "marker": {
                    "color": [colours.get(name, OTHER_TENANTS) for name in names],
                    "opacity": 0.4,
                    "pattern": {"shape": "/"},
                },
                "hovertemplate": "%{x}: %{y} GPUs " + NEVER_RUNNABLE_LABEL + "<extra></extra>",
            }
        )
    layout = _layout(title, yaxis={"title": {"text": "GPUs"}})
    if never:
        layout["barmode"] = "group"
        layout["showlegend"] = True
    return {"data": data, "layout": layout}


WAIT_TITLE = "How long pending jobs have waited"


def _quantile(values: Sequence[float], q: float) -> float:
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def wait_stats_of(seconds: Sequence[float]) -> dict[str, float]:
    values = sorted(seconds)
    return {
        "q1": _quantile(values, 0.25),
        "median": statistics.median(values),
        "q3": _quantile(values, 0.75),
        "min": values[0],
        "max": values[-1],
        "count": len(values),
    }


def wait_bars(
    waits: Mapping[str, Sequence[float]], *, colours: Mapping[str, str], title: str = WAIT_TITLE
) -> dict[str, Any]:
    """From raw waits in seconds per queue (the statistics are computed here)."""
    stats = {name: wait_stats_of(seconds) for name, seconds in waits.items() if seconds}
    return wait_bars_from_stats(stats, colours=colours, title=title)


def _wait_unit(longest_median_seconds: float) -> tuple[str, float]:
    if longest_median_seconds >= 2 * 3600:
        return "hours", 3600.0
    return "minutes", 60.0


def wait_bars_from_stats(
    stats_by_queue: Mapping[str, Mapping[str, float]],
    *,
    colours: Mapping[str, str],
    title: str = WAIT_TITLE,
) -> dict[str, Any]:
    """Per queue: the median wait as a bar in the queue's colour, a whisker from the
    shortest to the longest wait, and the number of jobs above it. Statistics in seconds
    (q1, median, q3, min, max, count), e.g. from `portal.jobs.selectors.pending_wait_stats`.
    A box plot of one or two jobs per queue drew flat lines; bars read at any count."""
    names = [name for name in sorted(stats_by_queue) if stats_by_queue[name].get("count")]
    if not names:
        return empty_figure(title, "No job is waiting.")
    unit, divisor = _wait_unit(max(stats_by_queue[name]["median"] for name in names))

    def scaled(name: str, key: str) -> float:
        return round(stats_by_queue[name][key] / divisor, 1)

    medians = [scaled(name, "median") for name in names]
    counts = [int(stats_by_queue[name]["count"]) for name in names]
    data = [
        {
            "type": "bar",
            "x": names,
            "y": medians,
            "marker": {"color": [colours.get(name, OTHER_TENANTS) for name in names]},
            "error_y": {
                "type": "data",
                "symmetric": False,
                "array": [scaled(n, "max") - m for n, m in zip(names, medians)],
                "arrayminus": [m - scaled(n, "min") for n, m in zip(names, medians)],
                "color": INK_MUTED,
                "thickness": 1.5,
            },
            "text": [f"{count} job{'s' if count != 1 else ''}" for count in counts],
            "textposition": "outside",
            "customdata": [
                [scaled(n, "min"), scaled(n, "q1"), scaled(n, "q3"), scaled(n, "max")]
                for n in names
            ],
            "hovertemplate": (
                "%{x}: %{text}, median %{y} "
                + unit
                + "<br>shortest %{customdata[0]}, quartiles %{customdata[1]} to "
                "%{customdata[2]}, longest %{customdata[3]}<extra></extra>"
            ),
            "showlegend": False,
        }
    ]
    return {
        "data": data,
        "layout": _layout(
            title,
            yaxis={"title": {"text": f"median wait ({unit})"}, "rangemode": "tozero"},
        ),
    }


# preemptions over time ----------------------------------------------------------------------
# Kinds of eviction, by grey and pattern: never a queue's colour.
ACTION_STYLES = {
    "preempt": {"color": INK, "pattern": {"shape": ""}},
    "reclaim": {"color": INK_MUTED, "pattern": {"shape": "/", "fgcolor": "#ffffff"}},
    "rescheduling": {"color": "#aab3c0", "pattern": {"shape": ".", "fgcolor": INK}},
    "admin": {"color": "#c9d0db", "pattern": {"shape": "x", "fgcolor": INK}},
}
EVICTIONS_EMPTY = "No evictions in this range."


def preemptions_over_time(
    rows: Iterable[Mapping[str, Any]],
    *,
    title: str = "Evictions over time",
    since: datetime | None = None,
    until: datetime | None = None,
    bucket: str = "hour",
    empty_message: str = EVICTIONS_EMPTY,
) -> dict[str, Any]:
    """Stacked bars per action: rows of {"bucket", "action", "events", "gpus"}."""
    by_action: dict[str, dict[str, tuple[int, float]]] = defaultdict(dict)
    for row in rows:
        gpus = round(float(row["gpus"] or 0), 3)  # shares of a card count their fraction
        by_action[row["action"]][_iso(row["bucket"])] = (int(row["events"]), gpus)
    if not by_action:
        return empty_figure(title, empty_message)
    data = []
    for action in sorted(by_action):
        points = sorted(by_action[action].items())
        style = ACTION_STYLES.get(action, ACTION_STYLES["admin"])
        data.append(
            {
                "type": "bar",
                "name": action,
                "x": [at for at, _ in points],
                "y": [events for _, (events, _) in points],
                "customdata": [gpus for _, (_, gpus) in points],
                # Plotly draws a pattern's background transparent unless told: give it the
                # kind's grey, so the stripes and dots sit on a visible bar.
                "marker": {
                    "color": style["color"],
                    "pattern": {**style["pattern"], "bgcolor": style["color"]},
                    "line": {"color": INK, "width": 1},
                },
                # Each bar spans its time bucket: a lone bar on a date axis is otherwise drawn
                # a few pixels wide.
                "width": BUCKET_MS.get(bucket, BUCKET_MS["hour"]) * 0.9,
                "offset": BUCKET_MS.get(bucket, BUCKET_MS["hour"]) * 0.05,
                "hovertemplate": "%{y} evictions, %{customdata} GPUs freed<extra>"
                + action
                + "</extra>",
            }
        )
    peak: dict[str, int] = defaultdict(int)
    for points in by_action.values():
        for at, (events, _) in points.items():
            peak[at] += events
    yaxis: dict[str, Any] = {"title": {"text": "evictions"}, "rangemode": "tozero"}
    if max(peak.values()) <= 10:
        yaxis["dtick"] = 1  # whole evictions, not 0.5 steps
    return {
        "data": data,
        "layout": _layout(
            title,
            barmode="stack",
            xaxis=time_axis(since, until, bucket),
            yaxis=yaxis,
            showlegend=True,  # even for one kind: the legend names the pattern
        ),
    }
