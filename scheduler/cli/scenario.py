"""``python -m scheduler scenario FILE``: run one cycle of the pure core on a scenario file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from scheduler.core.cycle import run_cycle
from scheduler.core.scenario import ScenarioError, load_scenario, result_to_dict

EXIT_INVALID = 2


def register(subparsers) -> None:
    parser = subparsers.add_parser("scenario", help="run one scheduling cycle on a scenario file")
    parser.add_argument("file", type=Path, help="scenario (.json, or .yaml/.yml)")
    parser.set_defaults(handler=run)


def read_file(path: Path):
    text = path.read_text(encoding="utf-8")
    if path.suffix in (".yaml", ".yml"):
        import yaml

        return yaml.safe_load(text)
    return json.loads(text)


def run(args: argparse.Namespace) -> int:
    try:
        data = read_file(args.file)
    except OSError as exc:
        print(f"{args.file}: cannot read ({exc.strerror})", file=sys.stderr)
        return EXIT_INVALID
    except ValueError as exc:  # json.JSONDecodeError and yaml errors
        print(f"{args.file}: not valid JSON/YAML ({exc.__class__.__name__})", file=sys.stderr)
        return EXIT_INVALID
    except Exception as exc:  # yaml.YAMLError does not derive from ValueError
        print(f"{args.file}: not valid YAML ({exc.__class__.__name__})", file=sys.stderr)
        return EXIT_INVALID
    try:
        snapshot, conf = load_scenario(data)
    except ScenarioError as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_INVALID
    result = run_cycle(snapshot, conf)
    json.dump(result_to_dict(result), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
