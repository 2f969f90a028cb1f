from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.urls import include, path

from portal.common.admin_gate import admin_login
from portal.common.login_throttle import ThrottledLoginView
from portal.home import HomeView


def favicon(request: HttpRequest) -> HttpResponse:
    """Browsers ask for /favicon.ico on pages without an icon link (the admin, the API docs)."""
    return redirect(static("favicon.svg"), permanent=True)


urlpatterns = [
    path("", HomeView.as_view(), name="home"),
    # The admin's own login form would bypass the login throttle: send it to ours.
    path("admin/login/", admin_login, name="admin_login"),
    path("admin/", admin.site.urls),
    path("accounts/login/", ThrottledLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("jobs/", include("portal.jobs.urls")),
    path("queues/", include("portal.queues.urls")),
    path("tenants/", include("portal.tenants.urls")),
    path("admin-area/", include("portal.scheduling.urls")),
    path("api/", include("portal.api.urls")),
    path("cluster/", include("portal.cluster.urls")),
    path("dashboards/", include("portal.dashboards.urls")),
    path("usage/", include("portal.accounting.urls")),
    path("favicon.ico", favicon),
]

handler404 = "portal.common.views.page_not_found"
handler500 = "portal.common.views.server_error"
