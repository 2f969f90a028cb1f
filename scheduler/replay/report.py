"""Markdown table and a self-contained Plotly page from replay-openb JSON outputs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

PLOTLY_SRC = "../../static/vendor/plotly.min.js"


def table(results: list[dict]) -> str:
    lines = [
        "| list | policy | ours @130% (mean) | published @130% | seeds |",
        "|---|---|---|---|---|",
    ]
    for res in results:
        pub = res.get("published_alloc_at_end", {})
        names = {p: n for n, p in _published_names().items()}
        for policy, entry in res["policies"].items():
            published = pub.get(names.get(policy, ""), "")
            lines.append(
                f"| {res['workload']} | {policy} | {entry['alloc_at_end']:.2f}% | "
                f"{published}{'%' if published != '' else ''} | {len(entry['seeds'])} |"
            )
    return "\n".join(lines)


def _published_names() -> dict[str, str]:
    from scheduler.replay.openb import PUBLISHED_NAMES

    return {v: k for k, v in PUBLISHED_NAMES.items()}


def html(result: dict) -> str:
    x = result["arrived_percent"]
    traces = [
        {"x": x, "y": e["mean_alloc_by_arrived"], "name": f"ours: {p}", "mode": "lines"}
        for p, e in result["policies"].items()
    ]
    traces += [
        {
            "x": x,
            "y": curve[: len(x)],
            "name": f"published: {n}",
            "mode": "lines",
            "line": {"dash": "dot"},
        }
        for n, curve in result.get("published_curves", {}).items()
    ]
    layout = {
        "title": f"GPU allocation ratio vs arrived GPU request ({result['workload']})",
        "xaxis": {"title": "arrived GPU request (% of capacity)"},
        "yaxis": {"title": "GPU allocation ratio (%)"},
    }
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>openb replay</title><script src='{PLOTLY_SRC}'></script></head><body>"
        "<div id='chart' style='height:640px'></div>"
        "<p>Data: Alibaba cluster-trace-gpu-v2023 (Weng et al., USENIX ATC '23, FGD); published "
        "curves: hkust-adsl/kubernetes-scheduler-simulator expected_results (Apache-2.0).</p>"
        f"<script>Plotly.newPlot('chart', {json.dumps(traces)}, {json.dumps(layout)});</script>"
        "</body></html>\n"
    )


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0])
    results = [json.loads(Path(p).read_text()) for p in argv[1:] if Path(p).stat().st_size]
    (out_dir / "openb_table.md").write_text(table(results) + "\n")
    for res in results:
        (out_dir / f"openb_{res['workload']}.html").write_text(html(res))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
