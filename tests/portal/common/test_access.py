"""portal.common.access: the rules that need only the user."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.common import access

pytestmark = pytest.mark.django_db


def test_is_site_admin_only_for_active_staff(staff, researcher):
    assert access.is_site_admin(staff) is True
    assert access.is_site_admin(researcher) is False
    assert access.is_site_admin(AnonymousUser()) is False
    staff.is_active = False
    assert access.is_site_admin(staff) is False
