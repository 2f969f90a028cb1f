"""`/api/`: v1 endpoints, the OpenAPI schema, its browsable UI and the token page."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from portal.accounting import apis as accounting_apis
from portal.cluster import apis as cluster_apis
from portal.jobs import apis as job_apis
from portal.queues import apis as queue_apis
from portal.scheduling import apis as scheduling_apis
from portal.tenants import apis as tenant_apis

from .apis import TokenCreateApi, TokenRevokeApi
from .base import by_method
from .views import ApiTokenRevokeView, ApiTokenView

app_name = "api"

v1 = [
    path(
        "auth/token/",
        by_method("TokenApi", post=TokenCreateApi, delete=TokenRevokeApi),
        name="token_create",
    ),
    path(
        "jobs/",
        by_method("JobsApi", get=job_apis.JobListApi, post=job_apis.JobCreateApi),
        name="jobs",
    ),
    path("jobs/render/", job_apis.JobRenderApi.as_view(), name="job_render"),
    path("jobs/<int:job_id>/", job_apis.JobDetailApi.as_view(), name="job_detail"),
    path("jobs/<int:job_id>/cancel/", job_apis.JobCancelApi.as_view(), name="job_cancel"),
    path("jobs/<int:job_id>/why/", job_apis.JobWhyApi.as_view(), name="job_why"),
    path("jobs/<int:job_id>/logs/", job_apis.JobLogsApi.as_view(), name="job_logs"),
    path("jobs/<int:job_id>/release/", job_apis.JobReleaseApi.as_view(), name="job_release"),
    path("queues/", queue_apis.QueueListApi.as_view(), name="queues"),
    path(
        "queues/<int:queue_id>/",
        by_method("QueueApi", get=queue_apis.QueueDetailApi, patch=queue_apis.QueueUpdateApi),
        name="queue_detail",
    ),
    path(
        "queues/<int:queue_id>/changes/",
        queue_apis.QueueChangeListApi.as_view(),
        name="queue_changes",
    ),
    path("queues/<int:queue_id>/usage/", queue_apis.QueueUsageApi.as_view(), name="queue_usage"),
    path("tenants/", tenant_apis.TenantListApi.as_view(), name="tenants"),
    path(
        "tenants/<int:tenant_id>/",
        by_method("TenantApi", get=tenant_apis.TenantDetailApi, patch=tenant_apis.TenantUpdateApi),
        name="tenant_detail",
    ),
    path(
        "tenants/<int:tenant_id>/default-queue/",
        tenant_apis.TenantDefaultQueueApi.as_view(),
        name="tenant_default_queue",
    ),
    path(
        "tenants/<int:tenant_id>/changes/",
        tenant_apis.TenantChangeListApi.as_view(),
        name="tenant_changes",
    ),
    path("nodes/", cluster_apis.NodeListApi.as_view(), name="nodes"),
    path("nodes/<int:node_id>/", cluster_apis.NodeDetailApi.as_view(), name="node_detail"),
    path("preemptions/", scheduling_apis.PreemptionListApi.as_view(), name="preemptions"),
    path("usage/report/", accounting_apis.UsageReportApi.as_view(), name="usage_report"),
    path(
        "scheduler-configs/",
        by_method(
            "SchedulerConfigsApi",
            get=scheduling_apis.SchedulerConfigListApi,
            post=scheduling_apis.SchedulerConfigCreateApi,
        ),
        name="scheduler_configs",
    ),
    path(
        "scheduler-configs/<int:config_id>/",
        scheduling_apis.SchedulerConfigDetailApi.as_view(),
        name="scheduler_config_detail",
    ),
    path(
        "scheduler-configs/<int:config_id>/activate/",
        scheduling_apis.SchedulerConfigActivateApi.as_view(),
        name="scheduler_config_activate",
    ),
]

urlpatterns = [
    *[path(f"v1/{p.pattern}", p.callback, name=p.name) for p in v1],
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves Swagger UI's init script as its own request: no inline script.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
    path("tokens/", ApiTokenView.as_view(), name="tokens"),
    path("tokens/<int:token_id>/revoke/", ApiTokenRevokeView.as_view(), name="token_revoke"),
]
