"""Tables and charts from replay results: ``python -m bench.replay.report OUT_DIR JSON...``.

Each JSON is an output of ``python -m scheduler replay-openb`` (has ``workload``) or of
``python -m scheduler replay-queues`` (has ``trace``). Written into OUT_DIR:
- openb_table.md: per pod list, GPU allocation ratio at the last arrived percentage (mean and
  standard deviation over seeds) next to the FGD authors' published mean, then the issue's
  targets, each marked met or NOT met with its margin;
- openb_<list>.html: Plotly chart of allocation ratio vs arrived load, ours solid and the
  published curves dotted. plotly.js is copied from the plotly package beside the pages (no
  CDN: the page works offline; not committed: ``python -m bench.replay.report OUT_DIR``
  with no JSON copies only it);
- openb_<list>.svg: the same curves zoomed on the saturated part (80% arrived and up),
  drawn here as plain SVG so no browser or image exporter is needed;
- queues_table.md: one row per mode of every replay-queues JSON, then a per-queue table of
  the shared runs (time below min(guarantee, demand)).
Data: Alibaba cluster-trace-gpu-v2023 (Weng et al., USENIX ATC '23, FGD); published curves:
hkust-adsl/kubernetes-scheduler-simulator expected_results (Apache-2.0); Philly (Jeon et al.,
ATC '19, CC BY 4.0) with Helios' VC sizes (Hu et al., SC '21).
"""

from __future__ import annotations

import json
import math
import shutil
import sys
from html import escape
from pathlib import Path

from bench.replay.openb import PUBLISHED_NAMES

PLOTLY_NAME = "plotly.min.js"


def plotly_file() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / PLOTLY_NAME


OWN_POLICIES = (
    "fgd-fill",
    "fgd-pack",
    "fgd-bf",
)  # designed here; "fgd" is our re-implementation of FGD
# the target names Volcano binpack with the seed conf's weights
BINPACK_POLICIES = ("binpack",)
PUBLISHED_FGD = "06-FGD"
PUBLISHED_BESTFIT = "05-BestFit"
COLOURS = {
    "random": "#7f7f7f",
    "firstfit": "#bcbd22",
    "dotprod": "#9467bd",
    "gpuclustering": "#8c564b",
    "gpupacking": "#e377c2",
    "bestfit": "#1f77b4",
    "fgd": "#2ca02c",
    "binpack": "#ff7f0e",
    "binpack-gpu": "#d4a017",
    "fgd-bf": "#17becf",
    "fgd-pack": "#d62728",
    "fgd-fill": "#8b0000",
}
CITATION = (
    "Data: Alibaba cluster-trace-gpu-v2023 (Weng et al., USENIX ATC '23, FGD); published curves: "
    "hkust-adsl/kubernetes-scheduler-simulator expected_results (Apache-2.0)."
)


# openb ------------------------------------------------------------------------------------------
def _pct(value) -> str:
    return "-" if value is None or value == "" else f"{value:.2f}%"


def _end(result: dict) -> int:
    return result["arrived_percent"][-1]


def policy_rows(result: dict) -> list[str]:
    by_policy = {p: n for n, p in _names().items()}
    published = result.get("published_alloc_at_end", {})
    lines = [
        f"| policy | ours @{_end(result)}% (mean ± std) | published mean | ours − published "
        "| frag @end (% of GPUs) | failed pods | CPU s/run |",
        "|---|---|---|---|---|---|---|",
    ]
    entries = sorted(result["policies"].items(), key=lambda kv: kv[1]["alloc_at_end"])
    for policy, e in entries:
        pub = published.get(by_policy.get(policy, ""))
        diff = "-" if pub is None else f"{e['alloc_at_end'] - pub:+.2f}"
        std = e.get("alloc_at_end_std")
        ours = f"{e['alloc_at_end']:.2f}%" + ("" if std is None else f" ± {std:.2f}")
        lines.append(
            f"| {policy} | {ours} | {_pct(pub)} | {diff} | {e['frag_at_end']:.2f} | "
            f"{e['failed_pods_mean']:.0f} | {e.get('cpu_seconds_per_run', math.nan):.1f} |"
        )
    return lines


def targets(result: dict) -> list[dict]:
    """The issue's targets for one list: our best own policy >= FGD's published mean, and
    Volcano binpack (the seed conf's weights) >= BestFit's published mean."""
    pols, pub = result["policies"], result.get("published_alloc_at_end", {})
    out = []
    own = [(pols[p]["alloc_at_end"], p) for p in OWN_POLICIES if p in pols]
    if own and PUBLISHED_FGD in pub:
        value, policy = max(own)
        out.append(_target(result, policy, value, PUBLISHED_FGD, pub[PUBLISHED_FGD]))
    for policy in BINPACK_POLICIES:
        if policy in pols and PUBLISHED_BESTFIT in pub:
            value = pols[policy]["alloc_at_end"]
            out.append(_target(result, policy, value, PUBLISHED_BESTFIT, pub[PUBLISHED_BESTFIT]))
    return out


def _target(result, policy, value, reference, ref_value) -> dict:
    return {
        "workload": result["workload"],
        "policy": policy,
        "ours": value,
        "std": result["policies"][policy].get("alloc_at_end_std"),
        "seeds": len(result["policies"][policy]["seeds"]),
        "reference": reference,
        "reference_value": ref_value,
        "met": value >= ref_value,
    }


def table(results: list[dict]) -> str:
    lines = [
        "<!-- generated by python -m bench.replay.report; do not edit by hand -->",
        "# openb replay: GPU allocation ratio at the end of arrival",
        "",
        CITATION,
        "",
        "## Targets",
        "| list | ours | mean ± std (seeds) | target | margin | met |",
        "|---|---|---|---|---|---|",
    ]
    for res in results:
        for t in targets(res):
            std = "" if t["std"] is None else f" ± {t['std']:.2f}"
            margin = t["ours"] - t["reference_value"]
            # Three decimals: a target can be missed by less than 0.005 points.
            lines.append(
                f"| {t['workload']} | {t['policy']} | {t['ours']:.3f}%{std} ({t['seeds']}) | "
                f">= published {t['reference']} {t['reference_value']:.3f}% | {margin:+.3f} | "
                f"{'met' if t['met'] else 'NOT met'} |"
            )
    for res in results:
        seeds = res.get("seeds", [])
        lines += [
            "",
            f"## {res['workload']}",
            f"Seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}), tie-break {res.get('tie_break')}, "
            f"inflate {res.get('inflate')}; wall {res.get('wall_seconds')} s with "
            f"--jobs {res.get('jobs', '?')}, CPU {res.get('cpu_seconds_total', '?')} s, "
            f"load average {res.get('loadavg_start', '?')} -> {res.get('loadavg_end', '?')}.",
            "",
            *policy_rows(res),
        ]
    return "\n".join(lines) + "\n"


def short_name(workload: str) -> str:
    """openb_pod_list_default -> default."""
    return workload.removeprefix("openb_pod_list_")


def _names() -> dict[str, str]:
    return {v: k for k, v in PUBLISHED_NAMES.items()}


def curves(result: dict) -> list[dict]:
    """Every curve of one result: name, policy, ours (bool), x, y."""
    x = result["arrived_percent"]
    out = [
        {"name": f"ours: {p}", "policy": p, "ours": True, "x": x, "y": e["mean_alloc_by_arrived"]}
        for p, e in result["policies"].items()
    ]
    names = _names()
    for name, curve in result.get("published_curves", {}).items():
        out.append(
            {
                "name": f"published: {name}",
                "policy": names.get(name, name),
                "ours": False,
                "x": x,
                "y": curve[: len(x)],
            }
        )
    return out


def plotly_src(out_dir: Path) -> str:
    """The pages load plotly.js from their own folder (see ``copy_plotly``)."""
    return PLOTLY_NAME


def copy_plotly(out_dir: Path) -> None:
    shutil.copyfile(plotly_file(), out_dir / PLOTLY_NAME)


def html(result: dict, src: str) -> str:
    traces = [
        {
            "x": c["x"],
            "y": c["y"],
            "name": c["name"],
            "mode": "lines",
            "line": {"color": COLOURS.get(c["policy"], "#000000")}
            | ({} if c["ours"] else {"dash": "dot"}),
        }
        for c in curves(result)
    ]
    layout = {
        "title": {"text": f"GPU allocation ratio vs arrived GPU request ({result['workload']})"},
        "xaxis": {"title": {"text": "arrived GPU request (% of capacity)"}},
        "yaxis": {"title": {"text": "GPU allocation ratio (%)"}},
    }
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>openb replay: {escape(result['workload'])}</title>"
        f"<script src='{escape(src)}'></script></head><body>"
        "<div id='chart' style='height:640px'></div>"
        f"<p>{escape(CITATION)} Solid: ours (mean over {len(result.get('seeds', []))} seeds); "
        "dotted: published means.</p>"
        f"<script>Plotly.newPlot('chart', {json.dumps(traces)}, {json.dumps(layout)});</script>"
        "</body></html>\n"
    )


def svg(result: dict, x_from: int = 80, width: int = 1000, height: int = 600) -> str:
    """Static line chart of the curves from ``x_from``% arrived on (the part where policies
    differ; below it every policy places everything)."""
    left, right, top, bottom = 60, 270, 40, 50
    series = []
    for c in curves(result):
        pts = [
            (x, y)
            for x, y in zip(c["x"], c["y"])
            if x >= x_from and y is not None and not math.isnan(y)
        ]
        if pts:
            series.append((c, pts))
    ys = [y for _, pts in series for _, y in pts] or [0.0, 100.0]
    y_lo, y_hi = math.floor(min(ys) / 5) * 5, math.ceil(max(ys) / 5) * 5
    if y_hi == y_lo:
        y_hi = y_lo + 5
    x_hi = max(_end(result), x_from + 1)

    def px(x):
        return left + (x - x_from) / (x_hi - x_from) * (width - left - right)

    def py(y):
        return top + (y_hi - y) / (y_hi - y_lo) * (height - top - bottom)

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        "font-family='sans-serif' font-size='12'>",
        "<rect width='100%' height='100%' fill='white'/>",
        f"<text x='{left}' y='22' font-size='15'>GPU allocation ratio vs arrived GPU request "
        f"({escape(result['workload'])}, from {x_from}% arrived)</text>",
    ]
    for y in range(int(y_lo), int(y_hi) + 1, 5 if y_hi - y_lo > 10 else 1):
        out.append(
            f"<line x1='{left}' x2='{width - right}' y1='{py(y):.1f}' y2='{py(y):.1f}' "
            f"stroke='#ddd'/><text x='{left - 8}' y='{py(y) + 4:.1f}' text-anchor='end'>{y}</text>"
        )
    for x in range(x_from, x_hi + 1, 10):
        out.append(
            f"<line x1='{px(x):.1f}' x2='{px(x):.1f}' y1='{top}' y2='{height - bottom}' "
            f"stroke='#eee'/><text x='{px(x):.1f}' y='{height - bottom + 16}' "
            f"text-anchor='middle'>{x}</text>"
        )
    out.append(
        f"<text x='{(left + width - right) / 2:.0f}' y='{height - 12}' text-anchor='middle'>"
        "arrived GPU request (% of capacity)</text>"
        f"<text x='16' y='{(top + height - bottom) / 2:.0f}' text-anchor='middle' "
        f"transform='rotate(-90 16 {(top + height - bottom) / 2:.0f})'>"
        "GPU allocation ratio (%)</text>"
    )
    for k, (c, pts) in enumerate(series):
        colour = COLOURS.get(c["policy"], "#000000")
        dash = "" if c["ours"] else " stroke-dasharray='4 3'"
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(
            f"<polyline fill='none' stroke='{colour}' stroke-width='1.6'{dash} points='{path}'/>"
        )
        ly = top + 14 * k
        out.append(
            f"<line x1='{width - right + 10}' x2='{width - right + 34}' y1='{ly}' y2='{ly}' "
            f"stroke='{colour}' stroke-width='2'{dash}/><text x='{width - right + 40}' "
            f"y='{ly + 4}'>{escape(c['name'])} ({pts[-1][1]:.2f})</text>"
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


# queues -----------------------------------------------------------------------------------------
def queues_table(results: list[dict]) -> str:
    lines = [
        "<!-- generated by python -m bench.replay.report; do not edit by hand -->",
        "# Job-trace replay with queues",
        "",
        "| trace | selection | jobs | mode | avg JCT s | avg queueing s | p99 queueing s | "
        "GPU util | peak GPUs in use | preemptions | Jain (satisfaction) | mode s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        selection = _selection(res)
        for mode, m in res["modes"].items():
            label = mode
            if mode == "shared":
                label = f"shared (guarantee {m.get('guarantee_fraction')} x VC)"
            lines.append(
                f"| {res['trace']} | {selection} | {res['jobs']} | {label} | {_num(m['avg_jct_s'])} | "
                f"{_num(m['avg_queueing_s'])} | {_num(m['p99_queueing_s'])} | "
                f"{_num(100 * m['gpu_utilisation'], '{:.1f}%')} | {_peak(m, res)} | "
                f"{m['preemptions']} | {_num(m.get('jain_satisfaction'), '{:.4f}')} | "
                f"{_num(m.get('mode_seconds'), '{:.0f}')} |"
            )
    for res in results:
        shared = res["modes"].get("shared")
        if not shared or "per_queue" not in shared:
            continue
        lines += [
            "",
            f"## {res['trace']} {_selection(res)}: per queue, shared cluster",
            "| queue | GPUs (VC) | guarantee | jobs | avg queueing s (shared) | "
            "avg queueing s (isolated FIFO) | time below min(guarantee, demand) | "
            "max shortfall (GPUs) | time a job waits that fits the guarantee |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        fifo = res["modes"].get("fifo", {}).get("per_queue", {})
        for q, m in shared["per_queue"].items():
            iso = fifo.get(q, {}).get("avg_queueing_s")
            below = m.get("below_guarantee_time_share")
            starved = m.get("starved_within_guarantee_time_share")
            lines.append(
                f"| {q} | {res['queues_gpus'].get(q)} | {_num(m.get('guarantee_gpus'), '{:.0f}')} "
                f"| {m['jobs']} | {_num(m['avg_queueing_s'])} | {_num(iso)} | "
                f"{_num(None if below is None else 100 * below, '{:.1f}%')} | "
                f"{_num(m.get('max_shortfall_gpus'), '{:.0f}')} | "
                f"{_num(None if starved is None else 100 * starved, '{:.1f}%')} |"
            )
    return "\n".join(lines) + "\n"


def _selection(res: dict) -> str:
    gpus = sum(res.get("queues_gpus", {}).values())
    if res["trace"] == "philly":
        text = f"{res.get('window')}"
        if res.get("limit"):
            text += f", first {res['limit']}"
        scale = res.get("vc_scale") or 1.0
        return text + ("" if scale == 1.0 else f", VCs x{scale:g}") + f", {gpus} GPUs"
    return f"{res.get('cluster')}, {gpus} GPUs"


def _peak(mode: dict, res: dict) -> str:
    peak = mode.get("peak_gpus_in_use")
    return "-" if peak is None else f"{peak} / {sum(res['queues_gpus'].values())}"


def _num(value, fmt: str = "{:,.0f}") -> str:
    return "-" if value is None else fmt.format(value)


# entry point ------------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    if len(argv) < 1:
        print(
            "usage: python -m bench.replay.report OUT_DIR [RESULT.json ...]",
            file=sys.stderr,
        )
        return 2
    out_dir = Path(argv[0])
    if not out_dir.is_dir():
        print(f"{out_dir}: not a directory", file=sys.stderr)
        return 2
    openb_results, queue_results = [], []
    for name in argv[1:]:
        path = Path(name)
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: not a readable JSON file ({exc})", file=sys.stderr)
            return 2
        if "workload" in data and "policies" in data:
            openb_results.append(data)
        elif "trace" in data and "modes" in data:
            queue_results.append(data)
        else:
            print(f"{path}: neither a replay-openb nor a replay-queues result", file=sys.stderr)
            return 2
    # Everything is rendered before anything is written, so a bad input leaves no partial output.
    files: dict[Path, str] = {}
    if openb_results:
        files[out_dir / "openb_table.md"] = table(openb_results)
        src = plotly_src(out_dir)
        for res in openb_results:
            stem = f"openb_{short_name(res['workload'])}"
            files[out_dir / f"{stem}.html"] = html(res, src)
            files[out_dir / f"{stem}.svg"] = svg(res)
    if queue_results:
        files[out_dir / "queues_table.md"] = queues_table(queue_results)
    for path, text in files.items():
        path.write_text(text)
    if openb_results or len(argv) == 1:
        copy_plotly(out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
