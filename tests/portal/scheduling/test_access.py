"""portal.scheduling.access: what of the scheduler's history a user may read."""

import pytest

from portal.scheduling import access as scheduling_access

pytestmark = pytest.mark.django_db


def test_evictions_are_for_site_admins(researcher, lead, staff):
    assert scheduling_access.can_see_evictions(staff) is True
    assert scheduling_access.can_see_evictions(lead) is False
    assert scheduling_access.can_see_evictions(researcher) is False
