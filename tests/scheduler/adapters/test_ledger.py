"""The usage ledger through the cycle: booked as the cycle persists, adding up to the
placements' own durations, split at the guarantee, lost work on evictions, months closed."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.accounting.models import LedgerClock, LedgerEntry
from portal.cluster.models import Placement
from portal.tenants.models import Membership
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from tests.factories import MembershipFactory, NodeFactory, UserFactory
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
START = datetime(2026, 11, 30, 23, 40, tzinfo=UTC)
MILLI = 1000


class Clock:
    def __init__(self, at: datetime) -> None:
        self.now = at

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock():
    return Clock(START)


@pytest.fixture
def backend(clock):
    return SimulatedBackend(default_run_seconds=600, now=clock)


@pytest.fixture
def alice(nlp, vision):
    user = UserFactory(username="alice")
    for tenant in (nlp, vision):
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return user


def _guarantee(*rows, gpus):
    for row in rows:
        row.guarantee_gpus = gpus
        row.save()


def _cycles(backend, clock, *, count, seconds):
    for _ in range(count):
        run = scheduling_cycle_run(backend=backend, now=clock)
        assert run.error == ""
        clock.now += timedelta(seconds=seconds)


def _ledger_gpu_total():
    return sum(
        e.gpu_milli_seconds_within + e.gpu_milli_seconds_borrowed for e in LedgerEntry.objects.all()
    )


def _placements_gpu_total():
    """Each placement's own duration times its GPUs: ended ones to their end, active ones to
    where the ledger has booked."""
    booked = LedgerClock.objects.get().booked_until
    total = 0
    for placement in Placement.objects.all():
        end = placement.ended_at or booked
        total += int((end - placement.started_at).total_seconds()) * placement.gpus * MILLI
    return total


def test_the_ledger_adds_up_to_the_placements_own_durations(
    alice, nlp, nlp_queue, vision_queue, backend, clock
):
    NodeFactory(name="gpu-worker-1")
    for i in range(3):
        submit_job(alice, nlp_queue, f"short-{i}", gpus=2, duration=90 + 70 * i)
    submit_job(alice, vision_queue, "long", gpus=2, replicas=2, duration=10_000)

    _cycles(backend, clock, count=60, seconds=7)

    ended = Placement.objects.filter(ended_at__isnull=False)
    assert ended.count() == 3  # the short jobs finished inside the run, the long one did not
    assert all(p.ended_at > p.started_at for p in ended)
    assert _ledger_gpu_total() == _placements_gpu_total() > 0
    # Summed the other way: per placement, through its own queue and user rows.
    by_queue = {
        e.queue_id: e.gpu_milli_seconds_within + e.gpu_milli_seconds_borrowed
        for e in LedgerEntry.objects.all()
    }
    long_job = Placement.objects.filter(job__name="long")
    assert by_queue[vision_queue.id] == sum(
        int((LedgerClock.objects.get().booked_until - p.started_at).total_seconds()) * 2 * MILLI
        for p in long_job
    )


def test_the_guarantee_covers_the_oldest_placements_and_the_rest_is_borrowed(
    alice, nlp, nlp_queue, backend, clock
):
    NodeFactory(name="gpu-worker-1")
    _guarantee(nlp, nlp_queue, gpus=3)
    first = submit_job(alice, nlp_queue, "first", gpus=2, duration=10_000)
    _cycles(backend, clock, count=1, seconds=10)
    submit_job(alice, nlp_queue, "second", gpus=2, duration=10_000)

    _cycles(backend, clock, count=5, seconds=10)

    (entry,) = LedgerEntry.objects.all()
    first_seconds = 50  # booked up to the last cycle: 10 s before the second job, 40 s after
    second_seconds = 40
    # first: both GPUs within; second: 1 GPU within (3 - 2), 1 borrowed.
    assert entry.gpu_milli_seconds_within == 2 * MILLI * first_seconds + MILLI * second_seconds
    assert entry.gpu_milli_seconds_borrowed == MILLI * second_seconds
    assert Placement.objects.get(job=first).started_at == START


def test_an_eviction_books_the_victims_work_as_lost(
    alice, vision, nlp_queue, vision_queue, backend, clock
):
    NodeFactory(name="gpu-worker-1")
    _guarantee(vision, vision_queue, gpus=4)
    submit_job(alice, nlp_queue, "borrower", replicas=8, min_available=1, duration=10_000)
    _cycles(backend, clock, count=1, seconds=300)
    submit_job(alice, vision_queue, "owner", replicas=4, duration=10_000)

    _cycles(backend, clock, count=3, seconds=5)

    entry = LedgerEntry.objects.get(queue=nlp_queue)
    # Four of the borrower's pods were reclaimed after 300 s of work each.
    assert entry.gpu_milli_seconds_lost == 4 * MILLI * 300
    assert entry.cpu_milli_seconds_lost == 4 * 1000 * 300
    assert entry.gpu_milli_seconds_borrowed >= entry.gpu_milli_seconds_lost
    assert not LedgerEntry.objects.filter(queue=vision_queue, gpu_milli_seconds_lost__gt=0)


def test_a_cycle_books_into_its_own_month_and_never_into_a_past_one(
    alice, nlp_queue, backend, clock
):
    NodeFactory(name="gpu-worker-1")
    submit_job(alice, nlp_queue, "train", gpus=1, duration=100_000)
    _cycles(backend, clock, count=2, seconds=1150)  # 23:40 and 23:59:10
    november = {e.pk: e.gpu_milli_seconds_borrowed for e in LedgerEntry.objects.all()}
    assert [e.month for e in LedgerEntry.objects.all()] == [datetime(2026, 11, 1).date()]

    _cycles(backend, clock, count=2, seconds=60)  # 00:18:20 on 1 December, then a minute on

    assert {
        e.pk: e.gpu_milli_seconds_borrowed
        for e in LedgerEntry.objects.filter(month=datetime(2026, 11, 1).date())
    } == november
    december = LedgerEntry.objects.get(month=datetime(2026, 12, 1).date())
    assert december.gpu_milli_seconds_borrowed == MILLI * (1150 + 60)
    assert _ledger_gpu_total() == _placements_gpu_total()


def test_a_share_of_a_gpu_is_booked_at_its_milli_gpu(nlp_queue):
    from types import SimpleNamespace

    from scheduler.adapters.ledger import ledger_book
    from tests.factories import PlacementFactory

    PlacementFactory(
        task__job__queue=nlp_queue,
        task__gpus=0,
        task__cpu_millis=500,
        gpus=0,
        gpu_milli=250,
        state=Placement.State.RUNNING,
        started_at=START,
    )
    bundle = SimpleNamespace(index=SimpleNamespace(queues={}))
    result = SimpleNamespace(queues={})

    for seconds in (0, 40, 100):
        ledger_book(
            bundle=bundle, result=result, evicted=set(), now=START + timedelta(seconds=seconds)
        )

    (entry,) = LedgerEntry.objects.all()
    assert entry.gpu_milli_seconds_borrowed == 250 * 100  # no guarantee: all borrowed
    assert entry.cpu_milli_seconds_borrowed == 500 * 100
    assert entry.gpu_milli_seconds_within == 0
