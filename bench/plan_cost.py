"""What estimating every pending job's start (scheduler.core.plan) costs, in scheduling cycles.

The unit is the cycle `bench.core_instructions` counts: the seed conf on the synthetic cluster
of --nodes nodes and --pending jobs, nothing running. The plan runs on the same cluster full
(every GPU taken by running jobs, placed first fit) with --pending jobs waiting behind them;
run times come from a seeded history (per queue, log-normal around --median-runtime with a
sigma of 1.5, at most 7 days) and the running jobs have run for up to a day. Both are measured
in this process, alternately, --repeat times (median CPU seconds), or with --instructions by
cachegrind (instructions barely move with the machine's load; much slower).

    .venv/bin/python -m bench.plan_cost                       # 1,000 nodes, 10,000 pending
    .venv/bin/python -m bench.plan_cost --instructions --repeat 1
    .venv/bin/python -m bench.plan_cost --median-runtime 600  # short jobs: ends are dense
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import random
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from bench._cachegrind import instructions
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.plan import Plan, PlanLimits, plan_starts
from scheduler.core.runtimes import RuntimeHistory, Span
from scheduler.core.synthetic import synthetic_snapshot
from scheduler.core.types import Snapshot, TaskStatus

ROOT = Path(__file__).resolve().parent.parent
DAY = 86400.0
SAMPLES_PER_QUEUE = 200

# argv[1]: checkout; argv[2:]: nodes, pending, queues, median, max_instants, what (cycle|plan|
# none): builds both inputs, then runs one of them (the difference to "none" is its cost)
_SCRIPT = """
import gc, sys
sys.path.insert(0, sys.argv[1])
from bench.plan_cost import cycle_input, plan_input
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.plan import PlanLimits, plan_starts
nodes, pending, queues, median, cap = (float(a) for a in sys.argv[2:7])
what = sys.argv[7]
conf = default_conf()
reference = cycle_input(int(nodes), int(pending), int(queues))
snapshot, ends, durations = plan_input(int(nodes), int(pending), int(queues), median)
gc.disable()
if what == "cycle":
    run_cycle(reference, conf)
elif what == "plan":
    plan_starts(snapshot, conf, ends=ends, durations=durations,
                limits=PlanLimits(max_instants=int(cap)))
"""


def cycle_input(nodes: int, pending: int, queues: int) -> Snapshot:
    """`bench.core_instructions`' cycle: every job pending on an idle cluster."""
    return synthetic_snapshot(nodes, pending, queues)


def plan_input(
    nodes: int, pending: int, queues: int, median_runtime: float, seed: int = 0
) -> tuple[Snapshot, dict[str, Span], dict[str, Span]]:
    """A full cluster with ``pending`` jobs waiting, the running jobs' ends and the pending
    jobs' run times predicted from a seeded history."""
    # enough jobs to fill the cluster first fit and leave ``pending`` waiting
    full = synthetic_snapshot(nodes, pending + 2 * nodes, queues, seed, running_fraction=1.0)
    running = [j for j in full.jobs if j.tasks[0].status is TaskStatus.RUNNING]
    waiting = [j for j in full.jobs if j.tasks[0].status is TaskStatus.PENDING][:pending]
    snapshot = replace(full, jobs=tuple(running + waiting))
    rng = random.Random(seed)  # noqa: S311 - a seeded workload, not a secret
    samples = [
        ((queue.name,), min(rng.lognormvariate(math.log(median_runtime), 1.5), 7 * DAY))
        for queue in full.queues
        for _ in range(SAMPLES_PER_QUEUE)
    ]
    history = RuntimeHistory(samples)
    now = snapshot.now
    ends = {
        job.name: history.remaining((job.queue,), elapsed=rng.uniform(0, DAY)).shifted(now)
        for job in running
    }
    durations = {job.name: history.remaining((job.queue,)) for job in waiting}
    return snapshot, ends, durations


def _cpu(run) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def measure_cpu(args: argparse.Namespace) -> dict:
    conf = default_conf()
    reference = cycle_input(args.nodes, args.pending, args.queues)
    snapshot, ends, durations = plan_input(args.nodes, args.pending, args.queues, args.median)
    limits = PlanLimits(max_instants=args.max_instants)
    cycles, plans, made = [], [], []

    def one_plan() -> None:
        made.append(plan_starts(snapshot, conf, ends=ends, durations=durations, limits=limits))

    gc.disable()  # as the cycle worker runs the core (scheduler.adapters.gc_pause)
    for _ in range(args.repeat):
        cycles.append(_cpu(lambda: run_cycle(reference, conf)))
        plans.append(_cpu(one_plan))
    plan = made[-1]
    cycle, cost = statistics.median(cycles), statistics.median(plans)
    return {
        "cycle_cpu_seconds": round(cycle, 3),
        "plan_cpu_seconds": round(cost, 3),
        "plan_in_cycles": round(cost / cycle, 2),
        "instants": plan.instants,
        "per_instant_in_cycles": round(cost / cycle / plan.instants, 3),
        "outlooks": _outlooks(plan),
    }


def measure_instructions(args: argparse.Namespace) -> dict:
    def count(what: str) -> int:
        shape = [args.nodes, args.pending, args.queues, args.median, args.max_instants]
        argv = [sys.executable, "-c", _SCRIPT, str(ROOT), *map(str, shape), what]
        return instructions(argv)

    base = count("none")
    cycle, cost = count("cycle") - base, count("plan") - base
    return {
        "cycle_instructions": cycle,
        "plan_instructions": cost,
        "plan_in_cycles": round(cost / cycle, 2),
    }


def _outlooks(plan: Plan) -> dict[str, int]:
    out: dict[str, int] = {}
    for estimate in plan.starts.values():
        out[estimate.outlook.value] = out.get(estimate.outlook.value, 0) + 1
    out["with_likely"] = sum(1 for e in plan.starts.values() if e.likely is not None)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--median", type=float, default=7200.0, help="median run time (s)")
    parser.add_argument("--max-instants", type=int, default=PlanLimits().max_instants)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--instructions", action="store_true", help="count with cachegrind")
    args = parser.parse_args(argv)
    if min(args.nodes, args.pending, args.queues, args.repeat, args.max_instants) < 1:
        parser.error("--nodes, --pending, --queues, --repeat and --max-instants must be at least 1")
    if not args.median > 0:
        parser.error("--median must be > 0")
    out = {
        "nodes": args.nodes,
        "pending": args.pending,
        "queues": args.queues,
        "median_runtime_s": args.median,
        "max_instants": args.max_instants,
    }
    out.update(measure_instructions(args) if args.instructions else measure_cpu(args))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
