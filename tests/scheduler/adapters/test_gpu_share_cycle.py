"""Shares of a GPU through the real cycle on the simulated cluster: placed, held and counted
in milli-GPU exactly."""

from decimal import Decimal

import pytest

from portal.cluster.models import Placement
from portal.cluster.selectors import gpus_allocated_per_queue, node_list_with_usage
from portal.jobs.services import job_submit
from portal.tenants.selectors import gpus_allocated_per_tenant
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.snapshot import snapshot_build
from tests.factories import NodeFactory
from tests.scheduler.adapters.test_orchestrator import Clock
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def backend(clock):
    return SimulatedBackend(default_run_seconds=600, now=clock)


@pytest.fixture
def team(researcher):
    return researcher


def test_quarter_gpus_are_placed_and_counted_exactly(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1", gpu_count=1, gpu_memory_mib=81920)
    job = submit_job(team, nlp_queue, "infer", replicas=3, gpus=Decimal("0.25"), min_available=1)

    run = scheduling_cycle_run(backend=backend, now=clock)

    assert run.error == ""
    assert run.binds == 3
    placements = Placement.objects.filter(job=job, state__in=Placement.ACTIVE_STATES)
    assert sorted(p.gpu_milli for p in placements) == [250, 250, 250]
    assert all(p.gpus == 0 for p in placements)
    assert gpus_allocated_per_queue()[nlp_queue.pk] == 0.75
    assert gpus_allocated_per_tenant(tenant_ids=[nlp_queue.tenant_id]) == {
        nlp_queue.tenant_id: 0.75
    }
    assert node_list_with_usage(user=team).get().gpu_milli_used == 750


def test_a_memory_request_costs_its_share_of_the_device(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1", gpu_count=1, gpu_memory_mib=40960)
    job = job_submit(
        submitter=team,
        queue=nlp_queue,
        name="infer",
        tasks=[{"name": "server", "image": "s:1", "gpu_memory_mib": 10240}],
    )

    scheduling_cycle_run(backend=backend, now=clock)

    assert Placement.objects.get(job=job).gpu_milli == 250  # 10 of 40 GiB


def test_shares_never_exceed_the_card(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1", gpu_count=1, gpu_memory_mib=81920)
    submit_job(team, nlp_queue, "infer", replicas=5, gpus=Decimal("0.25"), min_available=1)

    run = scheduling_cycle_run(backend=backend, now=clock)

    assert run.binds == 4
    assert gpus_allocated_per_queue()[nlp_queue.pk] == 1


def test_placements_record_the_cards_the_core_picked(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1", gpu_count=2, gpu_memory_mib=81920)
    whole = submit_job(team, nlp_queue, "train", gpus=1)
    shares = submit_job(team, nlp_queue, "infer", replicas=2, gpus=Decimal("0.5"))

    scheduling_cycle_run(backend=backend, now=clock)

    assert [p.gpu_devices for p in Placement.objects.filter(job=whole)] == [[0]]
    # shares pack onto one card (the core's best fit), the other stays whole
    assert [p.gpu_devices for p in Placement.objects.filter(job=shares)] == [[1], [1]]
    assert Placement.objects.filter(job=shares).first().gpus_held_text == "0.5 of GPU 1"


def test_the_next_snapshot_books_the_cards_placements_hold(team, nlp_queue, backend, clock):
    NodeFactory(name="gpu-worker-1", gpu_count=2, gpu_memory_mib=81920)
    first = submit_job(team, nlp_queue, "a", gpus=Decimal("0.75"))
    scheduling_cycle_run(backend=backend, now=clock)
    second = submit_job(team, nlp_queue, "b", gpus=Decimal("0.5"))
    third = submit_job(team, nlp_queue, "c", gpus=Decimal("0.25"))

    bundle = snapshot_build(now=clock())
    held = [t for j in bundle.snapshot.jobs for t in j.tasks if t.node]
    assert [t.gpu_indices for t in held] == [tuple(Placement.objects.get(job=first).gpu_devices)]
    scheduling_cycle_run(backend=backend, now=clock)

    card = Placement.objects.get(job=first).gpu_devices
    # 0.25 fills the card the 0.75 is on; 0.5 goes to the other
    assert Placement.objects.get(job=third).gpu_devices == card
    assert Placement.objects.get(job=second).gpu_devices != card


def test_usage_samples_count_shares_exactly(team, nlp_queue, backend, clock):
    from portal.scheduling.models import QueueUsageSample
    from portal.tenants.models import TenantUsageSample

    NodeFactory(name="gpu-worker-1", gpu_count=1, gpu_memory_mib=81920)
    submit_job(team, nlp_queue, "infer", replicas=5, gpus=Decimal("0.25"), min_available=1)

    scheduling_cycle_run(backend=backend, now=clock)

    sample = QueueUsageSample.objects.get(queue=nlp_queue)
    assert (sample.gpus_allocated, sample.gpus_pending) == (1.0, 0.25)
    tenant = TenantUsageSample.objects.get(tenant=nlp_queue.tenant)
    assert tenant.gpus_allocated == 1.0
