"""portal.api.access: who may revoke which API token."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.api.access import can_revoke_token
from portal.api.services import api_token_create

pytestmark = pytest.mark.django_db


def test_the_owner_and_site_admins_may_revoke_a_token(researcher, staff):
    token, _ = api_token_create(user=researcher, name="laptop")
    assert can_revoke_token(researcher, token) is True
    assert can_revoke_token(staff, token) is True


def test_nobody_else_may_revoke_a_token(researcher, lead, outsider, staff):
    token, _ = api_token_create(user=researcher, name="laptop")
    # The researcher's own tenant lead has no say over the researcher's credentials.
    assert can_revoke_token(lead, token) is False
    assert can_revoke_token(outsider, token) is False
    assert can_revoke_token(AnonymousUser(), token) is False
    staff.is_active = False
    assert can_revoke_token(staff, token) is False
