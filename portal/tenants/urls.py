from django.urls import path

from . import views

app_name = "tenants"

urlpatterns = [
    path("", views.TenantListView.as_view(), name="tenant_list"),
    path("<int:tenant_id>/", views.TenantDetailView.as_view(), name="tenant_detail"),
    path("<int:tenant_id>/edit/", views.TenantEditView.as_view(), name="tenant_edit"),
    path("<int:tenant_id>/preview/", views.TenantPreviewView.as_view(), name="tenant_preview"),
    path(
        "<int:tenant_id>/default-queue/",
        views.TenantDefaultQueueView.as_view(),
        name="tenant_default_queue",
    ),
]
