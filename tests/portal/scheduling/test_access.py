"""portal.scheduling.access: who may read the scheduler's history and read or change its conf."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.scheduling import access as scheduling_access

pytestmark = pytest.mark.django_db

RULES = [
    scheduling_access.can_see_evictions,
    scheduling_access.can_see_scheduler_config,
    scheduling_access.can_change_scheduler_config,
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_site_admins_are_allowed(rule, staff):
    assert rule(staff) is True


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
def test_leads_researchers_and_anonymous_users_are_denied(rule, researcher, lead, staff):
    assert rule(lead) is False
    assert rule(researcher) is False
    assert rule(AnonymousUser()) is False
    staff.is_active = False
    assert rule(staff) is False
