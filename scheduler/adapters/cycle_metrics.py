"""What a finished scheduling cycle tells the operators: one log event with its figures, and
the worker's Prometheus counters and histograms (served by the worker's exporter,
portal.ops.worker). Called once per cycle from scheduler.adapters.orchestrator, after the CycleRun
row is saved; it never raises into the cycle.

Names follow Volcano's scheduler metrics where they mean the same (volcano-sh/volcano
docs/design/metrics.md): `e2e_scheduling_latency_milliseconds` and
`e2e_job_scheduling_latency_milliseconds`, in milliseconds like Volcano's. One departure:
Volcano's e2e latency is the scheduling session alone (snapshot, actions, close) and binds
asynchronously; here a cycle also persists and reconciles before it ends, so the e2e figure is
the whole cycle and `cycle_phase_duration_seconds` splits it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db.models import Count
from prometheus_client import Counter, Histogram

from scheduler.adapters.portal_port import CycleRun, Job, PreemptionEvent

if TYPE_CHECKING:
    from scheduler.adapters.reconcile import ReconcileReport

logger = logging.getLogger("scheduler.cycle")

PHASES = ("snapshot", "core", "persist", "reconcile")
MILLISECOND_BUCKETS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)

E2E_LATENCY = Histogram(
    "gpuportal_e2e_scheduling_latency_milliseconds",
    "Wall time of one scheduling cycle: observe, snapshot, core, persist, reconcile.",
    buckets=MILLISECOND_BUCKETS,
)
JOB_LATENCY = Histogram(
    "gpuportal_e2e_job_scheduling_latency_milliseconds",
    "From a job's submission to the cycle that bound its gang.",
    buckets=(*MILLISECOND_BUCKETS, 300_000, 900_000, 3_600_000, 14_400_000, 86_400_000),
)
PHASE_DURATION = Histogram(
    "gpuportal_cycle_phase_duration_seconds",
    "Time of each phase of the scheduling cycle.",
    ["phase"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
)
CYCLES = Counter("gpuportal_cycles_total", "Scheduling cycles run.", ["result"])
BINDS = Counter("gpuportal_binds_total", "Pods bound to a node by the scheduling cycle.")
EVICTIONS = Counter(
    "gpuportal_evictions_total", "Pods evicted, by the action that chose them.", ["action"]
)
RECONCILE_ERRORS = Counter(
    "gpuportal_reconcile_errors_total", "Pod creations or deletions the cluster refused or failed."
)
RECONCILE_OPERATIONS = Counter(
    "gpuportal_reconcile_operations_total", "Pods created or deleted by reconcile.", ["operation"]
)
START_FAILURES = Counter(
    "gpuportal_start_failures_total",
    "Failed starts of a job's pods, by kind (portal.jobs.backoff.Kind: kubelet-refused, "
    "image-pull, container, start-timeout, quota, name-taken, node-taken).",
    ["reason"],
)


def start_failures_counted(kinds: Iterable[str]) -> None:
    """Count failed start attempts as they are kept on their jobs."""
    for kind in kinds:
        START_FAILURES.labels(str(kind)).inc()


def cycle_observed(*, cycle: CycleRun, report: ReconcileReport | None) -> None:
    try:
        _record(cycle, report)
    except Exception:
        logger.exception("could not record the figures of scheduling cycle %s", cycle.id)


def _record(cycle: CycleRun, report: ReconcileReport | None) -> None:
    duration_ms = (cycle.finished_at - cycle.started_at).total_seconds() * 1000
    evictions = _evictions_by_action(cycle)
    figures = {
        "event": "cycle",
        "cycle_id": cycle.id,
        "duration_ms": round(duration_ms, 1),
        **{f"{phase}_ms": _rounded(getattr(cycle, f"{phase}_ms")) for phase in PHASES},
        "binds": cycle.binds,
        "evictions": sum(evictions.values()),
        "evictions_by_action": evictions,
        "pending_jobs": cycle.pending_jobs,
        "pods_created": len(report.created) if report else 0,
        "pods_deleted": len(report.deleted) if report else 0,
        "reconcile_errors": len(report.errors) if report else 0,
        "error": cycle.error or None,
    }
    level = logging.WARNING if cycle.error else logging.INFO
    logger.log(
        level, "scheduling cycle %s finished in %.0f ms", cycle.id, duration_ms, extra=figures
    )

    E2E_LATENCY.observe(duration_ms)
    for phase in PHASES:
        value = getattr(cycle, f"{phase}_ms")
        if value is not None:
            PHASE_DURATION.labels(phase).observe(value / 1000)
    CYCLES.labels("error" if cycle.error else "ok").inc()
    BINDS.inc(cycle.binds)
    for action, count in evictions.items():
        EVICTIONS.labels(action).inc(count)
    if report is not None:
        RECONCILE_ERRORS.inc(len(report.errors))
        RECONCILE_OPERATIONS.labels("create").inc(len(report.created))
        RECONCILE_OPERATIONS.labels("delete").inc(len(report.deleted))
    if cycle.binds:
        for waited in _admission_waits_ms(cycle):
            JOB_LATENCY.observe(waited)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _evictions_by_action(cycle: CycleRun) -> dict[str, int]:
    """Every PreemptionEvent row of the cycle (a gang broken by one eviction adds the rest of
    its pods), by action; no query for the usual cycle that evicted nothing."""
    if not cycle.evictions:
        return {}
    rows = (
        PreemptionEvent.objects.filter(cycle=cycle)
        .values_list("action")
        .annotate(n=Count("id"))
        .order_by()
    )
    return dict(rows)


def _admission_waits_ms(cycle: CycleRun) -> list[float]:
    """Jobs this cycle admitted: still `admitted` (observe marks them running next cycle), and
    the status index keeps this off the whole job table."""
    rows = Job.objects.filter(
        status=Job.Status.ADMITTED,
        admitted_at__gte=cycle.started_at,
        admitted_at__lte=cycle.finished_at,
    ).values_list("submitted_at", "admitted_at")
    return [(admitted - submitted).total_seconds() * 1000 for submitted, admitted in rows]
