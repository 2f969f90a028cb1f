"""gpuq: submit, list, cancel and explain jobs; show queue shares.

    export GPUQ_URL=http://127.0.0.1:8000 GPUQ_TOKEN=<token from /api/tokens/>
    python -m portal.cli submit --queue nlp-train --name bert --replicas 2 --gpus 4 \
        --image ghcr.io/example/trainer:latest --command "python train.py"
    python -m portal.cli submit -f job.yaml
    python -m portal.cli jobs --status pending --json    # --json before or after the command
    python -m portal.cli why 42
    python -m portal.cli cancel 42
    python -m portal.cli queues
    python -m portal.cli tenants
    python -m portal.cli report --group-by queue --month 2026-11
"""

import argparse
import functools
import json
import math
import os
import re
import shlex
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, TextIO

from .client import ApiClient, ApiError, ConnectionFailed
from .output import cores, gib, hours, table

DEFAULT_URL = "http://127.0.0.1:8000"
EXIT_OK, EXIT_API_ERROR, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
VOLCANO_API_VERSION = "batch.volcano.sh/v1alpha1"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuq", description="Command-line client of the GPU quota portal API."
    )
    parser.add_argument(
        "--url", default=os.environ.get("GPUQ_URL", DEFAULT_URL), help="portal URL ($GPUQ_URL)"
    )
    parser.add_argument(
        "--token", default=os.environ.get("GPUQ_TOKEN"), help="API token ($GPUQ_TOKEN)"
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    # Every command takes --json too, so `gpuq jobs --mine --json` works as well as
    # `gpuq --json jobs --mine`; SUPPRESS keeps an absent sub-flag from resetting the other.
    json_flag = argparse.ArgumentParser(add_help=False)
    json_flag.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the API's JSON"
    )
    commands = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")
    add_command = functools.partial(commands.add_parser, parents=[json_flag])

    submit = add_command("submit", help="submit a job (flags or a Volcano manifest)")
    submit.add_argument("-f", "--file", help="Volcano Job manifest (YAML or JSON); '-' = stdin")
    submit.add_argument("--queue", help="queue name or id")
    submit.add_argument("--name", help="job name (DNS label)")
    submit.add_argument("--task-name", default="worker")
    submit.add_argument("--replicas", type=int, default=1)
    submit.add_argument(
        "--gpus",
        type=_gpus_flag,
        default=Decimal(0),
        help="GPUs per replica: whole (2) or a share of one GPU (0.25)",
    )
    submit.add_argument(
        "--gpu-memory", help='GPU memory of one GPU per replica, e.g. "10Gi" (a share of it)'
    )
    submit.add_argument("--gpu-resource", default="nvidia.com/gpu")
    submit.add_argument("--cpu", help='CPU per replica, e.g. "4" or "500m"')
    submit.add_argument("--memory", help='memory per replica, e.g. "16Gi"')
    submit.add_argument("--image", help="container image")
    submit.add_argument("--command", help='command line, e.g. "python train.py --lr 3e-4"')
    submit.add_argument("--env", action="append", type=_key_value, default=[], metavar="K=V")
    submit.add_argument(
        "--node-selector", action="append", type=_key_value, default=[], metavar="K=V"
    )
    submit.add_argument("--min-available", type=int)
    submit.add_argument("--priority", type=int)
    submit.add_argument("--duration", type=int, help="expected run time in seconds")

    jobs = add_command("jobs", help="list jobs you may see")
    jobs.add_argument("--queue")
    jobs.add_argument("--tenant")
    jobs.add_argument("--status")
    jobs.add_argument("--mine", action="store_true")
    jobs.add_argument("--since", help="ISO 8601 time: jobs submitted at or after it")
    jobs.add_argument("--limit", type=int, default=50)

    show = add_command("show", help="one job: tasks, placements, pending reason")
    show.add_argument("job_id", type=int)
    cancel = add_command("cancel", help="cancel a job")
    cancel.add_argument("job_id", type=int)
    why = add_command("why", help="why a job is pending and who is ahead of it")
    why.add_argument("job_id", type=int)
    queues = add_command("queues", help="queues and their shares")
    queues.add_argument("--tenant", type=int, help="tenant id")
    commands.add_parser("tenants", help="your tenants: quota, what their queues guarantee, use")
    report = add_command("report", help="GPU-hours and CPU-core-hours of a month")
    report.add_argument("--group-by", choices=["tenant", "queue", "user"], default="tenant")
    report.add_argument("--month", help="YYYY-MM (UTC); default: the current month")
    return parser


def manifest_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """A Volcano Job manifest built from the submit flags (the server maps it)."""
    missing = [flag for flag in ("queue", "name", "image") if not getattr(args, flag)]
    if missing:
        raise UsageError("submit needs -f FILE or " + ", ".join(f"--{m}" for m in missing))
    limits = _gpu_limits(args)
    if args.cpu:
        limits["cpu"] = args.cpu
    if args.memory:
        limits["memory"] = args.memory
    container: dict[str, Any] = {"name": args.task_name, "image": args.image}
    if args.command:
        container["command"] = shlex.split(args.command)
    if args.env:
        container["env"] = [{"name": k, "value": v} for k, v in args.env]
    if limits:
        container["resources"] = {"limits": limits}
    pod: dict[str, Any] = {"containers": [container]}
    if args.node_selector:
        pod["nodeSelector"] = dict(args.node_selector)
    annotations = {}
    if args.priority is not None:
        annotations["priority"] = str(args.priority)
    if args.duration is not None:
        annotations["gpuq/expected-duration-seconds"] = str(args.duration)
    spec: dict[str, Any] = {
        "queue": args.queue,
        "tasks": [{"name": args.task_name, "replicas": args.replicas, "template": {"spec": pod}}],
    }
    if args.min_available is not None:
        spec["minAvailable"] = args.min_available
    metadata: dict[str, Any] = {"name": args.name}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": VOLCANO_API_VERSION, "kind": "Job", "metadata": metadata, "spec": spec}


class UsageError(Exception):
    pass


VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
_MIB = {
    "": 1024,
    "gi": 1024,
    "mi": 1,
    "ti": 1024 * 1024,
    "g": 1000**3 / 2**20,
    "m": 1000**2 / 2**20,
}


def _gpu_limits(args: argparse.Namespace) -> dict[str, Any]:
    """The container's GPU limits: whole GPUs under --gpu-resource, a share of one device
    (--gpus 0.25, --gpu-memory 10Gi) in Volcano's deviceshare names (the server maps them)."""
    gpus = args.gpus
    if gpus > 1 and gpus != gpus.to_integral_value():
        # A Volcano manifest has no words for 1.5 GPUs (a share is of one card); the API's
        # JSON body does, and the server's answer says the same.
        raise UsageError(
            f"--gpus: a fraction of a GPU is a share of one device: {gpus} is more than one "
            "GPU and not whole; ask for whole GPUs, or for a fraction below 1"
        )
    if not args.gpu_memory and gpus == gpus.to_integral_value():
        return {args.gpu_resource: int(gpus)} if gpus else {}
    limits: dict[str, Any] = {VGPU_NUMBER: 1}
    if gpus:
        limits[VGPU_CORES] = _decimal_text(gpus * 100)
    if args.gpu_memory:
        limits[VGPU_MEMORY] = _mib(args.gpu_memory)
    return limits


def _gpus_flag(text: str) -> Decimal:
    """--gpus: a number of GPUs, whole or a fraction (the server says what it allows)."""
    try:
        number = Decimal(text)
    except InvalidOperation as error:
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r}") from error
    if not number.is_finite() or number < 0:
        raise argparse.ArgumentTypeError(f"not a number of GPUs: {text!r}")
    return number


def _mib(text: str) -> int:
    """--gpu-memory "10Gi" / "512Mi" / "10" (GiB) as MiB, rounded up."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _MIB:
        raise UsageError(f'--gpu-memory: use a size such as "10Gi" or "512Mi", not {text!r}')
    return math.ceil(Decimal(match.group(1)) * Decimal(str(_MIB[unit])))


def _decimal_text(number: Decimal) -> str:
    text = f"{number:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def run(args: argparse.Namespace, client: ApiClient, out: TextIO) -> None:  # noqa: C901, PLR0911, PLR0912 - one branch per subcommand
    if args.cmd == "submit":
        if args.file:
            raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
            is_json = args.file.endswith(".json")
            job = client.request(
                "POST",
                "/api/v1/jobs/",
                raw_body=raw,
                content_type="application/json" if is_json else "application/yaml",
            )
        else:
            job = client.post("/api/v1/jobs/", manifest_from_flags(args))
        if args.json:
            return _print_json(job, out)
        print(
            f"job {job['id']} {job['name']} submitted to {job['queue']}: {job['status']}", file=out
        )
        return None
    if args.cmd == "jobs":
        query = {
            "queue": args.queue,
            "tenant": args.tenant,
            "status": args.status,
            "since": args.since,
            "mine": "true" if args.mine else None,
        }
        rows = client.get_all("/api/v1/jobs/", limit=args.limit, **query)
        if args.json:
            return _print_json(rows, out)
        headers = [
            "id",
            "name",
            "queue",
            "status",
            "prio",
            "gpus",
            "submitter",
            "submitted",
            "reason",
        ]
        print(
            table(
                headers,
                [
                    [
                        j["id"],
                        j["name"],
                        j["queue"],
                        j["status"],
                        j["priority"],
                        j.get("gpu_request", j["gpus"]),
                        j["submitter"],
                        j["submitted_at"][:19].replace("T", " "),
                        j["pending_reason"] if j["status"] == "pending" else "",
                    ]
                    for j in rows
                ],
            ),
            file=out,
        )
        return None
    if args.cmd == "show":
        job = client.get(f"/api/v1/jobs/{args.job_id}/")
        if args.json:
            return _print_json(job, out)
        print(
            f"job {job['id']} {job['name']} in {job['queue']} ({job['tenant']}): {job['status']}",
            file=out,
        )
        if job["pending_reason"]:
            print(f"reason: {job['pending_reason']}", file=out)
        print(
            table(
                ["task", "replicas", "gpus", "cpu", "memory", "image"],
                [
                    [
                        t["name"],
                        t["replicas"],
                        t.get("gpu_request", t["gpus"]),
                        cores(t["cpu_millis"]),
                        gib(t["memory_bytes"]),
                        t["image"],
                    ]
                    for t in job["tasks"]
                ],
            ),
            file=out,
        )
        if job["placements"]:
            print(
                table(
                    ["pod", "node", "state", "gpus"],
                    [[p["pod"], p["node"], p["state"], p["gpus"]] for p in job["placements"]],
                ),
                file=out,
            )
        return None
    if args.cmd == "cancel":
        job = client.post(f"/api/v1/jobs/{args.job_id}/cancel/")
        if args.json:
            return _print_json(job, out)
        print(f"job {job['id']} {job['name']}: {job['status']}", file=out)
        return None
    if args.cmd == "why":
        why = client.get(f"/api/v1/jobs/{args.job_id}/why/")
        if args.json:
            return _print_json(why, out)
        print(f"job {why['id']} {why['name']} in {why['queue']}: {why['state']}", file=out)
        if why["pending_kind"]:
            print(f"kind: {why['pending_kind']}", file=out)
        if why["pending_reason"]:
            print(f"reason: {why['pending_reason']}", file=out)
        if (notice := why.get("notice")) is not None:
            print(f"notice: {notice['text']}", file=out)
        if why["position"] is not None:
            print(why["position_text"], file=out)
        if (estimate := why.get("estimated_start_range")) is not None:
            print(
                f"start: {estimate['text']} (estimated {_clock(estimate['computed_at'])} UTC)",
                file=out,
            )
        if why["jobs_ahead"]:
            print(
                table(
                    ["id", "name", "tenant", "prio", "gpus", "submitted"],
                    [
                        [
                            j["id"],
                            j["name"],
                            j["tenant"],
                            j["priority"],
                            j.get("gpu_request", j["gpus"]),
                            j["submitted_at"][:19].replace("T", " "),
                        ]
                        for j in why["jobs_ahead"]
                    ],
                ),
                file=out,
            )
        if hidden := why["hidden_jobs_ahead"]:
            others = "job of another tenant" if hidden == 1 else "jobs of other tenants"
            print(f"plus {hidden} {others} ahead", file=out)
        return None
    if args.cmd == "queues":
        rows = client.get_all("/api/v1/queues/", tenant=args.tenant)
        if args.json:
            return _print_json(rows, out)
        headers = [
            "id", "queue", "tenant", "state", "weight", "prio", "guarantee", "capability",
            "borrow", "allocated", "deserved", "pending",
        ]  # fmt: skip
        print(
            table(
                headers,
                [
                    [
                        q["id"],
                        q["name"],
                        q["tenant"],
                        q["state"],
                        q["weight"],
                        q["priority"],
                        q["guarantee_gpus"],
                        q["capability_gpus"],
                        q["borrowing_limit_gpus"],
                        q["gpus_allocated"],
                        q["gpus_deserved"],
                        q["gpus_pending"],
                    ]
                    for q in rows
                ],
            ),
            file=out,
        )
        return None
    if args.cmd == "tenants":
        rows = client.get_all("/api/v1/tenants/")
        if args.json:
            return _print_json(rows, out)
        headers = [
            "id", "tenant", "role", "weight", "guarantee", "queues-guarantee", "capability",
            "borrow", "allocated", "deserved",
        ]  # fmt: skip
        print(
            table(
                headers,
                [
                    [
                        t["id"],
                        t["name"],
                        t["role"],
                        t["weight"],
                        t["guarantee_gpus"],
                        t["queues_guarantee_gpus"],
                        t["capability_gpus"],
                        t["borrowing_limit_gpus"],
                        t["gpus_allocated"],
                        t["gpus_deserved"],
                    ]
                    for t in rows
                ],
            ),
            file=out,
        )
        return None
    if args.cmd == "report":
        return _report(args, client, out)
    raise UsageError(f"unknown command {args.cmd}")


def _report(args: argparse.Namespace, client: ApiClient, out: TextIO) -> None:
    query = {"group_by": args.group_by}
    if args.month:
        query["month"] = args.month
    body = client.get("/api/v1/usage/report/", **query)
    if args.json:
        return _print_json(body, out)
    # A queue's tenant is a column of its own; a tenant's would repeat its name, and a user's
    # use spans tenants (the API leaves it empty).
    with_tenant = args.group_by == "queue"
    headers = [
        args.group_by, *(["tenant"] if with_tenant else []), "gpu-hours", "within", "borrowed",
        "lost", "cpu-core-hours",
    ]  # fmt: skip
    rows = [*body["rows"], {**body["total"], "tenant": ""}]
    status = "final" if body["complete"] else "so far: the month has not ended"
    print(f"{body['month']} ({status})", file=out)
    print(
        table(
            headers,
            [
                [
                    r["name"],
                    *([r["tenant"]] if with_tenant else []),
                    *(
                        hours(r[key])
                        for key in (
                            "gpu_hours",
                            "gpu_hours_within",
                            "gpu_hours_borrowed",
                            "gpu_hours_lost",
                            "cpu_core_hours",
                        )
                    ),
                ]
                for r in rows
            ],
        ),
        file=out,
    )
    return None


def _print_json(data: Any, out: TextIO) -> None:
    print(json.dumps(data, indent=2, ensure_ascii=False), file=out)


def print_api_error(error: ApiError, err: TextIO) -> None:
    body = error.body
    if isinstance(body, dict):
        print(f"error ({error.status}): {body.get('detail', '')}", file=err)
        for field, messages in (body.get("errors") or {}).items():
            for message in messages:
                print(f"  {field}: {message}", file=err)
    else:
        print(f"error ({error.status}): {str(body)[:500]}", file=err)


def main(
    argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.token:
        print("error: no API token: pass --token or set GPUQ_TOKEN (see /api/tokens/)", file=err)
        return EXIT_USAGE
    client = ApiClient(url=args.url, token=args.token)
    try:
        run(args, client, out)
    except UsageError as error:
        print(f"error: {error}", file=err)
        return EXIT_USAGE
    except OSError as error:
        print(f"error: {error}", file=err)
        return EXIT_USAGE
    except ApiError as error:
        print_api_error(error, err)
        return EXIT_API_ERROR
    except ConnectionFailed as error:
        print(f"error: {error}", file=err)
        return EXIT_UNREACHABLE
    return EXIT_OK


def _clock(stamp: str) -> str:
    """An API timestamp (ISO 8601) as YYYY-MM-DD HH:MM:SS."""
    return stamp[:19].replace("T", " ")
