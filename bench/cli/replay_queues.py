"""``python -m scheduler replay-queues``: isolated FIFO/SJF partitions vs one shared cluster run by
the core, on the Philly (or ITP) job trace; with ``--estimate``, how well start times estimated
ahead match the shared run's."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from datetime import date
from pathlib import Path

from bench.replay import queues
from bench.replay.estimate import StartEstimates
from scheduler.core.config import parse_conf_text
from scheduler.core.plan import PlanLimits

TRACES = Path("/work/shared/traces")
# The first three days (1,963 jobs): they start at the trace's start, so no job submitted
# earlier is missing from the cluster, and they hold VC 2869ce's burst of 8-32 GPU jobs, the
# first contention of the trace; the first 1,500 jobs end before most of it
# (docs/replay/README.md). Helios' whole window is 2017-10-01:2017-11-30.
DEFAULT_WINDOW = "2017-10-01:2017-10-03"
DEFAULT_LIMIT = 0
PLAN_DEFAULTS = PlanLimits()


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "replay-queues", help="replay Philly/ITP jobs: isolated partitions vs shared queues"
    )
    parser.add_argument("--trace", choices=("philly", "itp"), default="philly")
    parser.add_argument("--cluster", default="cluster01", help="ITP cluster (clusterNN)")
    parser.add_argument("--itp-gpus", type=int, default=512, help="ITP cluster size in GPUs")
    parser.add_argument(
        "--window",
        default=DEFAULT_WINDOW,
        help=f"Philly submission window FROM:TO (dates, inclusive; default {DEFAULT_WINDOW}); "
        "Helios used 2017-10-01:2017-11-30",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        help="first N jobs of the window (default 0 = all)",
    )
    parser.add_argument("--step", type=float, default=60.0, help="event coalescing step (s)")
    parser.add_argument(
        "--guarantee-fraction",
        type=float,
        default=0.5,
        help="queue guarantee = fraction x VC (1.0 leaves nothing to borrow)",
    )
    parser.add_argument(
        "--vc-scale",
        type=float,
        default=1.0,
        help="multiply every Philly VC's node count (at least 1 node) to stress the cluster",
    )
    parser.add_argument(
        "--tenants",
        type=int,
        default=0,
        help="group the VCs into this many tenants of about equal size: per-tenant figures, "
        "and the 'tree' mode (tenants as parent queues of a hierarchical proportion)",
    )
    parser.add_argument("--modes", default="fifo,sjf,shared")
    parser.add_argument(
        "--estimate",
        action="store_true",
        help="shared mode also estimates start times ahead (scheduler.core.plan) at each "
        "sampled submission and reports their error against the replay's starts and a "
        "baseline (modes.shared.estimate)",
    )
    parser.add_argument(
        "--estimate-every",
        type=int,
        default=1,
        help="with --estimate, estimate one submission in N (by trace order; default every one)",
    )
    parser.add_argument(
        "--plan-max-instants",
        type=int,
        default=PLAN_DEFAULTS.max_instants,
        help="with --estimate, the plan's cost bound: instants per run "
        f"(default {PLAN_DEFAULTS.max_instants}, as the portal's PLAN_AHEAD_MAX_INSTANTS)",
    )
    parser.add_argument(
        "--plan-growth",
        type=float,
        default=PLAN_DEFAULTS.growth,
        help="with --estimate, how much wider an instant's window grows with its distance "
        f"from now (default {PLAN_DEFAULTS.growth})",
    )
    parser.add_argument(
        "--work-conserving",
        action="store_true",
        help="shared and tree modes: proportion as the seed conf runs it, lending idle capacity "
        "past a queue's share (lendIdle) and leaving jobs that can never run out of demand "
        "(excludeNeverRunnable); without it, upstream's proportion",
    )
    parser.add_argument("--max-cycles", type=int, default=None)
    parser.set_defaults(handler=run)


MODES = ("fifo", "sjf", "shared", "tree")


def validate(args: argparse.Namespace) -> str | None:
    """The first bad option, named, or None; checked before any mode runs."""
    unknown = [m for m in args.modes.split(",") if m not in MODES]
    if unknown:
        return f"--modes: unknown mode {unknown[0]!r} (known: {', '.join(MODES)})"
    if not 0 < args.guarantee_fraction <= 1:
        return "--guarantee-fraction must be in (0, 1]"
    if not 0 < args.vc_scale <= 1:
        return "--vc-scale must be in (0, 1]"
    if args.tenants < 0:
        return "--tenants must be >= 0"
    if "tree" in args.modes.split(",") and args.tenants < 1:
        return "--modes tree needs --tenants N (N >= 1)"
    if args.step <= 0:
        return "--step must be > 0"
    if args.limit < 0:
        return "--limit must be >= 0"
    if args.itp_gpus <= 0 or args.itp_gpus % queues.GPUS_PER_NODE:
        return f"--itp-gpus must be a positive multiple of {queues.GPUS_PER_NODE}"
    frm, sep, to = args.window.partition(":")
    try:
        first, last = date.fromisoformat(frm), date.fromisoformat(to)
    except ValueError:
        first = last = None
    if not sep or first is None or last is None or first > last:
        return "--window must be FROM:TO, two dates YYYY-MM-DD with FROM <= TO"
    return _estimate_error(args)


def _estimate_error(args: argparse.Namespace) -> str | None:
    if args.estimate and "shared" not in args.modes.split(","):
        return "--estimate needs the shared mode in --modes"
    if args.estimate_every < 1:
        return "--estimate-every must be >= 1"
    if args.plan_max_instants < 1:
        return "--plan-max-instants must be >= 1"
    if not 0 <= args.plan_growth < math.inf:
        return "--plan-growth must be >= 0"
    return None


def run(args: argparse.Namespace) -> int:
    error = validate(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    limit = args.limit or None
    if args.trace == "philly":
        vcs = queues.load_vcs(TRACES / "philly" / "philly_vc_helios.csv", args.vc_scale)
        frm, _, to = args.window.partition(":")
        jobs = queues.load_philly(TRACES / "philly" / "philly.csv", vcs, (frm, to), limit)
    else:
        path = TRACES / "microsoft-itp" / f"{args.cluster}.csv"
        if not path.exists():
            print(f"{path}: no such file", file=sys.stderr)
            return 2
        vcs = {"itp": args.itp_gpus}
        jobs = queues.load_itp(path, limit, args.itp_gpus)
    if not jobs:
        print("no jobs in the selection", file=sys.stderr)
        return 2
    out = {
        "trace": args.trace,
        "window": args.window if args.trace == "philly" else None,
        "cluster": args.cluster if args.trace == "itp" else None,
        "limit": limit,
        "vc_scale": args.vc_scale if args.trace == "philly" else None,
        "jobs": len(jobs),
        "queues_gpus": vcs,
        "step_s": args.step,
        "work_conserving": args.work_conserving,
        "modes": {},
    }
    tenants = queues.group_tenants(vcs, args.tenants) if args.tenants else None
    if tenants:
        out["tenants"] = tenants
    for mode in args.modes.split(","):
        started = time.perf_counter()
        if mode in ("fifo", "sjf"):
            result = queues.run_isolated(jobs, vcs, mode, tenants)
        else:
            observer = None
            if args.estimate and mode == "shared":
                conf = parse_conf_text(queues.SHARED_CONF_TEXT)
                limits = PlanLimits(max_instants=args.plan_max_instants, growth=args.plan_growth)
                observer = StartEstimates(conf, every=args.estimate_every, limits=limits)
            result = queues.run_shared(
                jobs,
                vcs,
                args.step,
                args.guarantee_fraction,
                args.max_cycles,
                tenants=tenants,
                tree=mode == "tree",
                observer=observer,
                work_conserving=args.work_conserving,
            )
            if observer is not None:
                result["estimate"] = observer.report()
        result["mode_seconds"] = round(time.perf_counter() - started, 1)
        out["modes"][mode] = result
        print(f"{mode}: {result['mode_seconds']} s", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0
