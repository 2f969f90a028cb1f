"""The quota tree through the cycle: tenants as parent queues in the snapshot, their shares
persisted, their caps binding, and past use handed to the fairshare plugin."""

from datetime import UTC, datetime, timedelta

import pytest

from portal.cluster.models import Placement
from portal.scheduling.models import QueueUsageRollup
from portal.tenants.models import Membership, TenantUsageSample
from scheduler.adapters.cluster.simulated import SimulatedBackend
from scheduler.adapters.orchestrator import scheduling_cycle_run
from scheduler.adapters.snapshot import snapshot_build
from scheduler.core.config import DEFAULT_CONF_TEXT
from tests.factories import (
    MembershipFactory,
    NodeFactory,
    QueueFactory,
    SchedulerConfigFactory,
    UserFactory,
)
from tests.scheduler.conftest import submit_job

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
FAIRSHARE_CONF = DEFAULT_CONF_TEXT.replace(
    "- plugins:\n  - name: proportion",
    "- plugins:\n  - name: fairshare\n    arguments:\n      fairshare.halfLifeHours: 24\n"
    "- plugins:\n  - name: proportion",
)
FLAT_CONF = DEFAULT_CONF_TEXT.replace("    enableHierarchy: true\n", "")


def _quota(tenant, **values):
    for field, value in values.items():
        setattr(tenant, field, value)
    tenant.save()


def _activate(text):
    SchedulerConfigFactory(text=text, active=True)


def test_the_seed_conf_sees_tenants_as_parent_queues(nlp, vision, nlp_queue, vision_queue):
    _quota(nlp, weight=3, guarantee_gpus=8, capability_gpus=16)

    queues = {q.name: q for q in snapshot_build(now=NOW).snapshot.queues}

    assert queues["nlp-train"].parent == "tenant nlp"
    assert queues["vision-train"].parent == "tenant vision"
    tenant = queues["tenant nlp"]
    assert (tenant.parent, tenant.weight) == (None, 3)
    assert (tenant.guarantee.get("gpu"), tenant.capability.get("gpu")) == (8, 16)


def test_a_flat_conf_sees_the_queues_alone(nlp, nlp_queue):
    _activate(FLAT_CONF)
    queues = snapshot_build(now=NOW).snapshot.queues
    assert [(q.name, q.parent) for q in queues] == [("nlp-train", None)]


def test_fairshare_gets_each_queues_past_gpu_seconds(nlp_queue, vision_queue):
    _activate(FAIRSHARE_CONF)
    hour = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    QueueUsageRollup.objects.create(
        queue=nlp_queue, resolution="hour", bucket=hour, gpus_allocated_avg=4.0, samples=60
    )
    QueueUsageRollup.objects.create(  # older than eight half-lives: left out
        queue=nlp_queue, resolution="hour", bucket=NOW - timedelta(days=9), samples=60
    )
    QueueUsageRollup.objects.create(  # a day rollup: the hour rollups serve a 24 h half-life
        queue=vision_queue, resolution="day", bucket=hour.replace(hour=0), samples=60
    )

    queues = {q.name: q for q in snapshot_build(now=NOW).snapshot.queues}

    (record,) = queues["nlp-train"].usage
    assert record.at == (hour + timedelta(minutes=30)).timestamp()
    assert record.used.get("gpu") == 4 * 60 * 60  # 4 GPUs for the hour's 60 one-minute samples
    assert queues["vision-train"].usage == ()


@pytest.fixture
def user(nlp, vision):
    user = UserFactory(username="alice")
    for tenant in (nlp, vision):
        MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return user


def test_a_tenant_cap_binds_its_queues_and_its_share_is_recorded(user, nlp, vision, nlp_queue):
    for i in range(1, 3):
        NodeFactory(name=f"gpu-worker-{i}")
    _quota(nlp, capability_gpus=6)
    dev = QueueFactory(tenant=nlp, name="nlp-dev")
    jobs = [submit_job(user, nlp_queue, f"train-{i}") for i in range(4)]
    jobs += [submit_job(user, dev, f"dev-{i}") for i in range(4)]
    vision_jobs = [submit_job(user, QueueFactory(tenant=vision), f"v-{i}") for i in range(3)]
    backend = SimulatedBackend(default_run_seconds=600, now=lambda: NOW)

    run = scheduling_cycle_run(backend=backend, now=lambda: NOW)

    assert run.error == ""
    placed = Placement.objects.filter(state__in=Placement.ACTIVE_STATES)
    assert placed.filter(job__tenant=nlp).count() == 6
    assert placed.filter(job__tenant=vision).count() == 3
    waiting = [job for job in jobs if not placed.filter(job=job).exists()]
    assert len(waiting) == 2
    for job in waiting:
        job.refresh_from_db()
        # Whether it met its queue's share or the tenant's cap first, the cap is named (the
        # arithmetic and what frees it follow).
        assert any(
            rule in job.pending_reason
            for rule in (
                "is in tenant nlp, at capability 6/6 GPUs;",
                "; tenant nlp is capped at 6 GPUs;",
            )
        ), job.pending_reason
    samples = {s.tenant.name: s for s in TenantUsageSample.objects.select_related("tenant")}
    assert (samples["nlp"].gpus_allocated, samples["nlp"].gpus_deserved) == (6, 6)
    assert samples["vision"].gpus_allocated == len(vision_jobs)
