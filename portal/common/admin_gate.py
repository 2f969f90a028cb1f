"""Who reaches the Django admin's login: anonymous users go to the portal's own (throttled)
login page; a signed-in user who is not staff is told the admin is for staff, instead of
being shown a login form they have already passed."""

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from .access import is_site_admin

ADMIN_FOR_STAFF = (
    "The Django admin is for site staff. Everything your role allows is in the menu above."
)


def admin_login(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated and not is_site_admin(request.user):
        return render(request, "403.html", {"exception": ADMIN_FOR_STAFF}, status=403)
    next_url = request.GET.get("next")
    if next_url:
        return redirect_to_login(next_url)
    return redirect("login")
