from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

from portal.common.views import HomeView

urlpatterns = [
    path("", HomeView.as_view(), name="home"),
    path("admin/", admin.site.urls),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(template_name="registration/login.html"),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", include("portal.jobs.urls")),
    path("queues/", include("portal.queues.urls")),
    path("admin-area/", include("portal.scheduling.urls")),
    path("api/", include("portal.api.urls")),
    path("cluster/", include("portal.cluster.urls")),
    path("dashboards/", include("portal.dashboards.urls")),
]

handler404 = "portal.common.views.page_not_found"
handler500 = "portal.common.views.server_error"
