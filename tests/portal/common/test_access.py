"""portal.common.access: the rules that need only the user."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse

from portal.common import access

pytestmark = pytest.mark.django_db


def test_is_site_admin_only_for_active_staff(staff, researcher):
    assert access.is_site_admin(staff) is True
    assert access.is_site_admin(researcher) is False
    assert access.is_site_admin(AnonymousUser()) is False
    staff.is_active = False
    assert access.is_site_admin(staff) is False


def _view_behind(rule):
    @access.rule_required(rule, access.ROLE_LEAD)
    def view(request):
        return HttpResponse("inside")

    return view


def test_rule_required_sends_anonymous_users_to_the_login_page(rf):
    request = rf.get("/somewhere/")
    request.user = AnonymousUser()
    response = _view_behind(lambda user: True)(request)
    assert response.status_code == 302
    assert "next=/somewhere/" in response["Location"]


def test_rule_required_asks_the_rule_with_the_signed_in_user(rf, researcher, staff):
    asked = []

    def rule(user):
        asked.append(user)
        return user == staff

    view = _view_behind(rule)
    request = rf.get("/")
    request.user = staff
    assert view(request).content == b"inside"
    request.user = researcher
    with pytest.raises(PermissionDenied, match="needs the lead role"):
        view(request)
    assert asked == [staff, researcher]
