"""``python -m scheduler soak --hours H --seed S [--conf FILE]``: a synthetic day on the demo
cluster through the real cycle code, on a simulated clock, against a throwaway database.

The database is a fresh SQLite file in a temporary folder (migrated, seeded with the demo),
removed afterwards: the soak never touches the portal's own `var/` or DATABASE_URL. The run
itself is in bench/soak.py. Prints one JSON report; exit status 1
when a target is missed. ``--before-after`` runs two soaks side by side (the quota plugins'
lendIdle and excludeNeverRunnable at upstream's values, then as the conf states them) and
prints both reports and their comparison.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "soak", help="replay a synthetic day through the real cycle on a simulated clock"
    )
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (24)")
    parser.add_argument("--seed", type=int, default=0, help="workload seed (0)")
    parser.add_argument("--conf", type=Path, help="volcano-scheduler.conf (default: the seed conf)")
    parser.add_argument(
        "--step", type=float, default=10.0, help="simulated seconds between cycles (10)"
    )
    parser.add_argument(
        "--cluster-faults",
        action="store_true",
        help="the simulated cluster refuses pods (quota 403s, kubelet refusals, image pulls, "
        "init containers), seeded (bench/soak_faults.py)",
    )
    parser.add_argument(
        "--plan-every",
        type=float,
        default=300.0,
        help="simulated seconds between plan-ahead runs (300; 0: none): the report's "
        "estimated_start compares each job's first estimate with its start",
    )
    parser.add_argument(
        "--before-after",
        action="store_true",
        help="run the day twice, with the quota plugins' lendIdle and excludeNeverRunnable at "
        "upstream's values and as the conf states them, and compare the idle GPU-seconds, "
        "utilisation and evictions per hour",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.hours <= 0 or args.step <= 0:
        print("--hours and --step must be positive", file=sys.stderr)
        return 2
    if args.plan_every < 0:
        print("--plan-every must be >= 0", file=sys.stderr)
        return 2
    conf_text = None
    if args.conf is not None:
        try:
            conf_text = args.conf.read_text(encoding="utf-8")
        except OSError as exc:
            print(f"--conf: cannot read {args.conf} ({exc.strerror})", file=sys.stderr)
            return 2
        from scheduler.core.config import ConfigError, parse_conf_text

        try:
            parse_conf_text(conf_text)
        except ConfigError as exc:
            print(f"--conf: {exc}", file=sys.stderr)
            return 2
    if args.before_after:
        return _before_after(args, conf_text)
    with tempfile.TemporaryDirectory(prefix="gpuq-soak-") as folder:
        _configure(Path(folder))
        import django
        from django.core.management import call_command

        django.setup()
        # One line per cycle on the log would drown the report (thousands of cycles).
        logging.disable(logging.INFO)
        call_command("migrate", verbosity=0)
        from bench.soak import soak  # after django.setup(): it imports the models

        report = soak(
            hours=args.hours,
            seed=args.seed,
            step=args.step,
            conf_text=conf_text,
            cluster_faults=args.cluster_faults,
            plan_every=args.plan_every,
        )
        from django.db import connections

        connections.close_all()
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if report["targets_met"] else 1


def _before_after(args: argparse.Namespace, conf_text: str | None) -> int:
    """Both runs at once, each a soak of its own in a child process (a database each; nothing
    carries over between them): without the departures, then as the conf states them."""
    from bench.soak import compare, switches_off
    from scheduler.core.config import DEFAULT_CONF_TEXT

    common = ["--hours", str(args.hours), "--seed", str(args.seed), "--step", str(args.step)]
    with tempfile.TemporaryDirectory(prefix="gpuq-soak-confs-") as folder:
        before_conf = Path(folder) / "before.conf"
        before_conf.write_text(switches_off(conf_text or DEFAULT_CONF_TEXT), encoding="utf-8")
        legs = {"before": ["--conf", str(before_conf)], "after": []}
        if conf_text is not None:
            after_conf = Path(folder) / "after.conf"
            after_conf.write_text(conf_text, encoding="utf-8")
            legs["after"] = ["--conf", str(after_conf)]
        children = {
            leg: subprocess.Popen(
                [sys.executable, "-m", "scheduler", "soak", *common, *extra],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for leg, extra in legs.items()
        }
        reports = {}
        for leg, child in children.items():
            stdout, stderr = child.communicate()
            if child.returncode not in (0, 1):
                print(f"the {leg} run failed:\n{stderr}", file=sys.stderr)
                return 2
            reports[leg] = json.loads(stdout)
    out = {**reports, "comparison": compare(reports["before"], reports["after"])}
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0 if out["comparison"]["targets_met"] else 1


def _configure(folder: Path) -> None:
    """Point Django at a throwaway SQLite database and var folder before it starts."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.local"
    os.environ["PORTAL_VAR_DIR"] = str(folder)
    os.environ["DATABASE_URL"] = f"sqlite:///{folder / 'soak.sqlite3'}"
    os.environ["DJANGO_DEBUG"] = "false"  # DEBUG keeps every query in memory
    os.environ["CLUSTER_BACKEND"] = "simulated"
    for name in ("REDIS_URL", "CELERY_BROKER_URL"):
        os.environ.pop(name, None)
