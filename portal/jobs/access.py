"""Which jobs a user sees and what they may do to them (see portal.common.access)."""

from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db.models import QuerySet

from portal.common.access import AnyUser, is_site_admin
from portal.tenants.access import is_lead, member_tenants

from .models import Job

if TYPE_CHECKING:
    from portal.scheduling.models import PreemptionEvent


def visible_jobs(user: AnyUser) -> QuerySet[Job]:
    if is_site_admin(user):
        return Job.objects.all()
    return Job.objects.filter(tenant__in=member_tenants(user))


def can_cancel_job(user: AnyUser, job: Job) -> bool:
    if is_site_admin(user):
        return True
    if not user.is_authenticated:
        return False
    if job.submitter_id == user.pk:
        return True
    return is_lead(user, job.tenant)


def can_release_job(user: AnyUser, job: Job) -> bool:
    """Send a quarantined job back to pending: site admins only (the job's cause is theirs to
    judge). Whether the job is quarantined is the state machine's question, not this one."""
    return is_site_admin(user)


def visible_job_ids(user: AnyUser, ids: Iterable[int | None]) -> set[int]:
    """Those of `ids` (None ignored) that are jobs `user` sees: pages name these and hide the
    others (another tenant's job appears without its name)."""
    wanted = {pk for pk in ids if pk is not None}
    return set(visible_jobs(user).filter(pk__in=wanted).values_list("pk", flat=True))


def readable_preemptions(user: AnyUser, events: Iterable["PreemptionEvent"]) -> set[int]:
    """Ids of the preemption events whose sentence (both jobs by name) `user` may read: every
    one for a site admin; otherwise those whose victim and preemptor (if any) the user sees."""
    events = list(events)
    if is_site_admin(user):
        return {event.pk for event in events}
    ids = [event.victim_job_id for event in events] + [event.preemptor_job_id for event in events]
    seen = visible_job_ids(user, ids)
    return {event.pk for event in events if _both_seen(event, seen)}


def _both_seen(event: "PreemptionEvent", seen: set[int]) -> bool:
    if event.victim_job_id not in seen:
        return False
    if event.preemptor_job_id is None:
        return True
    return event.preemptor_job_id in seen
