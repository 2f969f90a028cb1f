"""``python -m scheduler <command>``: a thin dispatcher; each command lives in scheduler.cli."""

from __future__ import annotations

import argparse
import sys

from scheduler.cli import bench, replay_openb, replay_queues, scenario, soak

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
