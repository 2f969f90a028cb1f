from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from portal.cluster.models import Node
from portal.dashboards.demo_history import PAST_JOBS
from portal.jobs.models import Job, JobTask
from portal.queues.models import Queue, QueueChange
from portal.scheduling.models import SchedulerConfig
from portal.tenants.models import Membership, Tenant

pytestmark = pytest.mark.django_db

DEMO_PASSWORD = "demo-pass-for-tests"  # noqa: S105
MODELS = [Tenant, Membership, Queue, QueueChange, Node, Job, JobTask, SchedulerConfig]


def _seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def _state():
    users = list(get_user_model().objects.order_by("pk").values())
    return users, {model.__name__: list(model.objects.order_by("pk").values()) for model in MODELS}


@pytest.fixture
def seeded(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", DEMO_PASSWORD)
    return _seed()


def test_seed_creates_the_demo(seeded):
    assert set(Tenant.objects.values_list("name", flat=True)) == {"nlp", "vision", "platform"}
    assert Queue.objects.count() == 5
    assert sum(Queue.objects.values_list("guarantee_gpus", flat=True)) <= 32
    assert Node.objects.filter(schedulable=True).count() == 4
    demo_jobs = Job.objects.exclude(name__in=[job.name for job in PAST_JOBS])
    assert demo_jobs.filter(status=Job.Status.PENDING).count() == demo_jobs.count() >= 3
    # The README's examples name the 32-GPU job by id 1: the demo's own jobs come first.
    assert Job.objects.get(pk=demo_jobs.order_by("pk").first().pk).name == "bert-pretrain"
    config = SchedulerConfig.objects.get()
    assert (config.version, config.active) == (1, True)
    assert "network-topology-aware" in config.text
    assert "demo only" in seeded


def test_seed_users_and_roles(seeded):
    users = get_user_model().objects
    admin = users.get(username="admin")
    assert admin.is_staff
    assert admin.is_superuser
    lead_roles = dict(
        Membership.objects.filter(user__username="lead").values_list("tenant__name", "role")
    )
    assert lead_roles == {"nlp": "lead", "vision": "researcher"}
    researcher_roles = dict(
        Membership.objects.filter(user__username="researcher").values_list("tenant__name", "role")
    )
    assert researcher_roles == {"nlp": "researcher"}


def test_seed_is_idempotent(seeded):
    before = _state()
    output = _seed()
    assert _state() == before
    assert "password" not in output


def test_demo_password_logs_in(seeded):
    client = Client()
    assert client.login(username="researcher", password=DEMO_PASSWORD)
    assert client.get(reverse("home")).status_code == 200


def test_random_passwords_printed_once(monkeypatch):
    monkeypatch.delenv("DEMO_PASSWORD", raising=False)
    output = _seed()
    lines = [line for line in output.splitlines() if line.startswith("user researcher password: ")]
    password = lines[0].split(": ", 1)[1].split()[0]
    assert Client().login(username="researcher", password=password)


def test_force_passwords_resets(seeded, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "another-demo-pass")
    output = _seed("--force-passwords")
    assert "user admin password: another-demo-pass" in output
    assert Client().login(username="admin", password="another-demo-pass")


def test_a_weak_demo_password_is_refused_by_name_and_creates_no_login(monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "1234")
    with pytest.raises(CommandError, match="DEMO_PASSWORD for .*too short"):
        _seed()
    assert not get_user_model().objects.exists()


def test_the_demo_has_shared_gpus_where_the_cluster_shares_them(db):
    from django.core.management import call_command
    from django.test import override_settings

    from portal.jobs.models import JobTask

    with override_settings(GPU_SHARING="none"):
        call_command("seed_demo", verbosity=0)
    assert not JobTask.objects.filter(gpu_milli__gt=0).exists()
    call_command("seed_demo", verbosity=0)  # the default simulated cluster shares cards
    task = JobTask.objects.get(job__name="embed-serve")
    assert (task.gpus, task.gpu_milli, task.gpu_memory_mib) == (0, 250, 10240)
