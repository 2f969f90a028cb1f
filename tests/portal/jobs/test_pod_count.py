"""The database's count of a tenant's pending pods (portal.jobs.pod_count) against a recount
of the rows, after every kind of write the portal and the cycle make: saves, queryset and bulk
updates, bulk inserts, deletes with their cascades, a job moved between tenants, folds."""

import importlib

import pytest
from django.db import connection, transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from portal.cluster.models import Placement
from portal.jobs import pod_count
from portal.jobs.lifecycle import SCHEDULED
from portal.jobs.models import Job, JobTask, TenantPodDelta
from portal.jobs.selectors import tenant_pending_pods, tenant_pending_pods_recount
from portal.jobs.services import job_cancel
from tests.factories import (
    JobFactory,
    JobTaskFactory,
    NodeFactory,
    PlacementFactory,
    QueueFactory,
    StaffFactory,
    TenantFactory,
)
from tests.portal.common.fuzzing import FORM_FUZZ

pytestmark = pytest.mark.django_db

postgresql_only = pytest.mark.skipif(
    not pod_count.counted_by_database(connection.vendor),
    reason="SQLite recounts the rows (pod_count.counted_by_database)",
)

migration = importlib.import_module("portal.jobs.migrations.0011_tenant_pod_delta")

STATUSES = [s.value for s in Job.Status]
STATES = [s.value for s in Placement.State]


def test_the_migrations_frozen_values_are_the_lifecycles():
    # A change to either needs a migration that installs the triggers again.
    assert set(migration.SCHEDULED) == {s.value for s in SCHEDULED}
    placed = {*Placement.ACTIVE_STATES, Placement.State.SUCCEEDED}
    assert set(migration.PLACED) == {s.value for s in placed} == set(pod_count.PLACED_STATES)


@pytest.fixture
def world():
    tenants = [TenantFactory(name=f"count-{i}") for i in range(2)]
    return {
        "queues": [QueueFactory(tenant=t) for t in tenants],
        "tenants": tenants,
        "node": NodeFactory(),
    }


def _agree(world):
    for tenant in world["tenants"]:
        counted = tenant_pending_pods(tenant_id=tenant.pk)
        assert counted == tenant_pending_pods_recount(tenant_id=tenant.pk), tenant.name


def _pick(draw, queryset):
    ids = list(queryset.order_by("pk").values_list("pk", flat=True))
    return draw(st.sampled_from(ids)) if ids else None


def _step(draw, world, op):  # noqa: C901 - one branch per kind of write
    queue = draw(st.sampled_from(world["queues"]))
    if op == "submit":
        job = JobFactory(queue=queue, status=draw(st.sampled_from(STATUSES)))
        for _ in range(draw(st.integers(1, 3))):
            JobTaskFactory(job=job, replicas=draw(st.integers(0, 4)))
    elif op == "bulk_submit":
        jobs = Job.objects.bulk_create(
            JobFactory.build(queue=queue, tenant=queue.tenant, submitter=world["user"], status=s)
            for s in draw(st.lists(st.sampled_from(STATUSES), min_size=1, max_size=3))
        )
        JobTask.objects.bulk_create(
            JobTaskFactory.build(job=job, replicas=draw(st.integers(1, 3))) for job in jobs
        )
    elif op == "status_save" and (pk := _pick(draw, Job.objects)):
        job = Job.objects.get(pk=pk)
        job.status = draw(st.sampled_from(STATUSES))
        job.save()
    elif op == "status_update":
        statuses = draw(st.lists(st.sampled_from(STATUSES), min_size=1, max_size=3))
        Job.objects.filter(status__in=statuses[1:] or statuses).update(status=statuses[0])
    elif op == "replicas" and (pk := _pick(draw, JobTask.objects)):
        JobTask.objects.filter(pk=pk).update(replicas=draw(st.integers(0, 5)))
    elif op == "place" and (pk := _pick(draw, JobTask.objects)):
        task = JobTask.objects.get(pk=pk)
        replica = Placement.objects.filter(task=task).count()
        state = draw(st.sampled_from(STATES))
        PlacementFactory(task=task, replica=replica, node=world["node"], state=state)
    elif op == "placement_state" and (pk := _pick(draw, Placement.objects)):
        placement = Placement.objects.get(pk=pk)
        placement.state = draw(st.sampled_from(STATES))
        placement.save(update_fields=["state"])
    elif op == "placements_bulk_state":
        ids = list(Placement.objects.values_list("pk", flat=True)[:5])
        Placement.objects.filter(pk__in=ids).update(state=draw(st.sampled_from(STATES)))
    elif op == "unplace" and (pk := _pick(draw, Placement.objects)):
        Placement.objects.filter(pk=pk).delete()
    elif op == "delete_task" and (pk := _pick(draw, JobTask.objects)):
        JobTask.objects.get(pk=pk).delete()
    elif op == "delete_job" and (pk := _pick(draw, Job.objects)):
        Job.objects.get(pk=pk).delete()
    elif op == "move" and (pk := _pick(draw, Job.objects)):
        Job.objects.filter(pk=pk).update(queue=queue, tenant=queue.tenant)
    elif op == "cancel" and (pk := _pick(draw, Job.objects.filter(status__in=SCHEDULED))):
        job_cancel(job=Job.objects.get(pk=pk), actor=world["user"])
    elif op == "fold":
        pod_count.tenant_pod_deltas_fold()


OPS = [
    "submit",
    "bulk_submit",
    "status_save",
    "status_update",
    "replicas",
    "place",
    "placement_state",
    "placements_bulk_state",
    "unplace",
    "delete_task",
    "delete_job",
    "move",
    "cancel",
    "fold",
]


@postgresql_only
@settings(FORM_FUZZ, max_examples=30)
@given(data=st.data())
def test_the_count_agrees_with_a_recount_after_every_write(world, data):
    # Each example from the same rows: its writes are rolled back at its end.
    with transaction.atomic():
        world["user"] = StaffFactory()
        for op in data.draw(st.lists(st.sampled_from(OPS), min_size=5, max_size=25)):
            _step(data.draw, world, op)
            _agree(world)
        transaction.set_rollback(True)


@postgresql_only
def test_a_fold_leaves_one_row_per_tenant_and_drops_deleted_tenants(world):
    for tenant_queue in world["queues"]:
        for _ in range(3):
            JobTaskFactory(job=JobFactory(queue=tenant_queue), replicas=2)
    before = [tenant_pending_pods(tenant_id=t.pk) for t in world["tenants"]]
    assert before == [6, 6]
    assert TenantPodDelta.objects.count() == 6

    pod_count.tenant_pod_deltas_fold()

    assert TenantPodDelta.objects.count() == 2
    assert [tenant_pending_pods(tenant_id=t.pk) for t in world["tenants"]] == before
    gone = world["tenants"][1]
    Job.objects.filter(tenant=gone).delete()
    gone.queues.all().delete()
    gone.delete()
    pod_count.tenant_pod_deltas_fold()
    assert set(TenantPodDelta.objects.values_list("tenant_id", flat=True)) == {
        world["tenants"][0].pk
    }


@postgresql_only
def test_the_backfill_counts_what_is_there_before_the_triggers(world):
    job = JobFactory(queue=world["queues"][0])
    task = JobTaskFactory(job=job, replicas=3)
    PlacementFactory(task=task, node=world["node"], state=Placement.State.RUNNING)
    TenantPodDelta.objects.all().delete()
    assert tenant_pending_pods(tenant_id=job.tenant_id) == 0

    with connection.cursor() as cursor:
        cursor.execute(
            pod_count.backfill_statement(scheduled=migration.SCHEDULED, placed=migration.PLACED)
        )

    assert tenant_pending_pods(tenant_id=job.tenant_id) == 2


@postgresql_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("first", ["placement", "status"])
def test_concurrent_status_and_placement_writes_are_counted_once(first):
    """Two transactions, one ending a job and one placing its pod, each waiting on the other's
    commit: whichever commits second counts with the first's result."""
    import threading

    from django.db import close_old_connections

    queue = QueueFactory()
    job = JobFactory(queue=queue, status=Job.Status.RUNNING)
    task = JobTaskFactory(job=job, replicas=2)
    node = NodeFactory()
    started = threading.Event()

    def place():
        with transaction.atomic():
            Placement.objects.create(
                job=job,
                task=task,
                replica=0,
                node=node,
                node_name=node.name,
                pod_name="p-0",
                gpus=1,
                state=Placement.State.RUNNING,
            )
            if first == "placement":
                started.set()
                threading.Event().wait(0.5)  # the other waits on the job's row meanwhile
        close_old_connections()

    def end():
        if first == "placement":
            started.wait(5)
        with transaction.atomic():
            Job.objects.filter(pk=job.pk).update(status=Job.Status.CANCELLED)
            if first == "status":
                started.set()
                threading.Event().wait(0.5)
        close_old_connections()

    threads = [threading.Thread(target=place), threading.Thread(target=end)]
    if first == "status":
        threads.reverse()
    threads[0].start()
    started.wait(5)
    threads[1].start()
    for thread in threads:
        thread.join(10)

    assert tenant_pending_pods(tenant_id=queue.tenant_id) == 0
    assert tenant_pending_pods_recount(tenant_id=queue.tenant_id) == 0
    deltas = TenantPodDelta.objects.filter(tenant_id=queue.tenant_id)
    assert sum(d.placed for d in deltas) == 0
    assert sum(d.replicas for d in deltas) == 0
