"""``python -m scheduler replay-openb``: FGD-methodology replay of an Alibaba openb pod list."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from bench.replay import openb

TRACES = Path("/work/shared/traces/alibaba-openb")
DEFAULT_SEED_COUNT = 10  # as published (seeds 42..51)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "replay-openb", help="replay an openb pod list with the FGD methodology"
    )
    parser.add_argument("--pods", type=Path, default=TRACES / "openb_pod_list_default.csv")
    parser.add_argument("--nodes", type=Path, default=TRACES / "openb_node_list_gpu_node.csv")
    parser.add_argument(
        "--policy",
        default="all",
        help=f"one of {', '.join(openb.POLICIES)}, a comma-separated list, or 'all' (not "
        f"included in 'all', diagnostics: {', '.join(openb.DIAGNOSTIC_POLICIES)})",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=DEFAULT_SEED_COUNT,
        help="number of seeds, counted from 42 like the published runs (default 10)",
    )
    parser.add_argument(
        "--engine",
        choices=("numpy", "core"),
        default="numpy",
        help="'numpy': the reference policies (default); 'core': the scheduling core's own "
        "predicates and node-order plugins in one live session per seed (policies binpack, "
        "gpufrag and gpufrag-fill; tie-break 'name' only)",
    )
    parser.add_argument("--inflate", type=float, default=1.3)
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument(
        "--tie-break",
        choices=("name", "first", "random"),
        default="name",
        help="ties between top-scored nodes: 'name' (the simulator's: a random node order fixed "
        "per seed, default), 'first' (lowest CSV index), 'random' (per decision)",
    )
    parser.add_argument(
        "--binpack-weights",
        default=None,
        help="weights of the 'binpack' policy as cpu=N,memory=N,gpu=N (default: the seed conf's "
        "2,2,20); 'binpack-gpu' keeps its own",
    )
    parser.add_argument(
        "--published",
        type=Path,
        default=TRACES / "fgd-published-results" / "analysis_allo_discrete.csv",
    )
    parser.add_argument("--curves", action="store_true", help="include per-seed curves")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    policies = openb.POLICIES if args.policy == "all" else tuple(args.policy.split(","))
    unknown = [p for p in policies if p not in openb.POLICY_CLASSES]
    if unknown:
        print(
            f"unknown policy {unknown[0]!r} (known: "
            f"{', '.join(openb.POLICIES + openb.DIAGNOSTIC_POLICIES)})",
            file=sys.stderr,
        )
        return 2
    if args.engine == "core":
        from bench.replay.core_engine import CORE_POLICIES

        if args.policy == "all":
            policies = CORE_POLICIES
        outside = [p for p in policies if p not in CORE_POLICIES]
        if outside:
            print(
                f"--engine core runs {', '.join(CORE_POLICIES)}, not {outside[0]!r}",
                file=sys.stderr,
            )
            return 2
        if args.tie_break != "name":
            print("--engine core breaks ties by node name (--tie-break name)", file=sys.stderr)
            return 2
    for path in (args.pods, args.nodes):
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
    if args.seeds < 1 or args.jobs < 1 or args.inflate <= 0:
        print("--seeds and --jobs must be >= 1 and --inflate > 0", file=sys.stderr)
        return 2
    weights = None
    if args.binpack_weights is not None:
        weights, error = parse_weights(args.binpack_weights)
        if error:
            print(f"--binpack-weights: {error}", file=sys.stderr)
            return 2
    seeds = [42 + i for i in range(args.seeds)]
    load_before = os.getloadavg()
    started = time.perf_counter()
    results = openb.run_many(
        args.nodes,
        args.pods,
        policies,
        seeds,
        args.inflate,
        args.jobs,
        args.tie_break,
        weights,
        args.engine,
    )
    workload = args.pods.stem
    published = openb.load_published(args.published, workload) if args.published.exists() else {}
    out = {
        "workload": workload,
        "engine": args.engine,
        "nodes": str(args.nodes),
        "inflate": args.inflate,
        "seeds": seeds,
        "tie_break": args.tie_break,
        "binpack_weights": weights or openb.BINPACK_WEIGHTS,
        "arrived_percent": list(range(len(results[0].alloc_by_arrived))),
        "policies": openb.summarise(results, published),
        "published_alloc_at_end": {name: rows["mean"][-1] for name, rows in published.items()},
        "published_curves": {name: rows["mean"] for name, rows in published.items()},
        "wall_seconds": round(time.perf_counter() - started, 1),
        "cpu_seconds_total": round(sum(r.cpu_seconds for r in results), 1),
        "jobs": args.jobs,
        # The machine is shared: wall time means little without the load it ran under.
        "loadavg_start": [round(v, 2) for v in load_before],
        "loadavg_end": [round(v, 2) for v in os.getloadavg()],
    }
    if args.curves:
        out["runs"] = [r.__dict__ for r in results]
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


def parse_weights(text: str) -> tuple[dict | None, str | None]:
    """``cpu=2,memory=2,gpu=20`` -> weights; every one of the three keys, integers >= 0."""
    weights = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in openb.BINPACK_WEIGHTS:
            return None, f"expected cpu=N,memory=N,gpu=N, got {part!r}"
        try:
            weights[key] = int(value)
        except ValueError:
            return None, f"{key} must be an integer, got {value!r}"
        if weights[key] < 0:
            return None, f"{key} must be >= 0"
    missing = sorted(set(openb.BINPACK_WEIGHTS) - set(weights))
    if missing:
        return None, f"missing {', '.join(missing)}"
    if not any(weights.values()):
        return None, "at least one weight must be > 0"
    return weights, None
