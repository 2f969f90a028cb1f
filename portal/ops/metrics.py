"""Prometheus metrics of the web process: the portal's state, read from the database at scrape
time, and the latency of every request this process served.

State comes from the database, not from counters kept by the process that ran the cycle: any
web replica answers the same figures, they survive restarts, and a stalled worker shows as a
growing `gpuportal_cycle_age_seconds` instead of a vanished target. Events (binds, evictions,
phase timings, Celery tasks) are counted by the workers themselves (scheduler.adapters.
observability, portal.ops.worker) and scraped from their own port.

Names follow Prometheus conventions (base units, `_total` counters) and Volcano's scheduler
metrics where they mean the same thing (`queue_allocated_*`, `queue_deserved_*`, `queue_weight`,
`queue_overused`, label `queue_name`; volcano-sh/volcano docs/design/metrics.md), with the
prefix `gpuportal_` instead of `volcano_`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

from django.conf import settings
from django.utils import timezone
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import REGISTRY, Collector

from portal.cluster.selectors import gpus_allocated_per_queue
from portal.jobs.models import Job
from portal.jobs.selectors import jobs_backing_off, pending_demand_per_queue
from portal.scheduling.selectors import usage_latest_deserved

from . import selectors
from .multiproc import multiprocess_dir

PREFIX = "gpuportal"
# The text format every Prometheus release parses (prometheus_client's own default names a newer
# version that Prometheus 2 servers do not know).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
CYCLE_PHASES = ("snapshot", "core", "persist", "reconcile")

REQUEST_DURATION = Histogram(
    f"{PREFIX}_http_request_duration_seconds",
    "Time from the request entering Django's middleware to the response leaving it.",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
UNMATCHED_ROUTE = "<unmatched>"
STATIC_ROUTE = "<static>"
# Any other method a client makes up is "other": a label value per invented method would let
# clients grow the number of series without bound.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetricsMiddleware:
    """One histogram observation per request, labelled by the URL pattern that matched (the
    pattern, not the path: ids in paths would make a series per object)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        start = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None:
            route = match.route or match.view_name
        elif request.path_info.startswith(settings.STATIC_URL):
            route = STATIC_ROUTE  # served by WhiteNoise before any URL is resolved
        else:
            route = UNMATCHED_ROUTE
        method = request.method if request.method in METHODS else "other"
        REQUEST_DURATION.labels(method, route, str(response.status_code)).observe(
            time.perf_counter() - start
        )
        return response


class PortalStateCollector(Collector):
    """Gauges computed from the database on every scrape (about six aggregate queries)."""

    def collect(self) -> Iterator[Metric]:
        yield from _queue_metrics()
        yield from _cluster_metrics()
        yield from _cycle_metrics()
        yield _backoff_metrics()


def _gauge(name: str, documentation: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


def _queue_metrics() -> Iterator[Metric]:
    queues = selectors.queue_rows()
    allocated = gpus_allocated_per_queue()
    deserved = usage_latest_deserved()
    pending = pending_demand_per_queue()
    never = pending_demand_per_queue(never_runnable=True)
    jobs = selectors.job_counts_per_queue()
    labels = ["queue_name", "tenant"]
    families = {
        "allocated": _gauge("queue_allocated_gpus", "GPUs held by active placements.", labels),
        "deserved": _gauge(
            "queue_deserved_gpus",
            "GPUs the queue deserves, from the newest usage sample (one per USAGE_SAMPLE_SECONDS).",
            labels,
        ),
        "guarantee": _gauge("queue_guarantee_gpus", "GPUs reserved for the queue.", labels),
        "capability": _gauge(
            "queue_capability_gpus", "Hard cap on the queue's GPUs (absent: no cap).", labels
        ),
        "pending": _gauge(
            "queue_pending_gpus",
            "GPUs asked by the queue's pending jobs that can run (see queue_never_runnable_gpus).",
            labels,
        ),
        "never_runnable": _gauge(
            "queue_never_runnable_gpus",
            "GPUs asked by the queue's pending jobs that can never run as submitted.",
            labels,
        ),
        "weight": _gauge("queue_weight", "The queue's weight.", labels),
        "overused": _gauge("queue_overused", "1 when allocated exceeds deserved.", labels),
    }
    tenant_labels = ["tenant"]
    tenant_families = {
        key: _gauge(
            f"tenant_{key}_gpus",
            f"Sum of queue_{key}_gpus over the tenant's queues.",
            tenant_labels,
        )
        for key in ("allocated", "deserved", "guarantee", "pending", "never_runnable")
    }
    by_tenant: dict[str, dict[str, float]] = {}
    job_family = _gauge("jobs", "Jobs by queue and status.", [*labels, "status"])
    for queue in queues:
        values = {
            "allocated": allocated.get(queue.id, 0),
            "deserved": deserved.get(queue.id, 0.0),
            "guarantee": queue.guarantee_gpus,
            "pending": pending.get(queue.name, 0),
            "never_runnable": never.get(queue.name, 0),
        }
        key = [queue.name, queue.tenant]
        for field, value in values.items():
            families[field].add_metric(key, value)
            totals = by_tenant.setdefault(queue.tenant, dict.fromkeys(values, 0.0))
            totals[field] += value
        if queue.capability_gpus is not None:
            families["capability"].add_metric(key, queue.capability_gpus)
        families["weight"].add_metric(key, queue.weight)
        overused = queue.id in deserved and values["allocated"] > values["deserved"]
        families["overused"].add_metric(key, 1 if overused else 0)
        counts = jobs.get(queue.id, {})
        for status in Job.Status.values:
            job_family.add_metric([*key, status], counts.get(status, 0))
    for tenant, totals in sorted(by_tenant.items()):
        for field, value in totals.items():
            tenant_families[field].add_metric([tenant], value)
    yield from families.values()
    yield from tenant_families.values()
    yield job_family


def _cluster_metrics() -> Iterator[Metric]:
    totals = selectors.node_totals()
    nodes = _gauge("nodes", "Nodes known to the portal.", ["schedulable"])
    gpus = _gauge("node_gpus", "GPUs on the nodes known to the portal.", ["schedulable"])
    for schedulable in (True, False):
        count, gpu_count = totals.get(schedulable, (0, 0))
        nodes.add_metric([str(schedulable).lower()], count)
        gpus.add_metric([str(schedulable).lower()], gpu_count)
    yield nodes
    yield gpus


def _cycle_metrics() -> Iterator[Metric]:
    cycle = selectors.cycle_latest_finished()
    if cycle is None or cycle.finished_at is None:
        return
    finished = _gauge("cycle_last_finished_timestamp_seconds", "When the newest cycle finished.")
    finished.add_metric([], cycle.finished_at.timestamp())
    age = _gauge(
        "cycle_age_seconds",
        "Seconds since the newest scheduling cycle finished (alert when it keeps growing).",
    )
    age.add_metric([], max(0.0, (timezone.now() - cycle.finished_at).total_seconds()))
    phases = _gauge(
        "cycle_last_phase_duration_seconds", "Phase durations of the newest cycle.", ["phase"]
    )
    for phase in CYCLE_PHASES:
        value = getattr(cycle, f"{phase}_ms")
        if value is not None:
            phases.add_metric([phase], value / 1000)
    figures = _gauge("cycle_last", "Figures of the newest cycle.", ["figure"])
    figures.add_metric(["binds"], cycle.binds)
    figures.add_metric(["evictions"], cycle.evictions)
    figures.add_metric(["pending_jobs"], cycle.pending_jobs)
    figures.add_metric(["error"], 1 if cycle.error else 0)
    yield from (finished, age, phases, figures)


def _backoff_metrics() -> Metric:
    jobs = _gauge(
        "backoff_jobs",
        "Jobs whose pods failed to start and that back off now: held back from the queue, or "
        "avoiding a node whose kubelet refused them (portal.jobs.backoff).",
    )
    jobs.add_metric([], jobs_backing_off(now=timezone.now()))
    return jobs


def process_registry() -> CollectorRegistry:
    """What this process (or, with PROMETHEUS_MULTIPROC_DIR, all processes sharing that folder)
    recorded: one gunicorn or Celery prefork process alone would answer a random share."""
    if multiprocess_dir() is None:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry)
    return registry


def web_exposition() -> bytes:
    registry = CollectorRegistry()
    registry.register(PortalStateCollector())
    return generate_latest(registry) + generate_latest(process_registry())
