"""``python -m scheduler bench``: time one scheduling cycle on a synthetic cluster.

Prints one JSON object (with --digest, the digests of its decisions and reasons,
bench/digest.py): the median cycle time over ``--repeat`` runs (wall clock, and CPU time
with the load average, for shared machines), the median seconds per
phase (session open, each action, session close), placements (binds + pipelined), placements per
second, the peak Python heap (tracemalloc, measured in one extra untimed run because tracing
slows the cycle down several times) and the process's peak resident set size over the timed
runs (``rss_peak_mb``: what the operating system gave it, the interpreter and the snapshot
included, before the traced run).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
import tracemalloc

from bench.digest import decisions_digest, reasons_digest
from scheduler.adapters.gc_pause import gc_paused
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle, run_cycle_timed
from scheduler.core.synthetic import synthetic_snapshot


def register(subparsers) -> None:
    parser = subparsers.add_parser("bench", help="time one cycle on a synthetic cluster")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument(
        "--tenants", type=int, default=0, help="group the queues under this many tenants"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--running-fraction",
        type=float,
        default=0.0,
        help="share of the cluster's GPUs pre-filled with running jobs (0..1)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc run")
    parser.add_argument(
        "--digest",
        action="store_true",
        help="also print digests of the cycle's decisions (binds, evictions, pipelined) and of "
        "its pending reasons, to check that two versions decide the same",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if min(args.nodes, args.jobs, args.queues, args.repeat) < 1:
        print("--nodes, --jobs, --queues and --repeat must be at least 1", file=sys.stderr)
        return 2
    if args.tenants < 0:
        print("--tenants must be 0 or more", file=sys.stderr)
        return 2
    if not 0.0 <= args.running_fraction <= 1.0:
        print("--running-fraction must be between 0 and 1", file=sys.stderr)
        return 2
    snapshot = synthetic_snapshot(
        args.nodes, args.jobs, args.queues, args.seed, args.running_fraction, args.tenants
    )
    conf = default_conf()
    totals: list[float] = []
    cpu_totals: list[float] = []
    phases: dict[str, list[float]] = {}
    result = None
    for _ in range(args.repeat):
        start, cpu_start = time.perf_counter(), time.process_time()
        # Paused as the cycle worker pauses it (scheduler.adapters.orchestrator).
        with gc_paused():
            result, timings = run_cycle_timed(snapshot, conf, time.perf_counter)
        totals.append(time.perf_counter() - start)
        cpu_totals.append(time.process_time() - cpu_start)
        for name, seconds in timings.items():
            phases.setdefault(name, []).append(seconds)
    # ru_maxrss is in KiB on Linux; read before the traced run, whose traces take memory too
    rss_peak_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    cycle = statistics.median(totals)
    placements = len(result.binds) + len(result.pipelined)
    out = {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "queues": args.queues,
        "tenants": args.tenants,
        "seed": args.seed,
        "running_fraction": args.running_fraction,
        "repeat": args.repeat,
        "cycle_seconds": round(cycle, 4),
        "cycle_seconds_min": round(min(totals), 4),
        # CPU time of this one-threaded process: on a shared machine it stays close to what an
        # idle machine's wall clock would show, where wall time counts other people's work.
        "cycle_cpu_seconds": round(statistics.median(cpu_totals), 4),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "action_seconds": {k: round(statistics.median(v), 4) for k, v in phases.items()},
        "placements": placements,
        "binds": len(result.binds),
        "pipelined": len(result.pipelined),
        "evictions": len(result.evictions),
        "placements_per_second": round(placements / cycle, 1) if cycle > 0 else None,
        "peak_memory_mb": None if args.no_memory else _peak_memory_mb(snapshot, conf),
        "rss_peak_mb": rss_peak_mb,
    }
    if args.digest:
        out["decisions_digest"] = decisions_digest(result)
        out["reasons_digest"] = reasons_digest(result)
    print(json.dumps(out))
    return 0


def _peak_memory_mb(snapshot, conf) -> float:
    tracemalloc.start()
    try:
        with gc_paused():
            run_cycle(snapshot, conf)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return round(peak / 2**20, 1)
