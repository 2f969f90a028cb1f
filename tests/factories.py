"""factory_boy factories for the portal models.

Factories build rows directly (no services), for arranging test state. Behaviour under
test goes through the services.
"""

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from portal.cluster.models import Node, Placement, SimulatedPod
from portal.jobs.models import Job, JobTask
from portal.queues.models import Queue, QueueChange
from portal.scheduling.models import (
    CycleRun,
    PreemptionEvent,
    QueueUsageSample,
    SchedulerConfig,
)
from portal.tenants.models import Membership, Tenant

DEFAULT_PASSWORD = "pass-for-tests-only"  # noqa: S105
GiB = 1024**3

VALID_CONF_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: proportion
"""


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.com")
    password = factory.PostGenerationMethodCall("set_password", DEFAULT_PASSWORD)

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):  # noqa: N805
        if create:
            obj.save()


class StaffFactory(UserFactory):
    is_staff = True


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tenant-{n}")
    display_name = factory.LazyAttribute(lambda o: o.name.title())


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    tenant = factory.SubFactory(TenantFactory)
    role = Membership.Role.RESEARCHER


class QueueFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Queue

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"queue-{n}")
    weight = 1


class QueueChangeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QueueChange

    queue = factory.SubFactory(QueueFactory)
    field = "weight"
    old_value = "1"
    new_value = "2"


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job

    queue = factory.SubFactory(QueueFactory)
    tenant = factory.SelfAttribute("queue.tenant")
    submitter = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"job-{n}")
    min_available = 1
    status = Job.Status.PENDING


class JobTaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = JobTask

    job = factory.SubFactory(JobFactory)
    name = factory.Sequence(lambda n: f"task-{n}")
    replicas = 1
    image = "ghcr.io/example/trainer:latest"
    gpus = 1
    cpu_millis = 4000
    memory_bytes = 16 * GiB


class NodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Node

    name = factory.Sequence(lambda n: f"node-{n}")
    gpu_count = 8
    gpu_model = "H100"
    gpu_memory_mib = 81920
    cpu_millis = 96000
    memory_bytes = 1024 * GiB
    labels = factory.LazyAttribute(lambda o: {"gpu-model": o.gpu_model})
    topology_labels = factory.LazyFunction(lambda: {"topology.kubernetes.io/zone": "rack-a"})
    schedulable = True


class PlacementFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Placement

    task = factory.SubFactory(JobTaskFactory)
    job = factory.SelfAttribute("task.job")
    replica = 0
    node = factory.SubFactory(NodeFactory)
    node_name = factory.SelfAttribute("node.name")
    pod_name = factory.Sequence(lambda n: f"pod-{n}")
    gpus = factory.SelfAttribute("task.gpus")


class SimulatedPodFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SimulatedPod

    name = factory.Sequence(lambda n: f"sim-pod-{n}")
    node_name = "node-0"


class SchedulerConfigFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SchedulerConfig

    version = factory.Sequence(lambda n: n + 1)
    text = VALID_CONF_TEXT
    active = False


class CycleRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = CycleRun

    started_at = factory.LazyFunction(timezone.now)


class PreemptionEventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PreemptionEvent

    victim_job = factory.SubFactory(JobFactory)
    victim_task_name = "worker"
    victim_queue = factory.SelfAttribute("victim_job.queue")
    victim_tenant = factory.SelfAttribute("victim_job.tenant")
    node_name = "node-0"
    action = PreemptionEvent.Action.RECLAIM
    gpus_freed = 8
    sentence = factory.LazyAttribute(
        lambda o: f"{o.victim_job.name} lost {o.gpus_freed} GPUs on {o.node_name}"
    )


class QueueUsageSampleFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = QueueUsageSample

    queue = factory.SubFactory(QueueFactory)
    gpus_allocated = 4
    gpus_deserved = 8.0


def api_token_secret(user, name: str = "tests") -> str:
    """A new API token of `user`, through the service: the secret to send."""
    from portal.api.services import api_token_create

    return api_token_create(user=user, name=name)[1]


def largest_gpu_count() -> int:
    """The largest GPU or replica count a job's columns store on this database: jobs stored
    before the limits existed can hold it (2**62 fit SQLite's integers; PostgreSQL's
    PositiveIntegerField stops at 2**31 - 1)."""
    from django.db import connection

    return 2**62 if connection.vendor == "sqlite" else 2**31 - 1


def held_by_others(node, *, whole: int, card: int, cores: int, memory_mib: int) -> None:
    """`node` with 8 registered 80 GiB cards, of which other workloads hold `whole` GPUs of
    unnamed cards and `cores` percent and `memory_mib` of card `card` (as the cluster
    translation writes a HAMi pod's device assignment)."""
    node.gpu_uuids = [f"GPU-{i}" for i in range(8)]
    node.gpu_memory_mib = 81920
    node.used_by_others = {
        "nvidia.com/gpu": whole,
        f"gpu-card-cores/GPU-{card}": cores,
        f"gpu-card-mib/GPU-{card}": memory_mib,
    }
    node.save()
