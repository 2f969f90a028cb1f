"""The figures a cycle reports (log event, worker counters) equal what it wrote."""

import logging

import pytest
from django.db.models import Sum
from prometheus_client import REGISTRY

from portal.jobs.models import Job
from portal.scheduling.models import CycleRun, PreemptionEvent
from scheduler.adapters import cycle_metrics
from scheduler.adapters.cluster.base import ClusterError
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.portal.ops.scenario import Clock, busy_cluster, run_cycles
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db


def value(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def counters() -> dict[str, float]:
    return {
        "binds": value("gpuportal_binds_total"),
        "reclaim": value("gpuportal_evictions_total", action="reclaim"),
        "ok": value("gpuportal_cycles_total", result="ok"),
        "error": value("gpuportal_cycles_total", result="error"),
        "e2e": value("gpuportal_e2e_scheduling_latency_milliseconds_count"),
        "core": value("gpuportal_cycle_phase_duration_seconds_count", phase="core"),
        "jobs": value("gpuportal_e2e_job_scheduling_latency_milliseconds_count"),
        "created": value("gpuportal_reconcile_operations_total", operation="create"),
        "reconcile_errors": value("gpuportal_reconcile_errors_total"),
    }


def delta(before: dict, after: dict) -> dict:
    return {key: after[key] - before[key] for key in before}


def test_worker_counters_equal_what_the_cycles_wrote(nlp_queue, vision_queue):
    before = counters()
    busy_cluster(nlp_queue, vision_queue, clock=Clock())
    change = delta(before, counters())

    cycles = CycleRun.objects.count()
    assert change["ok"] == cycles
    assert change["error"] == 0
    assert change["e2e"] == cycles
    assert change["core"] == cycles
    assert change["binds"] == CycleRun.objects.aggregate(n=Sum("binds"))["n"] == 3
    assert change["reclaim"] == PreemptionEvent.objects.filter(action="reclaim").count() == 1
    assert change["jobs"] == Job.objects.filter(admitted_at__isnull=False).count() == 3
    assert change["created"] == 3  # one pod per bound replica
    assert change["reconcile_errors"] == 0


def test_one_log_event_per_cycle_carries_its_figures(nlp_queue, vision_queue, caplog):
    caplog.set_level(logging.INFO, logger="scheduler.cycle")
    busy_cluster(nlp_queue, vision_queue, clock=Clock())
    events = [r for r in caplog.records if getattr(r, "event", None) == "cycle"]
    runs = list(CycleRun.objects.order_by("id"))
    assert [e.cycle_id for e in events] == [run.id for run in runs]
    for event, run in zip(events, runs):
        assert (event.binds, event.evictions, event.pending_jobs) == (
            run.binds,
            PreemptionEvent.objects.filter(cycle=run).count(),
            run.pending_jobs,
        )
        assert event.core_ms == pytest.approx(run.core_ms, abs=0.1)
    reclaim = next(e for e in events if e.evictions)
    assert reclaim.evictions_by_action == {"reclaim": 1}


class RefusingBackend(SimulatedBackend):
    """A cluster whose API refuses every pod creation."""

    def create_pods(self, pods):
        return [ClusterError(f"admission refused {pod.name}") for pod in pods]


def test_reconcile_errors_are_counted_and_logged(nlp_queue, researcher, caplog):
    from tests.factories import NodeFactory

    NodeFactory(name="gpu-worker-1")
    clock = Clock()
    backend = RefusingBackend(default_run_seconds=600, now=clock)
    submit_job(researcher, nlp_queue, "refused", replicas=2, gpus=1)
    before = counters()
    caplog.set_level(logging.INFO, logger="scheduler.cycle")
    run_cycles(backend, clock, 1)
    assert delta(before, counters())["reconcile_errors"] == 2
    (event,) = [r for r in caplog.records if getattr(r, "event", None) == "cycle"]
    assert event.reconcile_errors == 2
    assert event.levelno == logging.WARNING  # the cycle recorded an error
    assert "admission refused" in event.error


def test_a_failure_to_record_never_breaks_the_cycle(nlp_queue, monkeypatch, caplog):
    def broken(*args):
        raise RuntimeError("metrics backend gone")

    monkeypatch.setattr(cycle_metrics, "_record", broken)
    clock = Clock()
    run = scheduling_cycle_run(
        backend=SimulatedBackend(default_run_seconds=600, now=clock), now=clock
    )
    assert run.finished_at is not None
    assert not run.error
    assert "could not record the figures of scheduling cycle" in caplog.text
