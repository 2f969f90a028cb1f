"""Load the embedded demo: tenants, queues, nodes, users, a few pending jobs, scheduler conf.

Idempotent: what exists is left alone, so a second run changes nothing. Passwords are
random on first creation and printed once (demo only); DEMO_PASSWORD sets a fixed one.
"""

import os
import secrets
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from jobspec.gpushare import SHARING_NONE
from portal.cluster.services import node_inventory_load, node_inventory_sync
from portal.dashboards.demo_history import demo_history_seed
from portal.jobs.limits import gpu_sharing
from portal.jobs.models import Job
from portal.jobs.services import job_submit
from portal.queues.models import Queue
from portal.queues.services import queue_create
from portal.scheduling.models import SchedulerConfig
from portal.scheduling.services import scheduler_config_create
from portal.tenants.models import Membership, Tenant
from portal.tenants.services import (
    membership_set,
    tenant_get_or_create,
    user_create,
    user_password_set,
)
from scheduler.core.config import DEFAULT_CONF_TEXT

GiB = 1024**3

# The seed deployment's conf, from the one place the scheduler core defines it.
DEMO_SCHEDULER_CONF = DEFAULT_CONF_TEXT

# The site's split of the demo cluster's 32 GPUs: 28 guaranteed (nlp 12, vision 12, platform
# 4), 4 shared by weight. nlp weighs twice as much when everyone wants more; vision may grow to
# 20 GPUs but borrow at most 4 above its nominal share; platform is capped at 8. So vision's
# 12-GPU detr-train runs on its guarantee, and nlp's 32-GPU bert-pretrain waits: nlp may never
# hold more than 24.
DEMO_TENANTS = [
    {
        "name": "nlp",
        "display_name": "Natural language processing",
        "weight": 2,
        "guarantee_gpus": 12,
        "capability_gpus": 24,
    },
    {
        "name": "vision",
        "display_name": "Computer vision",
        "weight": 1,
        "guarantee_gpus": 12,
        "capability_gpus": 20,
        "borrowing_limit_gpus": 4,
    },
    {
        "name": "platform",
        "display_name": "ML platform",
        "weight": 1,
        "guarantee_gpus": 4,
        "capability_gpus": 8,
    },
]

# Each tenant's leads split its quota: nlp's queues guarantee all its 12 GPUs (8 for training,
# 4 for the interactive queue's fine-tuning), vision's 8 of 12 (4 are the tenant's to lend
# between its queues), platform's all 4.
DEMO_QUEUES = [
    {
        "tenant": "nlp",
        "name": "nlp-train",
        "weight": 4,
        "guarantee_gpus": 8,
        "capability_gpus": 24,
        "borrowing_limit_gpus": 8,
    },
    {
        "tenant": "nlp",
        "name": "nlp-interactive",
        "weight": 1,
        "guarantee_gpus": 4,
        "capability_gpus": 8,
        "priority": 10,
        "reclaimable": False,
    },
    {
        "tenant": "vision",
        "name": "vision-train",
        "weight": 3,
        "guarantee_gpus": 8,
        "capability_gpus": 24,
    },
    {"tenant": "vision", "name": "vision-batch", "weight": 1},
    {
        "tenant": "platform",
        "name": "platform-infra",
        "weight": 2,
        "guarantee_gpus": 4,
        "capability_gpus": 8,
        "priority": 5,
    },
]

DEMO_USERS = [
    {"username": "admin", "is_staff": True, "is_superuser": True, "memberships": []},
    {
        "username": "lead",
        "is_staff": False,
        "is_superuser": False,
        "memberships": [("nlp", Membership.Role.LEAD), ("vision", Membership.Role.RESEARCHER)],
    },
    {
        "username": "researcher",
        "is_staff": False,
        "is_superuser": False,
        "memberships": [("nlp", Membership.Role.RESEARCHER)],
    },
]


def _worker(name: str, replicas: int, gpus: int, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "image": "ghcr.io/example/trainer:latest",
        "command": ["python", "train.py"],
        "gpus": gpus,
        "cpu_millis": 8000 * max(gpus, 1),
        "memory_bytes": 64 * GiB * max(gpus, 1),
        **extra,
    }


DEMO_JOBS = [
    {
        "submitter": "researcher",
        "queue": "nlp-train",
        "name": "bert-pretrain",
        "tasks": [_worker("master", 1, 8), _worker("worker", 3, 8)],
        "expected_duration_seconds": 3600,
    },
    {
        "submitter": "researcher",
        "queue": "nlp-train",
        "name": "tokenizer-eval",
        "tasks": [_worker("worker", 1, 1)],
        "expected_duration_seconds": 300,
    },
    {
        "submitter": "lead",
        "queue": "nlp-interactive",
        "name": "llama-finetune",
        "tasks": [_worker("master", 1, 4, node_selector={"gpu-model": "H100"})],
        "priority": 10,
        "expected_duration_seconds": 1800,
    },
    {
        "submitter": "lead",
        "queue": "vision-train",
        "name": "detr-train",
        "tasks": [_worker("master", 1, 4), _worker("worker", 2, 4)],
        "min_available": 3,
        "expected_duration_seconds": 2400,
    },
    {
        "submitter": "admin",
        "queue": "platform-infra",
        "name": "gpu-burn-in",
        "tasks": [_worker("worker", 2, 2)],
        "expected_duration_seconds": 600,
    },
]
# Inference replicas that need a quarter of a card each: they share cards (the dashboard's
# occupancy map shows them). Seeded only where the cluster runs a GPU sharing stack.
DEMO_SHARED_JOBS = [
    {
        "submitter": "lead",
        "queue": "vision-batch",
        "name": "embed-serve",
        "tasks": [
            {
                "name": "server",
                "replicas": 4,
                "image": "ghcr.io/example/embedder:latest",
                "command": ["python", "serve.py"],
                "gpus": Decimal("0.25"),
                "gpu_memory_mib": 10240,
                "cpu_millis": 2000,
                "memory_bytes": 16 * GiB,
            }
        ],
        "min_available": 1,
        "expected_duration_seconds": 1800,
    },
]


class Command(BaseCommand):
    help = "Create the demo tenants, queues, nodes, users, jobs and scheduler config (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--force-passwords",
            action="store_true",
            help="Reset the demo users' passwords (to DEMO_PASSWORD or new random ones).",
        )

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        self._say(f"nodes from {settings.SIMULATED_CLUSTER_FILE}")
        result = node_inventory_sync(
            nodes=node_inventory_load(path=settings.SIMULATED_CLUSTER_FILE)
        )
        for key in ("created", "updated", "unschedulable"):
            if result[key]:
                self._say(f"  nodes {key}: {', '.join(result[key])}")

        tenants = {}
        for spec in DEMO_TENANTS:
            tenant, created = tenant_get_or_create(**spec)
            tenants[tenant.name] = tenant
            if created:
                self._say(f"tenant {tenant.name} created")

        for spec in DEMO_QUEUES:
            data = dict(spec)
            tenant = tenants[data.pop("tenant")]
            if Queue.objects.filter(name=data["name"]).exists():
                continue
            queue_create(tenant=tenant, **data)
            self._say(f"queue {data['name']} created")

        users = {
            spec["username"]: self._user(spec, options["force_passwords"]) for spec in DEMO_USERS
        }
        for spec in DEMO_USERS:
            for tenant_name, role in spec["memberships"]:
                user, tenant = users[spec["username"]], tenants[tenant_name]
                current = Membership.objects.filter(user=user, tenant=tenant).first()
                if current is None or current.role != role:
                    membership_set(user=user, tenant=tenant, role=role)

        shared = DEMO_SHARED_JOBS if gpu_sharing() != SHARING_NONE else []
        for spec in [*DEMO_JOBS, *shared]:
            data = dict(spec)
            queue = Queue.objects.get(name=data.pop("queue"))
            submitter = users[data.pop("submitter")]
            if Job.objects.filter(queue=queue, name=data["name"]).exists():
                continue
            job_submit(submitter=submitter, queue=queue, **data)
            self._say(f"job {data['name']} submitted to {queue.name}")
        self._say(demo_history_seed(users=users))

        if not SchedulerConfig.objects.exists():
            config = scheduler_config_create(
                text=DEMO_SCHEDULER_CONF,
                actor=users["admin"],
                activate=True,
                comment="demo seed",
            )
            self._say(f"scheduler config v{config.version} created and activated")

        self._say(f"demo ready: {Tenant.objects.count()} tenants, {Queue.objects.count()} queues")

    def _user(self, spec: dict[str, Any], force_passwords: bool) -> Any:
        user = get_user_model().objects.filter(username=spec["username"]).first()
        if user is not None and not force_passwords:
            return user
        password = os.environ.get("DEMO_PASSWORD") or secrets.token_urlsafe(12)
        try:
            if user is None:
                user = user_create(
                    username=spec["username"],
                    password=password,
                    is_staff=spec["is_staff"],
                    is_superuser=spec["is_superuser"],
                )
            else:
                user = user_password_set(user=user, password=password)
        except ValidationError as error:
            problems = " ".join(error.message_dict.get("password", error.messages))
            raise CommandError(f"DEMO_PASSWORD for {spec['username']}: {problems}") from error
        self._say(f"user {user.get_username()} password: {password}  (demo only)")
        return user

    def _say(self, message: str) -> None:
        self.stdout.write(message)
