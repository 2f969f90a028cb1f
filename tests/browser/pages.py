"""Every HTML page of the portal, and who may open it: the list the browser checks (axe, the
phone width) and the screenshots walk. A page added to the URLs must be added here, or to
NOT_PAGES with the reason it is not one (tests/browser/test_accessibility.py checks that).

Paths may name objects of the world: {job} (a job of tenant nlp), {queue} (nlp-train),
{tenant} (nlp).
Roles: "anonymous", "researcher" (nlp), "lead" (lead of nlp, researcher in vision),
"admin" (site staff).
"""

from __future__ import annotations

from dataclasses import dataclass

ROLES = ("researcher", "lead", "admin")
ALL = ROLES
STAFF = ("admin",)


@dataclass(frozen=True)
class BrowserPage:
    name: str
    url_name: str
    path: str
    ready: str  # a selector that is there once the page has drawn
    roles: tuple[str, ...]
    phone: bool = False  # checked at 390 px wide too


PAGES = (
    BrowserPage("login", "login", "/accounts/login/", "#id_username", ("anonymous",), phone=True),
    BrowserPage("home", "home", "/", "#my-jobs", ALL, phone=True),
    BrowserPage("job-list", "jobs:job_list", "/jobs/", "#jobs", ALL, phone=True),
    BrowserPage("job-detail", "jobs:job_detail", "/jobs/{job}/", "#placements", ALL, phone=True),
    BrowserPage("job-submit", "jobs:job_submit", "/jobs/new/", "#job-submit", ALL, phone=True),
    BrowserPage("job-upload", "jobs:job_upload", "/jobs/upload/", "#job-upload", ALL, phone=True),
    BrowserPage("queue-list", "queues:queue_list", "/queues/", "table", ALL, phone=True),
    BrowserPage(
        "queue-edit",
        "queues:queue_edit",
        "/queues/{queue}/edit/",
        "#preview",
        ("lead", "admin"),
        phone=True,
    ),
    BrowserPage(
        "dashboard",
        "dashboards:overview",
        "/dashboards/",
        "#dashboard[data-loaded='1']",
        ALL,
        phone=True,
    ),
    BrowserPage("usage", "accounting:report", "/usage/", "#usage", ("lead", "admin"), phone=True),
    BrowserPage(
        "preemptions",
        "scheduling:preemption_list",
        "/admin-area/preemptions/",
        "#preemptions",
        STAFF,
        phone=True,
    ),
    BrowserPage(
        "scheduler-config",
        "scheduling:config_edit",
        "/admin-area/config/",
        "#config-form",
        STAFF,
        phone=True,
    ),
    BrowserPage("nodes", "cluster:node_list", "/cluster/nodes/", "#nodes", STAFF, phone=True),
    BrowserPage("tenant-list", "tenants:tenant_list", "/tenants/", "#tenants", ALL),
    BrowserPage(
        "tenant-detail", "tenants:tenant_detail", "/tenants/{tenant}/", "#tenant-changes", ALL
    ),
    BrowserPage("tenant-edit", "tenants:tenant_edit", "/tenants/{tenant}/edit/", "#preview", STAFF),
    BrowserPage("api-tokens", "api:tokens", "/api/tokens/", "main", ALL),
    # Refusals: an admin page for a researcher, a page that does not exist, the Django
    # admin for someone who is not staff.
    BrowserPage(
        "forbidden",
        "scheduling:preemption_list",
        "/admin-area/preemptions/",
        "h1",
        ("researcher",),
        phone=True,
    ),
    BrowserPage("not-found", "", "/jobs/999999/", "h1", ("researcher",), phone=True),
    BrowserPage("admin-for-staff-only", "", "/admin/", "h1", ("researcher",), phone=True),
)

# URL names that are not pages of their own, and why.
NOT_PAGES = {
    "admin_login": "redirects to the login page (or explains the admin is for staff)",
    "logout": "POST only",
    "jobs:job_cancel": "POST only",
    "jobs:job_release": "POST only (a quarantined job's release button, site admins)",
    "tenants:tenant_default_queue": "POST only (the tenant page's default-queue form)",
    "jobs:job_sample": "the upload page's sample manifest, a YAML download",
    "jobs:job_live": "the job page's changing parts, swapped into it every few seconds",
    "queues:queue_preview": "JSON for the queue edit page",
    "tenants:tenant_preview": "JSON for the tenant edit page",
    "scheduling:preemption_csv": "CSV download",
    "scheduling:config_activate": "POST only",
    "dashboards:chart_data": "JSON for the dashboard",
    "api:token_revoke": "POST only (the token page's revoke buttons)",
    "api:schema": "OpenAPI document",
    "api:docs": "Swagger UI, a third-party page (its own accessibility)",
}
