"""Two Celery workers (thread pools, one with beat) scheduling one PostgreSQL database while
threads submit jobs and fire cycle kicks as fast as they can.

Afterwards the database must show: no two cycles ran at once, no node ever held more GPUs than
it has, no replica was ever placed twice, and every submitted job exists once and ran to
completion. The first test keeps the real lock, with a TTL shorter than some cycles (the hole a
lock without renewal had); the second breaks the lock on purpose, so cycles do overlap and only
the database fence stands between them and a double booking.
"""

from __future__ import annotations

import random
import threading
import time
from contextlib import contextmanager

import pytest
from django.db import connection

from portal.cluster.models import Placement, SimulatedPod
from portal.jobs.models import Job
from portal.scheduling.models import CycleRun
from portal.tenants.models import Membership
from scheduler.adapters.orchestrator import ABANDONED
from scheduler.tasks import scheduling_cycle_run
from tests.factories import MembershipFactory, NodeFactory, QueueFactory, TenantFactory, UserFactory
from tests.scheduler.conftest import (
    REAL_WORKERS,
    current_state_violations,
    cycle_overlaps,
    placement_history_violations,
    submit_job,
    wait_for,
)

pytestmark = REAL_WORKERS
SUBMIT_SECONDS = 4
DRAIN_SECONDS = 120
LOCK_TTL = 1.5


@pytest.fixture
def tenants():
    """Four 8-GPU nodes, three queues of different weights and one researcher in all."""
    for i in range(1, 5):
        NodeFactory(name=f"gpu-worker-{i}")
    user = UserFactory(username="alice")
    queues = []
    for weight in (1, 2, 3):
        tenant = TenantFactory(name=f"team-{weight}")
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
        queues.append(QueueFactory(tenant=tenant, name=f"queue-{weight}", weight=weight))
    return user, queues


@contextmanager
def kicking(every: float = 0.1):
    """Queue a cycle every `every` seconds for the duration of the block."""
    stop = threading.Event()

    def kicker() -> None:
        while not stop.wait(every):
            scheduling_cycle_run.delay()

    thread = threading.Thread(target=kicker)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=30)


def submit_concurrently(user, queues) -> list[str]:
    """One thread per queue submitting jobs for SUBMIT_SECONDS; the names submitted."""
    submitted: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def submitter(index: int, queue) -> None:
        rng = random.Random(index)
        try:
            while not stop.is_set():
                replicas = rng.choice([1, 1, 2, 3])
                job = submit_job(
                    user,
                    queue,
                    f"{queue.name}-{rng.randrange(10**9)}",
                    replicas=replicas,
                    gpus=rng.choice([1, 2, 4]),
                    min_available=replicas,
                    duration=rng.choice([1, 2]),
                )
                submitted.append(job.name)
                time.sleep(rng.uniform(0.15, 0.5))
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=submitter, args=(i, q)) for i, q in enumerate(queues)]
    for thread in threads:
        thread.start()
    time.sleep(SUBMIT_SECONDS)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    return submitted


def wait_until_all_ran(submitted, workers):
    def drained() -> bool:
        workers.check_alive()
        done = Job.objects.filter(name__in=submitted, status=Job.Status.SUCCEEDED).count()
        return done == len(submitted) and not SimulatedPod.objects.exists()

    wait_for(
        drained,
        "every submitted job to succeed and its pods to be cleaned up",
        timeout=DRAIN_SECONDS,
        on_timeout=workers.logs,
    )


def assert_every_job_ran_exactly_once(submitted):
    names = list(Job.objects.filter(name__in=submitted).values_list("name", flat=True))
    assert sorted(names) == sorted(submitted)
    for job in Job.objects.filter(name__in=submitted).prefetch_related("tasks", "placements"):
        replicas = sum(task.replicas for task in job.tasks.all())
        succeeded = [p for p in job.placements.all() if p.state == Placement.State.SUCCEEDED]
        assert len(succeeded) == replicas, job.name


def test_two_workers_never_run_two_cycles_at_once_even_past_the_lock_ttl(tenants, workers):
    user, queues = tenants
    # One persist of each worker stalls longer than the lock's TTL, inside its
    # transaction: only a renewed lock keeps the other threads' kicks from starting cycles.
    slow = {
        "lock_ttl": LOCK_TTL,
        "pause": {"at": "persist", "seconds": LOCK_TTL + 0.5, "every": 2, "times": 1},
    }
    workers.start("stress-1", beat=True, pool="threads", concurrency=2, hooks=slow)
    workers.start("stress-2", pool="threads", concurrency=2, hooks=slow)
    workers.wait_ready()

    with kicking():
        submitted = submit_concurrently(user, queues)
        wait_until_all_ran(submitted, workers)

    assert len(submitted) > 10
    assert CycleRun.objects.filter(persist_ms__gt=LOCK_TTL * 1000).exists(), "no long cycle"
    assert list(CycleRun.objects.exclude(error="").values_list("id", "error")) == []
    assert cycle_overlaps() == []
    assert placement_history_violations() == []
    assert current_state_violations() == []
    assert_every_job_ran_exactly_once(submitted)


def test_with_the_lock_broken_the_database_fence_still_prevents_double_booking(tenants, workers):
    user, queues = tenants
    # Every cycle believes it holds the lock, and lingers after its snapshot so that cycles
    # started by beat and by kicks overlap.
    broken = {"no_lock": True, "pause": {"at": "snapshot", "seconds": 0.3}}
    workers.start("broken-1", beat=True, hooks=broken)
    workers.start("broken-2", hooks=broken)
    workers.wait_ready()

    with kicking(every=0.2):
        submitted = submit_concurrently(user, queues)
        wait_until_all_ran(submitted, workers)

    assert cycle_overlaps(), "the cycles never overlapped: nothing was tested"
    assert placement_history_violations() == []
    assert current_state_violations() == []
    assert_every_job_ran_exactly_once(submitted)
    # What overlapping cycles may report: withdrawn decisions, an observe refused after a
    # newer cycle started, and (for a cycle still running) the mark a newer one leaves on it.
    expected = ("withdrawn", "started after this one", ABANDONED)
    unexpected = [
        (run_id, error)
        for run_id, error in CycleRun.objects.exclude(error="").values_list("id", "error")
        if not any(reason in error for reason in expected)
    ]
    assert unexpected == []
