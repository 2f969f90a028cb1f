"""Instructions per scheduling cycle of the core, counted by cachegrind (see _cachegrind.py).

Runs the synthetic cycle of ``python -m scheduler bench`` under valgrind twice, with 0 and
with --cycles cycles after building the snapshot, and prints the difference per cycle. With
--against DIR (another checkout, e.g. a `git worktree` of an older commit) it counts that
checkout too and prints the ratio: how two versions compare, on a machine whose speed moves,
and whether both made the same decisions and gave the same reasons (bench/digest.py, one cycle
each, outside valgrind).

    .venv/bin/python -m bench.core_instructions --nodes 1000 --jobs 10000
    git worktree add /tmp/old <commit>
    .venv/bin/python -m bench.core_instructions --nodes 5000 --jobs 5000 --against /tmp/old
    .venv/bin/python -m bench.core_instructions --tenants 5 --against /tmp/old  # tree vs flat
    .venv/bin/python -m bench.core_instructions --with-plugin gpufrag  # its cost over the seed conf
    .venv/bin/python -m bench.core_instructions --running-fraction 0.5 --min-runtime
    .venv/bin/python -m bench.core_instructions --without reasons --without lend  # their cost
    .venv/bin/python -m bench.core_instructions --phases --against /tmp/old  # open/actions/close
"""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench._cachegrind import instructions

ROOT = Path(__file__).resolve().parent.parent

# Builds the snapshot, then runs the cycles: the difference between two counts is the cycles'.
# A script of its own, run from the checkout under test (argv[1]: this one or --against).
_CYCLES = """
import sys
sys.path.insert(0, sys.argv[1])
from scheduler.core.config import default_conf
from scheduler.core.cycle import run_cycle
from scheduler.core.synthetic import synthetic_snapshot
nodes, jobs, queues, running, cycles, tenants = sys.argv[2:8]
plugin = sys.argv[8] if len(sys.argv) > 8 else ""
protected = sys.argv[10] if len(sys.argv) > 10 else ""  # sys.argv[9]: see the digests below
# tenants only when asked: an older checkout's synthetic_snapshot has no such argument
extra = {"tenants": int(tenants)} if int(tenants) else {}
snapshot = synthetic_snapshot(int(nodes), int(jobs), int(queues), 0, float(running), **extra)
conf = default_conf()
if plugin:
    # the seed conf with one more node-order plugin in binpack's tier
    from scheduler.core.config import DEFAULT_CONF_TEXT, parse_conf_text
    anchor = "  - name: network-topology-aware"
    added = chr(10).join([f"  - name: {plugin}", anchor])
    conf = parse_conf_text(DEFAULT_CONF_TEXT.replace(anchor, added))
without = sys.argv[11] if len(sys.argv) > 11 else ""
if without:
    # the seed conf with one feature off, to count what it costs (see WITHOUT below)
    from scheduler.core import cycle
    from scheduler.core.config import DEFAULT_CONF_TEXT, parse_conf_text
    text = DEFAULT_CONF_TEXT
    if without == "reasons":
        cycle.pending_reason = lambda *args, **kwargs: ""
    elif without == "never":
        cycle.never_reason = lambda ssn, job: None  # an older checkout's single-job verdict
        cycle.never_reasons = lambda ssn, jobs: [None] * len(jobs)
    elif without == "lend":
        text = text.replace("lendIdle: true", "lendIdle: false")
    elif without == "cdp":
        text = text.replace("  - name: cdp" + chr(10), "", 1)
    elif without == "rescheduling":
        text = text[: text.index("  - name: rescheduling")]  # the last plugin, with its arguments
    conf = parse_conf_text(text)
if protected:
    # cdp in the first tier; running pods bound over the last two minimums, or long before
    # ("none": every pod past it). Queues get the minimum but in "off", which registers
    # nothing: Volcano's behaviour on the very same snapshot, the baseline.
    from dataclasses import replace
    from scheduler.core.config import DEFAULT_CONF_TEXT, parse_conf_text
    anchor = "  - name: conformance"
    if "name: cdp" not in DEFAULT_CONF_TEXT:
        conf = parse_conf_text(DEFAULT_CONF_TEXT.replace(anchor, anchor + chr(10) + "  - name: cdp"))
    minimum = 600.0
    now = 10 * minimum
    def started(i):
        return now - minimum * (0.5 + i % 2) if protected == "half" else 0.0
    snapshot = replace(
        snapshot,
        now=now,
        queues=tuple(
            replace(q, min_runtime=0.0 if protected == "off" else minimum) for q in snapshot.queues
        ),
        jobs=tuple(
            replace(job, tasks=tuple(
                replace(t, started=started(i)) if t.node else t for i, t in enumerate(job.tasks)
            ))
            for job in snapshot.jobs
        ),
    )
# As the cycle worker runs it (scheduler.adapters.gc_pause); a no-op where the core pauses it.
import gc
gc.disable()
result = None
for _ in range(int(cycles)):
    result = run_cycle(snapshot, conf)
stop = sys.argv[12] if len(sys.argv) > 12 else ""
if stop:
    # after the cycles above, one more up to the end of a phase: open, the actions, close
    from scheduler.core.actions import ACTIONS
    from scheduler.core.cycle import close_session, open_session
    ssn = open_session(snapshot, conf)
    if stop != "open":
        for action in conf.actions:
            ACTIONS[action].execute(ssn)
    if stop == "close":
        close_session(ssn)
    ssn.release()
if len(sys.argv) > 9 and sys.argv[9]:  # the digests, outside valgrind (argv[9]: this checkout)
    sys.path.insert(0, sys.argv[9])
    from bench.digest import decisions_digest, reasons_digest
    print(decisions_digest(result), reasons_digest(result))
"""


def digests(checkout: Path, args: argparse.Namespace, tenants: int, plugin: str = "") -> list[str]:
    """(decisions, reasons) digests of one cycle of `checkout`, run without valgrind, with
    this checkout's digest functions (an older checkout may have none)."""
    shape = [args.nodes, args.jobs, args.queues, args.running_fraction, 1, tenants]
    argv = [sys.executable, "-c", _CYCLES, str(checkout), *map(str, shape), plugin, str(ROOT)]
    answer = subprocess.run(argv, capture_output=True, text=True, check=True)
    return answer.stdout.split()


# --without: what each feature of the seed conf costs, counted with it off (same decisions on
# the synthetic snapshots, which have no never-runnable job and no queue minimum)
WITHOUT = {
    "reasons": "the waiting jobs' sentences at close (the never verdict and the idle notes of "
    "the work-conservation record stay)",
    "never": "the never verdict, at open (the quota's demand) and close",
    "lend": "proportion's lendIdle",
    "cdp": "the cdp plugin (no queue has a minimum run time)",
    "rescheduling": "the rescheduling plugin",
}


def per_cycle(
    checkout: Path,
    args: argparse.Namespace,
    tenants: int,
    plugin: str = "",
    protected: str = "",
    without: str = "",
) -> int:
    def count(cycles: int) -> int:
        return _count(checkout, args, tenants, cycles, plugin, protected, without)

    return (count(args.cycles) - count(0)) // args.cycles


def _count(
    checkout: Path,
    args: argparse.Namespace,
    tenants: int,
    cycles: int,
    plugin: str = "",
    protected: str = "",
    without: str = "",
    stop: str = "",
) -> int:
    shape = [args.nodes, args.jobs, args.queues, args.running_fraction, cycles, tenants]
    argv = [sys.executable, "-c", _CYCLES, str(checkout), *map(str, shape), plugin]
    if protected or without or stop:
        argv += ["", protected, without, stop]  # no digests
    return instructions(argv)


def per_phase(checkout: Path, args: argparse.Namespace, tenants: int) -> dict[str, int]:
    """Instructions of each phase of a cycle run after one other in the same process (so
    first-call costs are out): session opening, the actions, closing. Each count includes
    freeing what the cycle leaves, as a cycle does."""
    totals = [
        _count(checkout, args, tenants, 1, stop=stop) for stop in ("open", "actions", "close")
    ]
    warm = _count(checkout, args, tenants, 1)
    return {
        "open": totals[0] - warm,
        "actions": totals[1] - totals[0],
        "close": totals[2] - totals[1],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--queues", type=int, default=50)
    parser.add_argument("--running-fraction", type=float, default=0.0)
    parser.add_argument("--cycles", type=int, default=2)
    parser.add_argument("--tenants", type=int, default=0, help="queues grouped under tenants")
    parser.add_argument(
        "--against-tenants", type=int, default=0, help="--tenants for the --against checkout"
    )
    parser.add_argument("--against", type=Path, help="another checkout to count and compare")
    parser.add_argument(
        "--with-plugin",
        default="",
        help="also count the seed conf with this node-order plugin added to binpack's tier "
        "(e.g. gpufrag) and print the ratio to the seed conf",
    )
    parser.add_argument(
        "--min-runtime",
        action="store_true",
        help="count the seed conf with cdp in the first tier on one snapshot three ways: no "
        "queue minimum (Volcano's behaviour, the baseline), every queue a 600 s minimum that "
        "no running pod is within (the check's own cost), and half the running pods within it "
        "(the cost of the attempts that then fail); print the ratios to the baseline",
    )
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also count each phase (open, the actions, close) of a second cycle, here and in "
        "the --against checkout",
    )
    parser.add_argument(
        "--without",
        action="append",
        default=[],
        choices=sorted(WITHOUT),
        help="also count the seed conf with this feature off and print the instructions it "
        "costs per cycle (repeatable): "
        + "; ".join(f"{name}: {what}" for name, what in WITHOUT.items()),
    )
    args = parser.parse_args(argv)
    if args.cycles < 1:
        parser.error("--cycles must be at least 1")
    out = {
        "nodes": args.nodes,
        "jobs": args.jobs,
        "queues": args.queues,
        "running_fraction": args.running_fraction,
        "tenants": args.tenants,
        "instructions_per_cycle": per_cycle(ROOT, args, args.tenants),
    }
    if args.with_plugin:
        out["with_plugin"] = args.with_plugin
        out["with_plugin_instructions_per_cycle"] = per_cycle(
            ROOT, args, args.tenants, args.with_plugin
        )
        out["with_plugin_ratio"] = round(
            out["with_plugin_instructions_per_cycle"] / out["instructions_per_cycle"], 3
        )
    if args.min_runtime:
        counts = {
            mode: per_cycle(ROOT, args, args.tenants, protected=mode)
            for mode in ("off", "none", "half")
        }
        out["min_runtime_instructions_per_cycle"] = counts
        out["min_runtime_ratio_none_protected"] = round(counts["none"] / counts["off"], 4)
        out["min_runtime_ratio_half_protected"] = round(counts["half"] / counts["off"], 4)
    if args.phases:
        out["phases"] = per_phase(ROOT, args, args.tenants)
    for feature in args.without:
        off = per_cycle(ROOT, args, args.tenants, without=feature)
        out[f"without_{feature}_instructions_per_cycle"] = off
        out[f"{feature}_costs_per_cycle"] = out["instructions_per_cycle"] - off
    if args.against is not None:
        if not (args.against / "scheduler" / "core").is_dir():
            parser.error(f"--against: {args.against} is not a checkout of this project")
        out["against"] = str(args.against)
        out["against_tenants"] = args.against_tenants
        out["against_instructions_per_cycle"] = per_cycle(
            args.against.resolve(), args, args.against_tenants
        )
        out["ratio"] = round(
            out["instructions_per_cycle"] / out["against_instructions_per_cycle"], 3
        )
        if args.phases:
            out["against_phases"] = per_phase(args.against.resolve(), args, args.against_tenants)
        mine = digests(ROOT, args, args.tenants)
        theirs = digests(args.against.resolve(), args, args.against_tenants)
        out["decisions_digest"], out["against_decisions_digest"] = mine[0], theirs[0]
        out["same_decisions"] = mine[0] == theirs[0]
        out["same_reasons"] = mine[1] == theirs[1]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
