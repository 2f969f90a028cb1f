"""portal.queues.access: which queues a user sees, edits and submits to."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.jobs import access as job_access
from portal.queues import access as queue_access
from portal.tenants.models import Membership
from tests.factories import (
    JobFactory,
    QueueFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def test_researcher_sees_only_their_tenants_queues(researcher, nlp_queue, vision_queue):
    assert list(queue_access.visible_queues(researcher)) == [nlp_queue]


def test_member_of_two_tenants_sees_both(lead, nlp_queue, vision_queue):
    assert set(queue_access.visible_queues(lead)) == {nlp_queue, vision_queue}


def test_staff_sees_all_queues_and_jobs(staff, nlp_queue, vision_queue):
    jobs = [JobFactory(queue=nlp_queue), JobFactory(queue=vision_queue)]
    assert set(queue_access.visible_queues(staff)) == {nlp_queue, vision_queue}
    assert set(job_access.visible_jobs(staff)) == set(jobs)


def test_anonymous_sees_nothing(nlp_queue):
    JobFactory(queue=nlp_queue)
    assert not queue_access.visible_queues(AnonymousUser()).exists()
    assert not job_access.visible_jobs(AnonymousUser()).exists()


def test_inactive_member_sees_nothing(researcher, nlp_queue):
    researcher.is_active = False
    assert not queue_access.visible_queues(researcher).exists()


def test_can_submit_to(researcher, staff, nlp_queue, vision_queue):
    assert queue_access.can_submit_to(researcher, nlp_queue) is True
    assert queue_access.can_submit_to(researcher, vision_queue) is False
    assert queue_access.can_submit_to(staff, vision_queue) is True


@pytest.mark.parametrize("who", ["researcher", "lead", "outsider", "staff", "anonymous"])
def test_visible_queue_get_answers_as_visible_queues(request, who, nlp_queue, vision_queue):
    user = AnonymousUser() if who == "anonymous" else request.getfixturevalue(who)
    visible = set(queue_access.visible_queues(user))
    for queue in (nlp_queue, vision_queue):
        for lookup in ({"pk": queue.pk}, {"name": queue.name}):
            found = queue_access.visible_queue_get(user, **lookup)
            assert (found == queue) is (queue in visible), (who, lookup)
    assert queue_access.visible_queue_get(user, name="no-such-queue") is None


def _values(instance):
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.fields}


def test_visible_queue_get_loads_every_column_as_the_orm_does(researcher, nlp_queue):
    found = queue_access.visible_queue_get(researcher, name=nlp_queue.name)
    expected = queue_access.visible_queues(researcher).select_related("tenant").get(pk=nlp_queue.pk)
    assert _values(found) == _values(expected)
    assert _values(found.tenant) == _values(expected.tenant)
    assert found._state.adding is False
    assert found._state.db == expected._state.db


def test_can_submit_to_asks_for_the_membership_even_after_a_scoped_lookup(
    researcher, nlp_queue, django_assert_num_queries
):
    queue = queue_access.visible_queue_get(researcher, pk=nlp_queue.pk)
    with django_assert_num_queries(1):
        assert queue_access.can_submit_to(researcher, queue) is True
    assert queue_access.can_submit_to(UserFactory(), queue) is False
    # The answer is the membership's at the time of asking, not the lookup's.
    Membership.objects.filter(user=researcher).delete()
    assert queue_access.can_submit_to(researcher, queue) is False


def test_can_edit_queue(researcher, lead, staff, nlp_queue, vision_queue):
    assert queue_access.can_edit_queue(researcher, nlp_queue) is False
    assert queue_access.can_edit_queue(lead, nlp_queue) is True
    assert queue_access.can_edit_queue(lead, vision_queue) is False  # only a researcher there
    assert queue_access.can_edit_queue(staff, vision_queue) is True


def test_queue_of_other_tenant_not_editable_even_if_same_name_prefix(lead, vision):
    other = QueueFactory(tenant=vision, name="nlp-lookalike")
    assert queue_access.can_edit_queue(lead, other) is False


def test_visible_queue_names(researcher, lead, staff, nlp, vision, nlp_queue, vision_queue):
    assert queue_access.visible_queue_names(staff) is None
    assert queue_access.visible_queue_names(staff, tenant=vision) == {"vision-train"}
    assert queue_access.visible_queue_names(researcher) == {"nlp-train"}
    assert queue_access.visible_queue_names(lead) == {"nlp-train", "vision-train"}
    assert queue_access.visible_queue_names(lead, tenant=nlp) == {"nlp-train"}
    assert queue_access.visible_queue_names(AnonymousUser()) == set()
