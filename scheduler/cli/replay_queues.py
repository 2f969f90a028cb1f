"""``python -m scheduler replay-queues``: isolated FIFO/SJF partitions vs one shared cluster run by
the core, on the Philly (or ITP) job trace."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from scheduler.replay import queues

TRACES = Path("/work/shared/traces")
DEFAULT_WINDOW = "2017-10-01:2017-11-30"
DEFAULT_LIMIT = 1500


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
        help="Philly submission window FROM:TO (dates, inclusive); Helios used "
        "2017-10-01:2017-11-30",
    )
    parser.add_argument(
        "--limit", type=int, default=DEFAULT_LIMIT, help="first N jobs of the window (0 = all)"
    )
    parser.add_argument("--step", type=float, default=60.0, help="event coalescing step (s)")
    parser.add_argument(
        "--guarantee-fraction",
        type=float,
        default=0.5,
        help="queue guarantee = fraction x VC (1.0 leaves nothing to borrow)",
    )
    parser.add_argument("--modes", default="fifo,sjf,shared")
    parser.add_argument("--max-cycles", type=int, default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    limit = args.limit or None
    if args.trace == "philly":
        vcs = queues.load_vcs(TRACES / "philly" / "philly_vc_helios.csv")
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
        "jobs": len(jobs),
        "queues_gpus": vcs,
        "step_s": args.step,
        "modes": {},
    }
    for mode in args.modes.split(","):
        started = time.perf_counter()
        if mode in ("fifo", "sjf"):
            result = queues.run_isolated(jobs, vcs, mode)
        elif mode == "shared":
            result = queues.run_shared(
                jobs, vcs, args.step, args.guarantee_fraction, args.max_cycles
            )
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
        result["mode_seconds"] = round(time.perf_counter() - started, 1)
        out["modes"][mode] = result
        print(f"{mode}: {result['mode_seconds']} s", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0
