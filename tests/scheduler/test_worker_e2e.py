"""End to end with a real Celery worker and beat in another process, on the simulated cluster.

The worker uses the same database and broker as the test: on the PostgreSQL leg of CI that is
Redis, on the SQLite leg the filesystem broker of the embedded default.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

from portal import celery_app
from portal.cluster.models import Placement
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from portal.scheduling.models import PreemptionEvent
from portal.tenants.models import Membership
from tests.factories import MembershipFactory, NodeFactory, QueueFactory, TenantFactory, UserFactory
from tests.scheduler.conftest import database_url

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parents[2]
GiB = 1024**3
WAIT_SECONDS = 90


@pytest.fixture
def worker(tmp_path):
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "portal.settings.test",
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "DATABASE_URL": database_url(),
        "SCHEDULER_CYCLE_SECONDS": "1",
        "EVICTION_GRACE_SECONDS": "1",
        "SIMULATED_DEFAULT_RUN_SECONDS": "3600",
    }
    log = (tmp_path / "worker.log").open("w")
    process = subprocess.Popen(
        [
            sys.executable, "-m", "celery", "-A", "portal", "worker", "--beat",
            "--pool=solo", "-Q", "celery,cycle", "--loglevel=INFO", "--schedule", str(tmp_path / "beat-schedule"),
        ],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    # The test process queues kicks on the same broker instead of running them inline.
    celery_app.conf.task_always_eager = False
    try:
        yield process
    finally:
        celery_app.conf.task_always_eager = settings.CELERY_TASK_ALWAYS_EAGER
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def wait_for(condition, what: str, worker, tmp_path):
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if condition():
            return
        assert worker.poll() is None, "the worker died:\n" + (tmp_path / "worker.log").read_text()
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}:\n" + (tmp_path / "worker.log").read_text()[-3000:])


@pytest.fixture
def alice():
    return UserFactory(username="alice")


def queue_for(user, name, weight=1):
    tenant = TenantFactory(name=f"team-{name}")
    MembershipFactory(user=user, tenant=tenant, role=Membership.Role.RESEARCHER)
    return QueueFactory(tenant=tenant, name=name, weight=weight)


def submit(user, queue, name, *, replicas, gpus, min_available):
    return job_submit(
        submitter=user,
        queue=queue,
        name=name,
        tasks=[
            {
                "name": "server",
                "replicas": replicas,
                "image": "vllm/vllm-openai:latest",
                "gpus": gpus,
                "cpu_millis": 4000,
                "memory_bytes": 32 * GiB,
            }
        ],
        min_available=min_available,
    )


def test_worker_packs_the_seed_deployment_of_six_replicas_on_one_node(worker, alice, tmp_path):
    for i in range(4, 7):
        NodeFactory(name=f"gpu-worker-{i}", gpu_resource_name="mars-tech.com/gpu")
    queue = queue_for(alice, "default")

    job = submit(alice, queue, "qwen8b", replicas=6, gpus=1, min_available=1)

    def all_running():
        return Placement.objects.filter(job=job, state=Placement.State.RUNNING).count() == 6

    wait_for(all_running, "six running placements", worker, tmp_path)
    nodes = set(Placement.objects.filter(job=job).values_list("node_name", flat=True))
    assert len(nodes) == 1
    assert Job.objects.get(pk=job.pk).status == Job.Status.RUNNING


def test_worker_reclaims_for_an_idle_queue_and_starts_its_job(worker, alice, tmp_path):
    NodeFactory(name="gpu-worker-1")
    NodeFactory(name="gpu-worker-2")
    busy, idle = queue_for(alice, "busy"), queue_for(alice, "idle")
    hogs = [submit(alice, busy, f"hog-{i}", replicas=1, gpus=8, min_available=1) for i in (1, 2)]

    def hogs_running():
        return (
            Job.objects.filter(pk__in=[h.pk for h in hogs], status=Job.Status.RUNNING).count() == 2
        )

    wait_for(hogs_running, "the busy queue to fill the cluster", worker, tmp_path)

    newcomer = submit(alice, idle, "newcomer", replicas=1, gpus=8, min_available=1)

    def newcomer_running():
        return Job.objects.get(pk=newcomer.pk).status == Job.Status.RUNNING

    wait_for(newcomer_running, "reclaim to start the idle queue's job", worker, tmp_path)
    events = list(PreemptionEvent.objects.all())
    assert len(events) == 1
    assert events[0].action == "reclaim"
    assert events[0].preemptor_job_id == newcomer.pk
    assert events[0].victim_queue_id == busy.pk
    assert events[0].gpus_freed == 8
