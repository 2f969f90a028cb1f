"""``python -m scheduler <command>``: a thin dispatcher. `scenario` (the Volcano compatibility
scenarios) lives in scheduler.cli; the benchmark and replay commands live in the bench package
(bench/cli), which only this entry point imports."""

from __future__ import annotations

import argparse
import sys

from bench.cli import bench, replay_openb, replay_queues, soak
from scheduler.cli import scenario

COMMANDS = (scenario, replay_openb, replay_queues, bench, soak)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scheduler")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.register(subparsers)
    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
