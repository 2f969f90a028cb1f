"""The cycle's database fence: what a cycle may still write when the rows moved under it.

Each test replays an interleaving deterministically in one process: the first cycle is held
between its snapshot and its persist (by wrapping the core) while another cycle, a cancel or a
lost lock happens. On SQLite and on PostgreSQL alike.
"""

import threading

import pytest
from django.db import connection

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.jobs.services import job_cancel
from portal.scheduling.models import CycleRun
from portal.tenants.models import Membership
from scheduler.adapters import observe as observe_module
from scheduler.adapters import orchestrator as cycle_module
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.lock import LeaseLost
from scheduler.adapters.orchestrator import decisions_persist_fenced, scheduling_cycle_run
from scheduler.adapters.revalidate import WITHDRAWN_NO_ROOM
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.cycle import run_cycle
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def backend():
    return SimulatedBackend(default_run_seconds=600)


@pytest.fixture
def alice(nlp):
    user = UserFactory(username="alice")
    MembershipFactory(user=user, tenant=nlp, role=Membership.Role.RESEARCHER)
    return user


def submit(user, queue, name, *, replicas=1, gpus=8, priority=0):
    return submit_job(user, queue, name, replicas=replicas, gpus=gpus, priority=priority)


def hold_core(monkeypatch, meanwhile):
    """The next cycle runs `meanwhile()` after its core decided and before it persists."""
    calls = []

    def core(snapshot, conf):
        result = run_cycle(snapshot, conf)
        if not calls:
            calls.append(True)
            meanwhile()
        return result

    monkeypatch.setattr(cycle_module, "run_cycle_paused", core)


def active_gpus(node_name):
    placements = Placement.objects.filter(node_name=node_name, state__in=Placement.ACTIVE_STATES)
    return sum(placements.values_list("gpus", flat=True))


def test_a_cancel_between_snapshot_and_persist_is_not_undone(
    alice, nlp_queue, backend, monkeypatch
):
    NodeFactory(name="gpu-worker-1")
    job = submit(alice, nlp_queue, "cancelled-meanwhile")
    hold_core(monkeypatch, lambda: job_cancel(job=job, actor=alice))

    run = scheduling_cycle_run(backend=backend)

    job.refresh_from_db()
    assert job.status == Job.Status.CANCELLED
    assert not Placement.objects.filter(job=job).exists()
    assert not SimulatedPod.objects.exists()
    assert run.binds == 0
    assert run.error == ""  # a cancel is ordinary, not an anomaly


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="SQLite answers the conflicting cancel with 'database is locked' instead of waiting",
)
def test_a_cancel_committed_while_observe_runs_is_not_overwritten(
    alice, nlp_queue, backend, monkeypatch
):
    NodeFactory(name="gpu-worker-1")
    job = submit(alice, nlp_queue, "cancelled-during-observe")
    scheduling_cycle_run(backend=backend)
    # As the cycle that bound it left it (submit's own kick may have run more cycles): the
    # next observation finds the pod running and moves the job to running.
    Job.objects.filter(pk=job.pk).update(status=Job.Status.ADMITTED)
    assert SimulatedPod.objects.count() == 1
    advance = observe_module._jobs_advance
    outcome = []

    def cancel(job_id):
        try:
            job_cancel(job=Job.objects.get(pk=job_id), actor=alice)
            outcome.append("cancelled")
        except Exception as error:
            outcome.append(error)
        finally:
            connection.close()

    def cancel_between_read_and_write(jobs, *args):
        # The placements and jobs are read; the web's cancel arrives before observe writes.
        # Unlocked rows would let it commit here and be overwritten by the status below;
        # locked, it waits for observe to commit and applies on top.
        if not threads:  # once: the cancel's own kick runs a cycle (eager in tests)
            canceller = threading.Thread(target=cancel, args=(job.pk,))
            canceller.start()
            canceller.join(timeout=1)
            threads.append(canceller)
        return advance(jobs, *args)

    threads = []
    monkeypatch.setattr(observe_module, "_jobs_advance", cancel_between_read_and_write)
    scheduling_cycle_run(backend=backend)
    threads[0].join(timeout=30)

    assert outcome == ["cancelled"]
    assert Job.objects.get(pk=job.pk).status == Job.Status.CANCELLED


def test_a_stale_snapshot_cannot_overfill_a_node(alice, nlp_queue, backend):
    NodeFactory(name="gpu-worker-1")
    early = submit(alice, nlp_queue, "early")
    stale = snapshot_build(now=Job.objects.get(pk=early.pk).submitted_at)
    decided = run_cycle(stale.snapshot, stale.conf)
    assert [bind.job for bind in decided.binds] == [str(early.pk)]
    # Meanwhile another cycle gives the node to a more urgent job.
    urgent = submit(alice, nlp_queue, "urgent", priority=100)
    other = scheduling_cycle_run(backend=backend)
    assert list(Placement.objects.values_list("job_id", flat=True)) == [urgent.pk]

    late = CycleRun.objects.create()
    notes = decisions_persist_fenced(
        bundle=stale, result=decided, cycle=late, now=other.finished_at
    )

    assert active_gpus("gpu-worker-1") == 8
    assert list(Placement.objects.values_list("job_id", flat=True)) == [urgent.pk]
    early.refresh_from_db()
    assert early.status == Job.Status.PENDING
    assert early.pending_reason == WITHDRAWN_NO_ROOM.format(node="gpu-worker-1")
    assert len(notes) == 1
    assert f"jobs without room ['{early.pk}']" in notes[0]


def test_a_stale_snapshot_cannot_place_a_replica_twice(alice, nlp_queue, backend):
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    job = submit(alice, nlp_queue, "once", replicas=2, gpus=4)
    stale = snapshot_build(now=Job.objects.get(pk=job.pk).submitted_at)
    decided = run_cycle(stale.snapshot, stale.conf)
    scheduling_cycle_run(backend=backend)  # places both replicas first

    decisions_persist_fenced(
        bundle=stale, result=decided, cycle=CycleRun.objects.create(), now=job.submitted_at
    )

    placements = Placement.objects.filter(job=job)
    assert placements.count() == 2
    assert sorted(placements.values_list("replica", flat=True)) == [0, 1]


def test_overlapping_cycles_leave_one_placement_per_gpu(alice, nlp_queue, backend, monkeypatch):
    """A cycle held between core and persist while a second whole cycle runs: the first one's
    binds for GPUs the second one gave away are withdrawn, the rest of its work stands."""
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    first = submit(alice, nlp_queue, "first")

    def second_cycle():
        submit(alice, nlp_queue, "urgent-1", priority=100)
        submit(alice, nlp_queue, "urgent-2", priority=100)
        scheduling_cycle_run(backend=backend)

    hold_core(monkeypatch, second_cycle)
    held = scheduling_cycle_run(backend=backend)

    assert active_gpus("gpu-worker-1") == 8
    assert active_gpus("gpu-worker-2") == 8
    assert Placement.objects.filter(job=first).count() == 0
    assert Job.objects.get(pk=first.pk).status == Job.Status.PENDING
    assert "jobs without room" in held.error
    assert SimulatedPod.objects.count() == 2


def test_a_cycle_that_lost_its_lock_writes_nothing(alice, nlp_queue, backend):
    NodeFactory(name="gpu-worker-1")
    job = submit(alice, nlp_queue, "unlucky")

    def lost():
        raise LeaseLost("lost the cycle lock: test")

    run = scheduling_cycle_run(backend=backend, checkpoint=lost)

    assert run.error == "lost the cycle lock: test"
    assert run.finished_at is not None
    assert not Placement.objects.filter(job=job).exists()
    assert not SimulatedPod.objects.exists()


def test_a_lock_lost_once_reconcile_began_stops_the_cluster_calls(alice, nlp_queue, backend):
    NodeFactory(name="gpu-worker-1")
    job = submit(alice, nlp_queue, "four", replicas=4, gpus=2)
    checks = []

    def lost_inside_reconcile():
        # Checked before persist, before reconcile, then before every call to the cluster.
        checks.append(True)
        if len(checks) > 2:
            raise LeaseLost("lost the cycle lock: test")

    run = scheduling_cycle_run(backend=backend, checkpoint=lost_inside_reconcile)

    assert not SimulatedPod.objects.exists()
    assert run.error.count("lost the cycle lock") == 4  # each pod reports why it was skipped
    assert Placement.objects.filter(job=job).count() == 4  # persist had finished before
    scheduling_cycle_run(backend=backend)  # the next holder of the lock converges
    assert SimulatedPod.objects.count() == 4
    assert Placement.objects.filter(job=job).count() == 4


def test_an_older_cycle_does_not_observe_after_a_newer_one_started(
    alice, nlp_queue, backend, monkeypatch
):
    NodeFactory(name="gpu-worker-1")
    job = submit(alice, nlp_queue, "observed")
    list_pods = backend.list_pods
    started = []

    def list_then_newer_cycle_starts():
        pods = list_pods()
        if not started:
            started.append(CycleRun.objects.create())
        return pods

    monkeypatch.setattr(backend, "list_pods", list_then_newer_cycle_starts)
    run = scheduling_cycle_run(backend=backend)

    assert run.error == (
        f"cycle {started[0].pk} started after this one, which stopped before its observe"
    )
    assert not Placement.objects.filter(job=job).exists()


def test_a_stale_snapshot_cannot_overfill_a_card_with_shares(alice, nlp_queue, backend):
    from decimal import Decimal

    NodeFactory(name="gpu-worker-1", gpu_count=1, gpu_memory_mib=81920)
    early = submit(alice, nlp_queue, "early", gpus=Decimal("0.5"))
    stale = snapshot_build(now=Job.objects.get(pk=early.pk).submitted_at)
    decided = run_cycle(stale.snapshot, stale.conf)
    assert [bind.job for bind in decided.binds] == [str(early.pk)]
    # Meanwhile another cycle gives three quarters of the card to a more urgent job.
    urgent = submit(alice, nlp_queue, "urgent", gpus=Decimal("0.75"), priority=100)
    other = scheduling_cycle_run(backend=backend)
    assert list(Placement.objects.values_list("job_id", flat=True)) == [urgent.pk]

    decisions_persist_fenced(
        bundle=stale, result=decided, cycle=CycleRun.objects.create(), now=other.finished_at
    )

    assert list(Placement.objects.values_list("job_id", flat=True)) == [urgent.pk]
    early.refresh_from_db()
    assert early.pending_reason == WITHDRAWN_NO_ROOM.format(node="gpu-worker-1")
