"""What request metrics cost: the portal's own middleware (prometheus-client) against
django-prometheus, on the same request, in-process (no network, no database).

    .venv/bin/python -m bench.metrics_overhead --requests 3000 --rounds 5

Each variant runs in a fresh process with the test settings: `none` (no request metrics),
`portal` (portal.ops.metrics.RequestMetricsMiddleware), `django-prometheus` (its Before/After
middleware pair, the way its README installs them; needs `pip install django-prometheus`).
The request is an unauthenticated GET of /api/v1/jobs/ (every middleware, URL resolution, DRF's
401; no query), so the metrics' share is not hidden behind database time. Prints, per variant,
the process CPU microseconds per request (the best round, and the median of the rounds: CPU
time, not wall time, so other processes on a shared machine disturb it less), the overhead
against `none`, and how many metric families and samples a scrape then returns.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("none", "portal", "django-prometheus")
PATH = "/api/v1/jobs/"


def run_variant(variant: str, requests: int, rounds: int) -> dict:
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.test"
    import django

    django.setup()
    from django.conf import settings
    from django.test import Client, override_settings
    from prometheus_client import REGISTRY, generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    middleware = [
        m for m in settings.MIDDLEWARE if m != "portal.ops.metrics.RequestMetricsMiddleware"
    ]
    if variant == "portal":
        middleware.insert(1, "portal.ops.metrics.RequestMetricsMiddleware")
    elif variant == "django-prometheus":
        middleware = [
            "django_prometheus.middleware.PrometheusBeforeMiddleware",
            *middleware,
            "django_prometheus.middleware.PrometheusAfterMiddleware",
        ]
    means = []
    with override_settings(MIDDLEWARE=middleware):
        client = Client()
        for _ in range(200):  # warm up: imports, URL resolver, template and schema caches
            client.get(PATH)
        for _ in range(rounds):
            started = time.process_time()
            for _ in range(requests):
                client.get(PATH)
            means.append((time.process_time() - started) / requests * 1e6)
    families = list(text_string_to_metric_families(generate_latest(REGISTRY).decode()))
    return {
        "variant": variant,
        "us_per_request": round(min(means), 1),
        "median_us": round(statistics.median(means), 1),
        "rounds_us": [round(m, 1) for m in means],
        "families": len(families),
        "samples": sum(len(f.samples) for f in families),
        "request_families": sorted(
            f.name for f in families if "request" in f.name or "response" in f.name
        ),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.requests, args.rounds)))
        return 0
    results = {}
    for variant in VARIANTS:
        out = subprocess.run(
            [sys.executable, "-m", "bench.metrics_overhead", "--variant", variant, "--requests", str(args.requests),
             "--rounds", str(args.rounds)],
            cwd=ROOT, capture_output=True, text=True, check=False,
        )  # fmt: skip
        if out.returncode != 0:
            print(f"{variant}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
    base = results.get("none", {}).get("us_per_request")
    for result in results.values():
        if base:
            result["overhead_us"] = round(result["us_per_request"] - base, 1)
        print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
