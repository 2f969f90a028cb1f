"""A few cycles on the simulated cluster that leave running, pending and evicted jobs behind:
shared by the tests that check operations figures against the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from portal.tenants.models import Membership
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.conftest import submit_job


class Clock:
    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def busy_cluster(nlp_queue, vision_queue, *, clock: Clock) -> SimulatedBackend:
    """Two 8-GPU nodes; nlp fills both, then vision reclaims one; a 32-GPU job waits."""
    backend = SimulatedBackend(default_run_seconds=3600, now=clock)
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    user = UserFactory(username="alice")
    for tenant in (nlp_queue.tenant, vision_queue.tenant):
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    nlp_queue.weight = 1
    nlp_queue.guarantee_gpus = 2
    nlp_queue.capability_gpus = 16
    nlp_queue.save()
    for i in range(2):
        submit_job(user, nlp_queue, f"hog-{i}", gpus=8)
    run_cycles(backend, clock, 2)
    submit_job(user, vision_queue, "newcomer", gpus=8)
    submit_job(user, vision_queue, "too-big", replicas=4, gpus=8, min_available=4)
    run_cycles(backend, clock, 1)
    clock.advance(60)
    run_cycles(backend, clock, 3)
    return backend


def run_cycles(backend, clock: Clock, count: int) -> None:
    for _ in range(count):
        scheduling_cycle_run(backend=backend, now=clock)
        clock.advance(5)
