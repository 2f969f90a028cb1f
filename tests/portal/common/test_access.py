"""The access rules: portal.common.access and each app's access module."""

import pytest
from django.contrib.auth.models import AnonymousUser

from portal.cluster import access as node_access
from portal.common import access
from portal.jobs import access as job_access
from portal.queues import access as queue_access
from portal.scheduling import access as scheduling_access
from portal.tenants import access as tenant_access
from portal.tenants.models import Membership
from tests.factories import (
    JobFactory,
    MembershipFactory,
    PreemptionEventFactory,
    QueueFactory,
    UserFactory,
)

pytestmark = pytest.mark.django_db


def test_is_site_admin_only_for_active_staff(staff, researcher):
    assert access.is_site_admin(staff) is True
    assert access.is_site_admin(researcher) is False
    assert access.is_site_admin(AnonymousUser()) is False
    staff.is_active = False
    assert access.is_site_admin(staff) is False


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


def test_nodes_are_seen_by_members_of_any_tenant_and_admins_only(
    researcher, outsider, staff, user, cluster
):
    for member in (researcher, outsider, staff):
        assert node_access.visible_nodes(member).count() == 4
    assert not node_access.visible_nodes(user).exists()  # signed in, in no tenant
    assert not node_access.visible_nodes(AnonymousUser()).exists()
    researcher.is_active = False
    assert not node_access.visible_nodes(researcher).exists()


def test_inactive_member_sees_nothing(researcher, nlp_queue):
    researcher.is_active = False
    assert not queue_access.visible_queues(researcher).exists()


def test_visible_jobs_scoped_to_tenants_not_submitter(researcher, nlp_queue, vision_queue):
    colleague_job = JobFactory(queue=nlp_queue)
    JobFactory(queue=vision_queue)
    assert list(job_access.visible_jobs(researcher)) == [colleague_job]


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


def test_can_cancel_job(researcher, lead, staff, outsider, nlp_queue):
    own = JobFactory(queue=nlp_queue, submitter=researcher)
    colleague = UserFactory()
    MembershipFactory(user=colleague, tenant=nlp_queue.tenant)
    others = JobFactory(queue=nlp_queue, submitter=colleague)
    assert job_access.can_cancel_job(researcher, own) is True
    assert job_access.can_cancel_job(researcher, others) is False
    assert job_access.can_cancel_job(lead, others) is True
    assert job_access.can_cancel_job(staff, others) is True
    assert job_access.can_cancel_job(outsider, own) is False
    assert job_access.can_cancel_job(AnonymousUser(), own) is False


def test_lead_and_member_tenants(lead, nlp, vision):
    assert list(tenant_access.lead_tenants(lead)) == [nlp]
    assert set(tenant_access.member_tenants(lead)) == {nlp, vision}


@pytest.mark.parametrize(
    ("who", "role", "expected"),
    [
        ("researcher", access.ROLE_MEMBER, True),
        ("researcher", access.ROLE_LEAD, False),
        ("researcher", access.ROLE_STAFF, False),
        ("lead", access.ROLE_LEAD, True),
        ("lead", access.ROLE_STAFF, False),
        ("staff", access.ROLE_STAFF, True),
        ("staff", access.ROLE_LEAD, True),
    ],
)
def test_has_role(request, who, role, expected):
    assert tenant_access.has_role(request.getfixturevalue(who), role) is expected


def test_user_without_tenant_has_no_member_role(user):
    assert tenant_access.has_role(user, access.ROLE_MEMBER) is False
    assert not queue_access.visible_queues(user).exists()


def test_queue_of_other_tenant_not_editable_even_if_same_name_prefix(lead, vision):
    other = QueueFactory(tenant=vision, name="nlp-lookalike")
    assert queue_access.can_edit_queue(lead, other) is False


def test_can_release_job_only_for_site_admins(researcher, lead, staff, nlp_queue):
    job = JobFactory(queue=nlp_queue, submitter=researcher)
    assert job_access.can_release_job(staff, job) is True
    assert job_access.can_release_job(lead, job) is False
    assert job_access.can_release_job(researcher, job) is False
    assert job_access.can_release_job(AnonymousUser(), job) is False


def test_evictions_are_for_site_admins(researcher, lead, staff):
    assert scheduling_access.can_see_evictions(staff) is True
    assert scheduling_access.can_see_evictions(lead) is False
    assert scheduling_access.can_see_evictions(researcher) is False


def test_readable_preemptions_need_both_jobs_visible(
    researcher, outsider, staff, nlp_queue, vision_queue
):
    mine = JobFactory(queue=nlp_queue)
    theirs = JobFactory(queue=vision_queue)
    by_mine = PreemptionEventFactory(victim_job=mine, preemptor_job=JobFactory(queue=nlp_queue))
    by_theirs = PreemptionEventFactory(victim_job=mine, preemptor_job=theirs)
    by_nobody = PreemptionEventFactory(victim_job=mine, preemptor_job=None)
    of_theirs = PreemptionEventFactory(victim_job=theirs, preemptor_job=None)
    events = [by_mine, by_theirs, by_nobody, of_theirs]
    assert job_access.readable_preemptions(researcher, events) == {by_mine.pk, by_nobody.pk}
    assert job_access.readable_preemptions(outsider, events) == {of_theirs.pk}
    assert job_access.readable_preemptions(staff, events) == {e.pk for e in events}
    assert job_access.readable_preemptions(AnonymousUser(), events) == set()


def test_visible_queue_names(researcher, lead, staff, nlp, vision, nlp_queue, vision_queue):
    assert queue_access.visible_queue_names(staff) is None
    assert queue_access.visible_queue_names(staff, tenant=vision) == {"vision-train"}
    assert queue_access.visible_queue_names(researcher) == {"nlp-train"}
    assert queue_access.visible_queue_names(lead) == {"nlp-train", "vision-train"}
    assert queue_access.visible_queue_names(lead, tenant=nlp) == {"nlp-train"}
    assert queue_access.visible_queue_names(AnonymousUser()) == set()
