"""Who may open each HTML page, as data: the spec behind the isolation matrix and CSRF tests.

One `Page` per URL case. Outcomes are written here by hand from the access rules in
README/DESIGN (never computed by the code under test), so a change of behaviour, or a page
added without an entry, fails a test.

The world: tenant A ("alpha") owns the objects in the URLs; tenant B ("bravo") has its own
queue and job whose names must never reach A's users. Roles: anonymous, a researcher and
a lead of each tenant, staff, and a user with no membership.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from portal.api.services import api_token_create
from portal.common.units import cpu_text, memory_text
from portal.jobs.models import Job
from portal.tenants.models import Membership
from tests.factories import (
    DEFAULT_PASSWORD,
    VALID_CONF_TEXT,
    JobFactory,
    JobTaskFactory,
    MembershipFactory,
    NodeFactory,
    PlacementFactory,
    PreemptionEventFactory,
    QueueFactory,
    QueueUsageSampleFactory,
    SchedulerConfigFactory,
    StaffFactory,
    TenantFactory,
    UserFactory,
)

ROLES = ("anonymous", "a_researcher", "a_lead", "b_researcher", "b_lead", "staff", "no_member")
A_ROLES = ("a_researcher", "a_lead")
B_ROLES = ("b_researcher", "b_lead")

# Names only tenant A's users (and staff) may see, and only tenant B's.
A_NAMES = ("alpha-queue", "alpha-job")
B_NAMES = ("bravo-queue", "bravo-job")


@dataclass(frozen=True)
class Outcome:
    """Expected response: a status, plus where a redirect must point (a URL name)."""

    status: int
    redirect_to: str | None = None
    label: str = ""

    def __str__(self) -> str:
        return self.label or str(self.status)

    @property
    def denied(self) -> bool:
        return self.status >= 400 or self.label in ("login", "form-error")


OK = Outcome(200, label="ok")
FORM_ERROR = Outcome(200, label="form-error")  # the page again, with the refusal on a field
FORBIDDEN = Outcome(403, label="forbidden")
MISSING = Outcome(404, label="missing")
NOT_ALLOWED = Outcome(405, label="method-not-allowed")
LOGIN = Outcome(302, redirect_to="login", label="login")


def redirect(name: str) -> Outcome:
    return Outcome(302, redirect_to=name, label=f"redirect:{name}")


def per_role(default: Outcome, *, anonymous: Outcome = LOGIN, **overrides: Outcome):
    """An outcome for every role: `default`, except anonymous and the roles named."""
    for role in overrides:
        assert role in ROLES, role
    return {role: overrides.get(role, default) for role in ROLES} | {"anonymous": anonymous}


def roles(outcome: Outcome, names) -> dict[str, Outcome]:
    return dict.fromkeys(names, outcome)


def a_object(ok: Outcome) -> dict[str, Outcome]:
    """An object of tenant A: A's members and staff get `ok`; everyone else 404."""
    return per_role(MISSING, **roles(ok, (*A_ROLES, "staff")))


def staff_only(ok: Outcome) -> dict[str, Outcome]:
    return per_role(FORBIDDEN, staff=ok)


@dataclass(frozen=True)
class Page:
    """One URL case. `kwargs` maps URL arguments to keys of the world (or literal strings).

    `post` is None when the view takes no POST (it is then not exercised); `post_body` names
    a builder in BODIES. `writes` says whether an allowed POST changes the database.
    """

    name: str
    label: str
    get: dict[str, Outcome]
    kwargs: dict[str, str] = field(default_factory=dict)
    query: dict[str, str] = field(default_factory=dict)
    post: dict[str, Outcome] | None = None
    post_body: str | None = None
    writes: bool = True

    @property
    def id(self) -> str:
        return f"{self.name}[{self.label}]" if self.label else self.name


# Queue leads act on their tenant's queues. As in the API, a queue the user cannot see
# (another tenant's) is 404 whatever their role; a member who may not edit it gets 403.
QUEUE_EDIT = per_role(MISSING, a_researcher=FORBIDDEN, a_lead=OK, staff=OK)
QUEUE_EDIT_POST = QUEUE_EDIT | roles(redirect("queues:queue_edit"), ("a_lead", "staff"))
TENANT_EDIT = per_role(MISSING, **roles(FORBIDDEN, A_ROLES), staff=OK)

# Submitting: A's members and staff reach A's queue; B's members see it refused on the form
# (it is not one of their queues); a user with no tenant is refused the page itself.
SUBMIT_GET = per_role(OK, no_member=FORBIDDEN)
SUBMIT_POST = per_role(
    redirect("jobs:job_detail"),
    **roles(FORM_ERROR, B_ROLES),
    no_member=FORBIDDEN,
)

PAGES = [
    Page("home", "", get=per_role(OK)),
    Page(
        "login",
        "",
        get=per_role(OK, anonymous=OK),
        post=per_role(redirect("home"), anonymous=redirect("home")),
        post_body="login",
        writes=False,
    ),
    Page(
        "logout",
        "",
        get=per_role(NOT_ALLOWED, anonymous=NOT_ALLOWED),
        post=per_role(redirect("login"), anonymous=redirect("login")),
        post_body="empty",
        writes=False,
    ),
    Page(
        "admin_login",
        "",
        query={"next": "/admin/"},
        # Signed in but not staff: told the admin is for staff, not shown a login form.
        get=per_role(FORBIDDEN, anonymous=redirect("login"), staff=redirect("login")),
    ),
    Page("jobs:job_list", "", get=per_role(OK)),
    Page("jobs:job_submit", "", get=SUBMIT_GET, post=SUBMIT_POST, post_body="job_form"),
    Page("jobs:job_upload", "", get=SUBMIT_GET, post=SUBMIT_POST, post_body="job_manifest"),
    Page("jobs:job_sample", "", get=per_role(OK)),
    Page("jobs:job_detail", "", kwargs={"job_id": "a_job"}, get=a_object(OK)),
    Page("jobs:job_live", "", kwargs={"job_id": "a_job"}, get=a_object(OK)),
    Page(
        "jobs:job_cancel",
        "own job",
        kwargs={"job_id": "a_job"},
        get=per_role(NOT_ALLOWED),
        post=a_object(redirect("jobs:job_detail")),
        post_body="empty",
    ),
    Page(
        "jobs:job_cancel",
        "a colleague's job",
        kwargs={"job_id": "a_lead_job"},
        get=per_role(NOT_ALLOWED),
        post=a_object(redirect("jobs:job_detail")) | {"a_researcher": FORBIDDEN},
        post_body="empty",
    ),
    Page(
        "jobs:job_release",
        "",
        kwargs={"job_id": "a_quarantined_job"},
        get=per_role(NOT_ALLOWED),
        post=per_role(MISSING, **roles(FORBIDDEN, A_ROLES), staff=redirect("jobs:job_detail")),
        post_body="empty",
    ),
    Page("queues:queue_list", "", get=per_role(OK)),
    Page(
        "queues:queue_edit",
        "",
        kwargs={"queue_id": "a_queue"},
        get=QUEUE_EDIT,
        post=QUEUE_EDIT_POST,
        post_body="queue_form",
    ),
    Page(
        "queues:queue_preview",
        "",
        kwargs={"queue_id": "a_queue"},
        query={"weight": "3", "priority": "0", "state": "open", "guarantee_gpus": "0"}
        | {"guarantee_cpu_millis": "0", "guarantee_memory_bytes": "0"},
        get=QUEUE_EDIT,
    ),
    Page("tenants:tenant_list", "", get=per_role(OK)),
    Page("tenants:tenant_detail", "", kwargs={"tenant_id": "alpha"}, get=a_object(OK)),
    # A tenant's quota is the site's: as in the API, 404 for a tenant the user is not in,
    # 403 for its members (its leads split the quota, they do not set it).
    Page(
        "tenants:tenant_edit",
        "",
        kwargs={"tenant_id": "alpha"},
        get=TENANT_EDIT,
        post=TENANT_EDIT | {"staff": redirect("tenants:tenant_edit")},
        post_body="tenant_form",
    ),
    Page(
        "tenants:tenant_preview",
        "",
        kwargs={"tenant_id": "alpha"},
        query={"weight": "3", "guarantee_gpus": "0"}
        | {"guarantee_cpu_millis": "0", "guarantee_memory_bytes": "0"},
        get=TENANT_EDIT,
    ),
    # A lead (or staff) sets where manifests without spec.queue go; a researcher may not.
    Page(
        "tenants:tenant_default_queue",
        "",
        kwargs={"tenant_id": "alpha"},
        get=per_role(NOT_ALLOWED),
        post=per_role(MISSING, a_researcher=FORBIDDEN)
        | roles(redirect("tenants:tenant_detail"), ("a_lead", "staff")),
        post_body="default_queue_form",
    ),
    Page("scheduling:preemption_list", "", get=staff_only(OK)),
    Page("scheduling:preemption_csv", "", get=staff_only(OK)),
    Page(
        "scheduling:config_edit",
        "",
        get=staff_only(OK),
        post=staff_only(redirect("scheduling:config_edit")),
        post_body="conf_form",
    ),
    Page(
        "scheduling:config_activate",
        "",
        kwargs={"config_id": "config"},
        get=per_role(NOT_ALLOWED, anonymous=NOT_ALLOWED),
        post=staff_only(redirect("scheduling:config_edit")),
        post_body="empty",
    ),
    Page("cluster:node_list", "", get=staff_only(OK)),
    Page("dashboards:overview", "", get=per_role(OK)),
    # Usage accounting: leads see their own tenant's figures, site admins everyone's.
    Page("accounting:report", "", get=per_role(FORBIDDEN, a_lead=OK, b_lead=OK, staff=OK)),
    Page("dashboards:chart_data", "", kwargs={"chart": "quota"}, get=per_role(OK)),
    # Creating a token answers with the page itself: the secret is in that answer only.
    Page("api:tokens", "", get=per_role(OK), post=per_role(OK), post_body="token_form"),
    # Tokens are revoked by their owner here (admins use the Django admin): anyone else's
    # token id is not found.
    Page(
        "api:token_revoke",
        "",
        kwargs={"token_id": "a_token"},
        get=per_role(NOT_ALLOWED),
        post=per_role(MISSING, a_researcher=redirect("api:tokens")),
        post_body="empty",
    ),
    # The OpenAPI schema and its UI describe the API, not anyone's data.
    Page("api:schema", "", get=per_role(OK, anonymous=OK)),
    Page("api:docs", "", get=per_role(OK, anonymous=OK)),
]

# Pages that show rows, and which of the tenant's names (queue, job) a member must find
# there; nobody may find the other tenant's names. Staff must find both tenants'. URL
# arguments name objects of the world; roles refused the page (403/404) are skipped here.
LIST_PAGES = [
    ("home", {}, {}, ("alpha-queue",)),
    ("jobs:job_list", {}, {}, ("alpha-queue", "alpha-job")),
    ("jobs:job_submit", {}, {}, ("alpha-queue",)),
    ("jobs:job_sample", {}, {}, ()),
    ("queues:queue_list", {}, {}, ("alpha-queue",)),
    ("api:tokens", {}, {}, ()),
    ("dashboards:overview", {}, {}, ()),
    # The last hour is read from the raw samples (longer ranges from hourly rollups).
    ("dashboards:chart_data", {"chart": "usage"}, {"range": "hour"}, ("alpha-queue",)),
    ("dashboards:chart_data", {"chart": "quota"}, {}, ("alpha-queue",)),
    ("dashboards:chart_data", {"chart": "occupancy"}, {}, ("alpha-queue",)),
    ("dashboards:chart_data", {"chart": "pending"}, {}, ("alpha-queue",)),
    ("dashboards:chart_data", {"chart": "preemptions"}, {}, ()),
    ("dashboards:chart_data", {"chart": "colours"}, {}, ("alpha-queue",)),
    # The deserved-share preview lists every queue the change affects.
    ("queues:queue_edit", {"queue_id": "a_queue"}, {}, ("alpha-queue",)),
    (
        "queues:queue_preview",
        {"queue_id": "a_queue"},
        {"weight": "3", "priority": "0", "state": "open", "guarantee_gpus": "0"}
        | {"guarantee_cpu_millis": "0", "guarantee_memory_bytes": "0"},
        ("alpha-queue",),
    ),
    ("jobs:job_detail", {"job_id": "a_job"}, {}, ("alpha-queue", "alpha-job")),
    ("jobs:job_live", {"job_id": "a_job"}, {}, ()),
    ("tenants:tenant_list", {}, {}, ()),
    ("tenants:tenant_detail", {"tenant_id": "alpha"}, {}, ("alpha-queue",)),
]


# --- the world ------------------------------------------------------------------------------


def build_world() -> dict[str, Any]:
    alpha = TenantFactory(name="alpha")
    bravo = TenantFactory(name="bravo")
    users = {
        "a_researcher": UserFactory(username="a-researcher"),
        "a_lead": UserFactory(username="a-lead"),
        "b_researcher": UserFactory(username="b-researcher"),
        "b_lead": UserFactory(username="b-lead"),
        "staff": StaffFactory(username="site-staff"),
        "no_member": UserFactory(username="no-member"),
    }
    for role, tenant, kind in (
        ("a_researcher", alpha, Membership.Role.RESEARCHER),
        ("a_lead", alpha, Membership.Role.LEAD),
        ("b_researcher", bravo, Membership.Role.RESEARCHER),
        ("b_lead", bravo, Membership.Role.LEAD),
    ):
        MembershipFactory(user=users[role], tenant=tenant, role=kind)
    nodes = [NodeFactory(name=f"matrix-node-{i}") for i in range(2)]
    a_queue = QueueFactory(tenant=alpha, name="alpha-queue", weight=2)
    b_queue = QueueFactory(tenant=bravo, name="bravo-queue", weight=1)
    a_job = JobFactory(queue=a_queue, submitter=users["a_researcher"], name="alpha-job")
    a_lead_job = JobFactory(queue=a_queue, submitter=users["a_lead"], name="alpha-lead-work")
    b_job = JobFactory(queue=b_queue, submitter=users["b_researcher"], name="bravo-job")
    a_quarantined_job = JobFactory(
        queue=a_queue,
        submitter=users["a_researcher"],
        name="alpha-quarantined",
        status=Job.Status.QUARANTINED,
    )
    for job in (a_job, a_lead_job, b_job, a_quarantined_job):
        JobTaskFactory(job=job, name="worker", gpus=2)
    # Running work of both tenants, usage history and a cross-tenant preemption, so the
    # dashboards and the job page have something of B's to leak.
    running_a = JobFactory(queue=a_queue, submitter=users["a_lead"], name="alpha-running")
    running_b = JobFactory(queue=b_queue, submitter=users["b_lead"], name="bravo-running")
    for job, node in ((running_a, nodes[0]), (running_b, nodes[1])):
        job.status = job.Status.RUNNING
        job.save(update_fields=["status"])
        PlacementFactory(task=JobTaskFactory(job=job, name="worker", gpus=4), node=node)
    for queue in (a_queue, b_queue):
        QueueUsageSampleFactory(queue=queue)
    PreemptionEventFactory(
        victim_job=a_job, preemptor_job=b_job, preemptor_queue=b_queue, sentence="bravo-job won"
    )
    return {
        **users,
        "alpha": alpha,
        "bravo": bravo,
        "a_queue": a_queue,
        "b_queue": b_queue,
        "a_job": a_job,
        "a_lead_job": a_lead_job,
        "a_quarantined_job": a_quarantined_job,
        "b_job": b_job,
        "config": SchedulerConfigFactory(),
        "a_token": api_token_create(user=users["a_researcher"], name="a-token")[0],
        "nodes": nodes,
    }


# --- POST bodies ----------------------------------------------------------------------------


def _manifest(queue: str) -> bytes:
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: matrix-upload}}
spec:
  queue: {queue}
  tasks:
  - name: worker
    replicas: 1
    template:
      spec:
        containers:
        - {{name: main, image: "trainer:1", resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
""".encode()


def job_form_data(queue_pk: int, **overrides: Any) -> dict[str, Any]:
    data = {
        "queue": queue_pk,
        "name": "matrix-submit",
        "priority": "0",
        "min_available": "",
        "expected_duration_seconds": "",
        "gpu_model": "",
        "tasks-TOTAL_FORMS": "1",
        "tasks-INITIAL_FORMS": "0",
        "tasks-MIN_NUM_FORMS": "1",
        "tasks-MAX_NUM_FORMS": "20",
        "tasks-0-name": "worker",
        "tasks-0-replicas": "1",
        "tasks-0-image": "trainer:1",
        "tasks-0-command": "python train.py",
        "tasks-0-gpus": "1",
        "tasks-0-cpu": "4",
        "tasks-0-memory": "16Gi",
    }
    data.update(overrides)
    return data


def queue_form_data(queue: Any, **overrides: Any) -> dict[str, Any]:
    data = {
        "weight": queue.weight + 1,
        "priority": queue.priority,
        "state": queue.state,
        "guarantee_gpus": queue.guarantee_gpus,
        # The form takes cores and GiB.
        "guarantee_cpu_millis": cpu_text(queue.guarantee_cpu_millis),
        "guarantee_memory_bytes": memory_text(queue.guarantee_memory_bytes),
        "capability_gpus": "",
        "capability_cpu_millis": "",
        "capability_memory_bytes": "",
        "borrowing_limit_gpus": "",
        "borrowing_limit_cpu_millis": "",
        "borrowing_limit_memory_bytes": "",
    }
    if queue.reclaimable:
        data["reclaimable"] = "on"
    data.update(overrides)
    return data


def tenant_form_data(tenant: Any, **overrides: Any) -> dict[str, Any]:
    data = {
        "weight": tenant.weight + 1,
        "guarantee_gpus": tenant.guarantee_gpus,
        "guarantee_cpu_millis": tenant.guarantee_cpu_millis,
        "guarantee_memory_bytes": tenant.guarantee_memory_bytes,
        "capability_gpus": "",
        "capability_cpu_millis": "",
        "capability_memory_bytes": "",
        "borrowing_limit_gpus": "",
        "borrowing_limit_cpu_millis": "",
        "borrowing_limit_memory_bytes": "",
        "reclaimable": "on",
    }
    data.update(overrides)
    return data


BODIES = {
    "empty": lambda world: {},
    "login": lambda world: {"username": "a-researcher", "password": DEFAULT_PASSWORD},
    "job_form": lambda world: job_form_data(world["a_queue"].pk),
    "job_manifest": lambda world: {
        "manifest": SimpleUploadedFile("job.yaml", _manifest(world["a_queue"].name))
    },
    "queue_form": lambda world: queue_form_data(world["a_queue"]),
    "tenant_form": lambda world: tenant_form_data(world["alpha"]),
    "conf_form": lambda world: {"text": VALID_CONF_TEXT, "comment": "matrix", "activate": "on"},
    "token_form": lambda world: {"name": "matrix", "expires_in_days": "30"},
    "default_queue_form": lambda world: {"queue": world["a_queue"].name},
}


def db_fingerprint() -> tuple:
    """What any POST on these pages could change."""
    from django.contrib.auth import get_user_model

    from portal.api.models import ApiToken
    from portal.jobs.models import Job, JobTask
    from portal.queues.models import Queue, QueueChange
    from portal.scheduling.models import SchedulerConfig
    from portal.tenants.models import Tenant, TenantChange

    return (
        Job.objects.count(),
        JobTask.objects.count(),
        Queue.objects.count(),
        QueueChange.objects.count(),
        SchedulerConfig.objects.count(),
        tuple(SchedulerConfig.objects.filter(active=True).values_list("pk", flat=True)),
        ApiToken.objects.count(),
        ApiToken.objects.filter(revoked_at__isnull=False).count(),
        Membership.objects.count(),
        get_user_model().objects.count(),
        tuple(Job.objects.order_by("pk").values_list("status", flat=True)),
        tuple(Queue.objects.order_by("pk").values_list("weight", flat=True)),
        TenantChange.objects.count(),
        tuple(Tenant.objects.order_by("pk").values_list("weight", flat=True)),
        tuple(Tenant.objects.order_by("pk").values_list("default_queue_id", flat=True)),
    )


def page_params(method: str):
    """pytest params (page, role, expected outcome) for one HTTP method."""
    for page in PAGES:
        table = page.get if method == "get" else page.post
        if table is None:
            continue
        assert set(table) == set(ROLES), page.id
        for role in ROLES:
            yield pytest.param(page, role, table[role], id=f"{method}-{page.id}-{role}")
