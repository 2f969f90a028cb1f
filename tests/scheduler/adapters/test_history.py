"""The history the snapshot carries for the core, and the kind and run flag persist writes."""

from datetime import UTC, datetime, timedelta

import pytest

from jobspec.labels import pod_name
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun, PreemptionEvent
from portal.tenants.models import Membership
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.history import (
    expected_ends,
    last_rescheduling,
    rescheduled_pods,
    snapshot_history,
)
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.core.config import default_conf, parse_conf_text
from scheduler.core.types import Rescheduled
from tests.factories import (
    CycleRunFactory,
    JobFactory,
    MembershipFactory,
    NodeFactory,
    PreemptionEventFactory,
    QueueFactory,
    UserFactory,
)
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ago(**delta) -> datetime:
    return NOW - timedelta(**delta)


def test_last_rescheduling_is_the_latest_cycle_that_ran_it():
    assert last_rescheduling() is None
    CycleRunFactory(started_at=_ago(minutes=10), rescheduling_ran=True)
    CycleRunFactory(started_at=_ago(minutes=5), rescheduling_ran=True)
    CycleRunFactory(started_at=_ago(minutes=1))
    assert last_rescheduling() == _ago(minutes=5).timestamp()


def test_rescheduled_pods_within_the_window_are_named_as_the_core_names_them():
    job = JobFactory()
    moved = PreemptionEventFactory(
        victim_job=job,
        victim_task_name="worker-1",
        node_name="gpu-worker-1",
        action=PreemptionEvent.Action.RESCHEDULING,
        occurred_at=_ago(minutes=30),
    )
    PreemptionEventFactory(  # older than the seed conf's 1 h budget window
        victim_job=job,
        victim_task_name="worker-0",
        action=PreemptionEvent.Action.RESCHEDULING,
        occurred_at=_ago(hours=2),
    )
    PreemptionEventFactory(victim_job=job, occurred_at=_ago(minutes=1))  # a reclaim
    assert rescheduled_pods(conf=default_conf(), now=NOW) == (
        Rescheduled(
            str(job.pk),
            pod_name(job.pk, "worker", 1),
            "gpu-worker-1",
            moved.occurred_at.timestamp(),
        ),
    )


def test_without_loop_guards_no_history_is_read():
    PreemptionEventFactory(action=PreemptionEvent.Action.RESCHEDULING, occurred_at=_ago(minutes=1))
    conf = parse_conf_text(
        'actions: "allocate, preempt"\ntiers:\n- plugins:\n  - name: rescheduling\n'
    )
    assert rescheduled_pods(conf=conf, now=NOW) == ()


def test_expected_ends_of_running_jobs_that_declared_a_duration():
    running = JobFactory(
        status=Job.Status.RUNNING, started_at=_ago(minutes=10), expected_duration_seconds=3600
    )
    JobFactory(status=Job.Status.RUNNING, started_at=_ago(minutes=10))  # no duration
    JobFactory(status=Job.Status.PENDING, expected_duration_seconds=60)
    assert expected_ends() == ((str(running.pk), _ago(minutes=10).timestamp() + 3600),)
    assert set(snapshot_history(conf=default_conf(), now=NOW)) == {
        "last_rescheduling",
        "rescheduled",
        "expected_ends",
    }


def test_a_cycle_persists_the_kind_and_that_rescheduling_ran(nlp):
    for i in range(1, 5):
        NodeFactory(name=f"gpu-worker-{i}")
    queue = QueueFactory(tenant=nlp, name="nlp-train", capability_gpus=24)
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    too_big = submit_job(user, queue, "bert-pretrain", replicas=4, gpus=8)
    fits = submit_job(user, queue, "tokenizer-eval", replicas=1, gpus=1)
    waits = submit_job(user, queue, "llama-finetune", replicas=3, gpus=8)

    backend = SimulatedBackend(default_run_seconds=600, now=lambda: NOW)
    run = scheduling_cycle_run(backend=backend, now=lambda: NOW)

    assert CycleRun.objects.get(pk=run.pk).rescheduling_ran  # the first cycle runs it
    too_big.refresh_from_db()
    assert too_big.pending_kind == Job.PendingKind.NEVER
    assert too_big.pending_reason == (
        "can never run as submitted: its gang needs 32 GPUs at once and queue nlp-train's "
        "capability is 24 GPUs; lower the request to 24 GPUs or ask a lead of nlp to raise the "
        "capability"
    )
    fits.refresh_from_db()
    assert (fits.status, fits.pending_kind, fits.pending_reason) == (Job.Status.ADMITTED, "", "")
    waits.refresh_from_db()
    assert waits.pending_kind == Job.PendingKind.WAITS
    assert waits.pending_reason == (
        "job needs 24 GPUs (3 pods x 8); queue nlp-train capped at 24 GPUs with 1 allocated; 24 GPUs "
        "needed at once > 23 left of its capability (24 - 1 allocated): 1 GPU short; it fits "
        "once the running pods of its queue free 1 GPU; a request of at most 23 GPUs (8 GPUs per "
        "pod at most) would fit now; GPUs idle: 31, enough for it now, but beyond what queue "
        "nlp-train may hold (its capability, borrowing limit, or what other queues' guarantees "
        "keep for them)"
    )
    later = scheduling_cycle_run(backend=backend, now=lambda: NOW + timedelta(seconds=5))
    assert not CycleRun.objects.get(pk=later.pk).rescheduling_ran  # 5 s < the 5 min interval
